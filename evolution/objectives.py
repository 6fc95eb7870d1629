"""What a search optimises and what it must not exceed: the measures a candidate reports (one
table), the goals read from them, MnasNet's soft reward and hard limits.

- `MEASURES`: every figure a trained candidate reports that a search may optimise or limit, with
  the direction that is better. A new objective is one entry here (and the trainer measuring it).
- `Goal`: one measure and its direction (`val_accuracy:max`); Pareto evolution takes several.
- `MnasReward`: accuracy x (cost / target)^weight (Tan et al. 2019, MnasNet; weight -0.07), one
  score that trades accuracy against any cost measure (a larger-is-better one, images_per_sec, with
  the weight turned round); it refuses a smaller-is-better objective.
- `Limits`: `max_<measure>` ceilings and `min_<measure>` floors (a size held, as a search for a
  faster net of the same capacity does); `violations` names each one a candidate's figures break.

Pure Python: this module must not import TensorFlow or Ray.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class Measure:
    mode: str  # "max" or "min": which way is better
    description: str


MEASURES: dict[str, Measure] = {
    "val_accuracy": Measure("max", "top-1 accuracy on the held-out validation images"),
    "params": Measure("min", "trainable parameters (batch norm's moving statistics are not counted)"),
    "multiply_adds": Measure("min", "multiply-adds of one image's forward pass"),
    "latency_ms": Measure("min", "inference latency at batch 1 on the trial's device, median of repeats (ms)"),
    "latency_ms_batch": Measure("min", "inference latency at the evaluation batch, median over its batches (ms)"),
    "step_ms": Measure("min", "steady-state training step time, median, first step excluded (ms)"),
    "images_per_sec": Measure("max", "steady-state training images per second"),
}
LIMITED = ("params", "multiply_adds", "latency_ms")  # the measures a search can put a ceiling on
SIZE_MEASURES = ("params", "multiply_adds")  # known before training: the measures a search can put a floor under
# The one list a trial's metrics may hold: a --target_accuracy trial's evaluations, [seconds, accuracy]
# each (trainer/candidate_loop.py writes it; the Tune adapter keeps it; experiments/search/ranking.py
# scores it again at a lower target). tests/test_convnet.py ties the trainer's key to this name.
CURVE_KEY = "target_curve"


@dataclass(frozen=True)
class Goal:
    """One measure and which way is better."""

    metric: str
    mode: str = "max"

    def __post_init__(self) -> None:
        if self.mode not in ("max", "min"):
            raise ValueError(f"objective {self.metric!r}: mode must be 'max' or 'min', got {self.mode!r}")
        if not self.metric:
            raise ValueError("objective: empty metric name")

    def signed(self, metrics: Mapping[str, Any]) -> float:
        """The metric, signed so that larger is better (KeyError when absent)."""
        value = float(metrics[self.metric])
        return value if self.mode == "max" else -value

    def __str__(self) -> str:
        return f"{self.metric}:{self.mode}"


def parse_goals(items: Sequence[str] | str, known: Mapping[str, Measure] | None = None) -> tuple[Goal, ...]:
    """`val_accuracy:max,latency_ms:min` (a string or its items) as goals; a name without a mode takes
    its measure's (from `known`, when given; names outside `known` are refused then)."""
    if isinstance(items, str):
        items = [item for item in items.split(",") if item.strip()]
    goals = []
    for item in items:
        metric, _, mode = item.strip().partition(":")
        if known is not None and metric not in known:
            raise ValueError(f"objectives: unknown measure {metric!r}; known: {sorted(known)}")
        if not mode:
            if known is None:
                raise ValueError(f"objectives: {item!r} needs a mode, e.g. {metric}:max")
            mode = known[metric].mode
        goals.append(Goal(metric, mode))
    if len({g.metric for g in goals}) != len(goals):
        raise ValueError(f"objectives: a measure is named twice in {list(map(str, goals))}")
    return tuple(goals)


@dataclass(frozen=True)
class MnasReward:
    """MnasNet's soft reward: accuracy x (cost / target)^weight. With a negative weight a cell
    cheaper than the target gains a little, a dearer one loses a little (-0.07: twice the target
    costs 5% of the accuracy)."""

    cost_metric: str
    target: float
    weight: float = -0.07

    def __post_init__(self) -> None:
        if not self.target > 0:
            raise ValueError(f"latency_target_ms: must be positive, got {self.target}")
        if not self.cost_metric:
            raise ValueError("cost_metric: empty measure name")

    def check(self, objective: str, mode: str) -> None:
        """Refuse an objective the reward has no meaning for: it scales a larger-is-better one (an
        accuracy); a smaller-is-better one (a loss) scaled the same way would favour the dearer cell."""
        if mode != "max":
            raise ValueError(f"latency_target_ms: MnasNet's reward scales an objective where larger is better "
                             f"(an accuracy); {objective}:{mode} would favour the dearer cell. Search a "
                             "larger-is-better objective (--mode=max) or leave the reward out")

    @property
    def exponent(self) -> float:
        """The weight, turned round for a larger-is-better measure (images_per_sec): throughput is
        the inverse of a cost, so a faster cell than the target gains as a cheaper one does."""
        measure = MEASURES.get(self.cost_metric)
        return -self.weight if measure is not None and measure.mode == "max" else self.weight

    def score(self, accuracy: float, metrics: Mapping[str, Any]) -> float:
        cost = float(metrics[self.cost_metric])
        if not cost > 0:
            raise ValueError(f"{self.cost_metric} is {cost!r}: the reward needs a positive cost")
        return accuracy * (cost / self.target) ** self.exponent

    def to_config(self) -> dict[str, Any]:
        return {"cost_metric": self.cost_metric, "target": self.target, "weight": self.weight}

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> "MnasReward | None":
        return cls(**config) if config else None


@dataclass(frozen=True)
class Limits:
    """Ceilings and floors on measures (`{"params": 1e6, "latency_ms": 5.0}`, floors
    `{"params": 1.8e6}`); a figure above a ceiling or under a floor breaks it."""

    ceilings: Mapping[str, float]
    floors: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for kind, bounds in (("max", self.ceilings), ("min", self.floors)):
            for metric, bound in bounds.items():
                if not (isinstance(bound, (int, float)) and bound > 0 and math.isfinite(bound)):
                    raise ValueError(f"{kind}_{metric}: must be a positive number, got {bound!r}")
        for metric, floor in self.floors.items():
            if metric not in SIZE_MEASURES:
                raise ValueError(f"min_{metric}: a floor can only be put under {', '.join(SIZE_MEASURES)}")
            if floor > self.ceilings.get(metric, math.inf):
                raise ValueError(f"min_{metric}: {floor:g} is over max_{metric} ({self.ceilings[metric]:g})")

    @classmethod
    def from_config(cls, config: Mapping[str, float] | None) -> "Limits":
        """The inverse of `to_config`: `min_<measure>` keys are floors, the others ceilings."""
        config = dict(config or {})
        floors = {k[len("min_"):]: v for k, v in config.items() if k.startswith("min_")}
        return cls({k: v for k, v in config.items() if not k.startswith("min_")}, floors)

    def __bool__(self) -> bool:
        return bool(self.ceilings or self.floors)

    def violations(self, figures: Mapping[str, Any]) -> list[str]:
        """One phrase per bound the figures break ('params 1,234 over the limit of 1,000'); bounds
        whose measure is not among the figures are not judged."""
        broken = []
        for metric, ceiling in self.ceilings.items():
            value = figures.get(metric)
            if value is not None and float(value) > ceiling:
                broken.append(f"{metric} {_figure(value)} over the limit of {_figure(ceiling)} (--max_{metric})")
        for metric, floor in self.floors.items():
            value = figures.get(metric)
            if value is not None and float(value) < floor:
                broken.append(f"{metric} {_figure(value)} under the floor of {_figure(floor)} (--min_{metric})")
        return broken

    def to_config(self) -> dict[str, float]:
        return {**self.ceilings, **{f"min_{metric}": floor for metric, floor in self.floors.items()}}


def _figure(value: Any) -> str:
    value = float(value)
    return f"{value:,.0f}" if value >= 1000 and value.is_integer() else f"{value:.4g}"
