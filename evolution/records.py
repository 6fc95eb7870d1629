"""What a search hands out and records: a `Trial` (an asked candidate), its `Outcome` (a told
result), and the helpers that check a genotype and compare journal contents.

Plain values only: this module must not import TensorFlow or Ray, and holds no search state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from searchspace import SearchSpace

Measure = Callable[[Any], Mapping[str, float]]  # a genotype's figures known before training (size)


@dataclass(frozen=True)
class Trial:
    trial_id: int
    genotype: Any
    parent_id: int | None
    mutation: str  # "random" for a sampled genotype, else the space's mutation description
    start_rung: int = 0  # with rungs: the rung this hand-out trains from (> 0: a continued or re-issued trial)
    stops: Mapping[str, Any] | None = None  # a time-to-target search's stops for it (evolution/target_race.py)
    screened: tuple[Mapping[str, Any], ...] = ()  # the children a screen passed over for it, with their scores


@dataclass(frozen=True)
class Outcome:
    status: str  # "ok", "failed" (NaN, OOM, timeout, an error) or "infeasible" (over a limit)
    metrics: Mapping[str, Any]
    error: str | None = None
    told_at: float | None = None  # wall-clock time of the tell (seconds since the epoch)
    reused_from: int | None = None  # a result taken from this earlier trial of the same network (evolution/repeats.py)


def as_json(value: Any) -> Any:
    """`value` as it comes back from JSON (tuples as lists): how a journal's contents compare."""
    return json.loads(json.dumps(value))


def genotype_of(space: SearchSpace, genotype: Any, where: str = "genotype") -> Any:
    """`genotype` (one of the space's, or its JSON) checked against `space`; errors say `where`."""
    data = genotype.to_json() if hasattr(genotype, "to_json") else genotype
    try:
        return space.genotype_from_json(data)
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{where}: not a genotype of the {space.name} space: {err}") from None
