"""A race figure a second run agrees with (issue 55), beside the wall-clock race of the headline
(experiments/promote/headline.py): each contender's steps to the target at each of --race_seeds
seeds (training is deterministic given the seed: the same accuracies to the image on any host)
times its training step timed interleaved with the others' in rounds on one machine
(trainer/step_timing.py), so the host's drift between runs, which moves a wall-clock race by 30%,
hits every net alike. The search's pick against each baseline: the ratio of those products, with
a 95% interval over the seeds and the rounds (Student's t on the log ratio; rounds paired: both nets
timed in each).

- SEED_RUN: the kind of a contender trained again at another seed (its row NAME-seedS, never a
  contender itself); `with_seed_runs` plans them.
- `seed_steps`: each contender's steps to the target at each seed (None: not reached).
- `ratio_interval`: the ratio and its interval; `seed_race_sentences`: what promote and the report say.

Pure pandas and scipy: this module must not read files, train or import TensorFlow.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from typing import Any, Mapping, Sequence

import pandas as pd
from scipy.stats import t as student_t

from experiments.promote.comparison import contenders, search_picks, twin_of
from experiments.promote.headline import race_target
from experiments.promote.targets import first_eval_at

SEED_RUN = "seed"
STEP_SECONDS = "step_seconds.json"  # the promote dir's interleaved step timings: {"rounds", "steps", "seconds"}
_SEED_NAME = re.compile(r"^(?P<name>.+)-seed(?P<seed>\d+)$")


def seed_name(name: str, seed: int) -> str:
    return f"{name}-seed{seed}"


def racers(planned: Sequence[Any]) -> list[Any]:
    """The planned models a seed race trains again and times: each search's first-ranked net and every
    baseline (a searched twin of a baseline is that baseline)."""
    return [m for m in planned if not m.same_as and (m.kind == "baseline" or (m.kind == "searched"
                                                                               and (m.search_rank or 1) == 1))]


def with_seed_runs(planned: list[Any], seed: int, seeds: int) -> list[Any]:
    """`planned` with each racer trained again at seed+1 .. seed+seeds-1 (kind SEED_RUN)."""
    extra = [dataclasses.replace(m, name=seed_name(m.name, s), kind=SEED_RUN,
                                 recipe_changes={**(m.recipe_changes or {}), "seed": s})
             for m in racers(planned) for s in range(seed + 1, seed + seeds)]
    return planned + extra


def steps_to(history: Sequence[Mapping[str, Any]], target: float, metric: str = "top1") -> int | None:
    """The training steps at the first evaluation at or over `target` (None: never)."""
    row = first_eval_at(list(history), metric, target)
    return int(row["step"]) if row else None


def seed_steps(table: pd.DataFrame, histories: Mapping[str, Sequence[Mapping[str, Any]]], target: float
               ) -> dict[str, list[int | None]]:
    """Each contender's steps to top-1 `target` at its own seed, then at each seed run's, in seed order."""
    runs: dict[str, list[tuple[int, str]]] = {}
    for name in table.name:
        match = _SEED_NAME.match(str(name))
        if match:
            runs.setdefault(match["name"], []).append((int(match["seed"]), str(name)))
    named = {name: [name] + [n for _, n in sorted(runs.get(name, []))] for name in contenders(table).name}
    return {name: [steps_to(histories.get(n) or [], target) for n in names] for name, names in named.items()}


def ratio_interval(steps: Sequence[int], seconds: Sequence[float], other_steps: Sequence[int],
                   other_seconds: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """mean(steps) x median(seconds) over the other's, and Student's t interval on its logarithm: the
    seeds' spread of log steps (each net's own) and the rounds' spread of the log step ratio (paired:
    both nets timed in each round) summed, with the fewest of seeds and rounds less one as the degrees
    of freedom (wide with 2 of either: few seeds cannot say more); NaN bounds with a single one."""
    point = (statistics.mean(steps) * statistics.median(seconds)) / (
        statistics.mean(other_steps) * statistics.median(other_seconds))
    spreads = [[math.log(s) for s in steps], [math.log(s) for s in other_steps],
               [math.log(a / b) for a, b in zip(seconds, other_seconds)]]
    fewest = min(map(len, spreads))
    if fewest < 2:
        return point, math.nan, math.nan
    error = math.sqrt(sum(statistics.variance(xs) / len(xs) for xs in spreads))
    t = student_t.ppf(0.5 + level / 2, fewest - 1)
    return point, point * math.exp(-t * error), point * math.exp(t * error)


def seed_race_sentences(table: pd.DataFrame, histories: Mapping[str, Sequence[Mapping[str, Any]]],
                        step_seconds: Mapping[str, Sequence[float]], target: float | None = None) -> list[str]:
    """The pick against each baseline at their own pace, or why it cannot be said; none without seed
    runs or step timings. `target`: the headline's race target unless given."""
    if target is None and not table.empty:
        target = race_target(table, contenders(table), histories)[0]
    picks = search_picks(table)
    if target is None or picks.empty or not step_seconds or not (table.kind == SEED_RUN).any():
        return []
    steps, pick = seed_steps(table, histories, target), str(picks.iloc[0]["name"])
    if twin_of(picks.iloc[0]) or pick not in steps or pick not in step_seconds:  # a twin races as its baseline
        return []
    rounds = len(step_seconds[pick])
    said = [f"At each net's own pace (its training steps to top-1 {target:.4g} at {len(steps[pick])} seeds x its "
            f"median step, timed interleaved with the others' in {rounds} rounds on this machine):"]
    if None in steps[pick]:
        return said + [f"the search's pick ({pick}) did not reach it at every seed (steps {steps[pick]})."]
    for name, theirs in steps.items():
        if name == pick or name not in step_seconds:
            continue
        if None in theirs:
            said.append(f"{name} did not reach it at every seed (steps {theirs}).")
            continue
        ratio, low, high = ratio_interval(steps[pick], step_seconds[pick], theirs, step_seconds[name])
        interval = (f"95% interval {low:.2f}-{high:.2f} over seeds and rounds" if not math.isnan(low) else
                    "no interval from a single seed or round")
        said.append(f"the search's pick ({pick}) takes {ratio:.2f}x the time of {name} [{interval}] (steps "
                    f"{steps[pick]} against {theirs}; step {statistics.median(step_seconds[pick]):.3g} s against "
                    f"{statistics.median(step_seconds[name]):.3g} s).")
    return said
