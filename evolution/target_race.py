"""A time-to-target search's race: the stops a candidate is given before it trains, and which of a
parent's children trains. Each is a small step over the results so far, so the journal's replay
computes the same again (the ask event records them too).

- Stop what cannot win (`incumbent_seconds`): a candidate still short of the target when its
  clock passes the best time to target so far x `stop_margin` cannot beat it; it stops there and
  is scored as a miss by the accuracy it lacks (core/proxy_config.py), as at its time limit.
- Predict a miss (`miss_bounds`): at its i-th evaluation, a candidate under every hit's accuracy at
  their i-th evaluation by more than `miss_slack` (each evaluation index with at least `min_hits`
  hits; a reused result counts once) is predicted to miss and stops. `replay_stops` runs both
  rules over recorded curves in trial order: the hits they would have stopped (false stops) and the seconds they save
  (benchmarks/target_stops.py measures them on a search's journal).
- Screen children (`screen_children`): of that many mutations of the tournament's parent, the one
  SCREEN_SCORES's `screen_score` predicts fastest to the target trains (children not tried before
  first); the others are journaled with their scores and never trained.

Pure Python: this module must not import TensorFlow or Ray.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

from evolution.objectives import CURVE_KEY
from evolution.records import Outcome
from evolution.surrogate import features, fit_additive

# `algorithm` below: an evolution/base.py SearchAlgorithm, passed in (base imports this module)
HIT_KEY = "time_to_target_s"  # a hit's time to the target (None for a miss): core/proxy_config.py
SCREEN_STEP = "screen_step_ms"  # the figure --screen_score=step_ms reads (experiments/search/trial.py times it)
SCREEN_STEPS = 3  # steps it is timed over, after the trace
SURROGATE_ROWS = 300  # the latest successful trials the additive model is fitted to
MAX_BOUND = 0.999999  # a bound of hits at accuracy 1.0 (a small validation split): an accuracy is under 1


def _surrogate(algorithm: Any, children: Sequence[Any]) -> list[float]:
    """The additive model of the successful trials' fitness (evolution/surrogate.py), turned round:
    a smaller score predicts a shorter time; 0 for every child before any result."""
    scored = [t for t, o in algorithm.outcomes.items() if o.status == "ok" and o.reused_from is None][-SURROGATE_ROWS:]
    if not scored:
        return [0.0] * len(children)
    predict = fit_additive([features(algorithm.trials[t].genotype) for t in scored],
                           [algorithm.fitness(t) for t in scored])
    return [-predict(features(child)) for child in children]


def _figure(name: str) -> Callable[[Any, Sequence[Any]], list[float]]:
    """A size figure known before training (the search's size measure): smaller predicts faster."""
    return lambda algorithm, children: [float(algorithm._figures(child)[name]) for child in children]


@dataclass(frozen=True)
class Score:
    description: str
    score: Callable[[Any, Sequence[Any]], list[float]]  # smaller: predicted faster to the target
    measured: str = ""  # the figure the search's measure must give (a Ray worker builds each child)


# One entry per screening score; benchmarks/target_stops.py measures each one's Kendall tau against
# the time to target over a search's trained nets (benchmarks/README.md).
SCREEN_SCORES: dict[str, Score] = {
    "surrogate": Score("the additive model of the evaluated nets' scores (evolution/surrogate.py)", _surrogate),
    "params": Score("fewer trainable parameters", _figure("params"), "params"),
    "multiply_adds": Score("fewer multiply-adds per image", _figure("multiply_adds"), "multiply_adds"),
    "step_ms": Score("a faster training step, timed in a few steps of the child before it trains (a Ray worker "
                     "builds it)", _figure(SCREEN_STEP), SCREEN_STEP),
}


@dataclass(frozen=True)
class TargetRace:
    """The race's settings (the search's --stop_margin, --miss_slack, --min_hits, --screen_children and
    --screen_score)."""

    stop_margin: float = 0.0  # 0: no stop past the incumbent
    miss_slack: float = -1.0  # negative: no predicted miss
    min_hits: int = 3
    screen_children: int = 1  # 1: no screen
    screen_score: str = "surrogate"

    def __post_init__(self) -> None:
        if self.stop_margin and self.stop_margin < 1:
            raise ValueError(f"stop_margin: 0 (off) or at least 1 (a net stopped before the incumbent's own time "
                             f"could still have won), got {self.stop_margin}")
        if self.min_hits < 1 or self.screen_children < 1:
            raise ValueError(f"min_hits, screen_children: at least 1, got {self.min_hits}, {self.screen_children}")
        if self.screen_score not in SCREEN_SCORES:
            raise ValueError(f"screen_score: unknown {self.screen_score!r}; known: {sorted(SCREEN_SCORES)}")

    @property
    def acts(self) -> bool:
        """Whether any rule is on (a race with none is no race: the journal records none)."""
        return bool(self.stop_margin) or self.miss_slack >= 0 or self.screen_children > 1

    def to_config(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> "TargetRace | None":
        return cls(**config) if config else None

    def stops(self, outcomes: Mapping[int, Any]) -> dict[str, Any]:
        """A new trial's stops from the results so far: stop_after_s, stop_below (ProxyConfig's
        fields; those that apply)."""
        results = [o.metrics for o in outcomes.values() if o.status == "ok" and o.reused_from is None]
        stops: dict[str, Any] = {}
        best = incumbent_seconds(results)
        if self.stop_margin and best is not None:
            stops["stop_after_s"] = round(self.stop_margin * best, 3)
        if self.miss_slack >= 0:
            bounds = miss_bounds([r[CURVE_KEY] for r in results if hit(r)], self.miss_slack, self.min_hits)
            if any(bounds):
                stops["stop_below"] = bounds
        return stops

    def screened(self, algorithm: Any, parent: Any) -> tuple[Any, str, list[dict[str, Any]]]:
        """`screen_children` mutations of `parent`; the one predicted fastest (the first among equals,
        among those not tried before when there are any): (child, its mutation, the others with their
        scores, as the journal keeps them)."""
        drawn = [algorithm.space.mutate(parent, algorithm.rng) for _ in range(self.screen_children)]
        tried = {trial.genotype.key() for trial in algorithm.trials.values()}
        pool = [c for c in drawn if c[0].key() not in tried] or drawn
        scores = SCREEN_SCORES[self.screen_score].score(algorithm, [child for child, _ in pool])
        chosen = scores.index(min(scores))
        others = [{"mutation": description, "score": round(score, 6), "genotype": child.to_json()}
                  for i, ((child, description), score) in enumerate(zip(pool, scores)) if i != chosen]
        return pool[chosen][0], pool[chosen][1], others


def hit(metrics: Mapping[str, Any]) -> bool:
    """A result that reached the target, with its curve."""
    return metrics.get(HIT_KEY) is not None and bool(metrics.get(CURVE_KEY))


def incumbent_seconds(results: Sequence[Mapping[str, Any]]) -> float | None:
    """The best time to target among `results` (None before a hit)."""
    times = [float(r[HIT_KEY]) for r in results if r.get(HIT_KEY) is not None]
    return min(times) if times else None


def miss_bounds(hit_curves: Sequence[Sequence[Sequence[float]]], slack: float, min_hits: int) -> list[float]:
    """For each evaluation index: the lowest accuracy any hit had there, less `slack` (0 where fewer
    than `min_hits` hits were evaluated that often), up to the last index with a bound."""
    bounds = []
    for i in range(max((len(c) for c in hit_curves), default=0)):
        there = [curve[i][1] for curve in hit_curves if len(curve) > i]
        bounds.append(round(min(MAX_BOUND, max(0.0, min(there) - slack)), 6) if len(there) >= min_hits else 0.0)
    while bounds and not bounds[-1]:
        bounds.pop()
    return bounds


def stop_point(curve: Sequence[Sequence[float]], stops: Mapping[str, Any], target: float
               ) -> tuple[float, str] | None:
    """Where `stops` would have stopped a recorded `curve` (its evaluations' [seconds, accuracy])
    before it reached `target`: the clock then and which rule, or None. Past stop_after_s it stops
    at that time (an evaluation that ends after it is no hit, as the trainer judges it)."""
    bounds, after = stops.get("stop_below", ()), stops.get("stop_after_s")
    for i, (seconds, accuracy) in enumerate(curve):
        if after is not None and seconds >= after:
            return after, "past the incumbent"
        if accuracy >= target:
            return None
        if i < len(bounds) and accuracy < bounds[i]:
            return seconds, "predicted miss"
    return None


def replay_stops(results: Sequence[Mapping[str, Any]], race: TargetRace, target: float) -> list[dict[str, Any]]:
    """The race's stops run over a search's recorded `results` in trial order (each given the stops
    its predecessors would have set, all trained in full): for each, whether it hit, where it would
    have stopped and why, the seconds saved (its clock after that stop) and whether it was a winner
    (faster to the target than every trial before it)."""
    rows, before = [], {}
    for n, metrics in enumerate(results):
        stops = race.stops({k: Outcome("ok", m) for k, m in before.items()})
        curve = metrics.get(CURVE_KEY) or []
        where = stop_point(curve, stops, target)
        best = incumbent_seconds(list(before.values()))
        row = {"hit": hit(metrics), "stopped": where is not None, "rule": where[1] if where else "",
               "saved_s": max(0.0, curve[-1][0] - where[0]) if where else 0.0,
               "winner": hit(metrics) and (best is None or float(metrics[HIT_KEY]) < best)}  # the new incumbent
        rows.append(row)
        before[n] = metrics
    return rows


def kendall_tau(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Kendall's tau-b of two paired sequences (ties counted as neither; NaN when one is constant)."""
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + ties_x) * (concordant + discordant + ties_y)) ** 0.5
    return (concordant - discordant) / denominator if denominator else float("nan")
