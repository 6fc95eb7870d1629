"""What a cost-aware search found on a tabular benchmark, scored against what the table holds.

- `found_front`: the evaluated cells no other evaluated cell beats on every searched goal.
- `TableFront`: the table's own front in the scored space (the report metric in place of the first
  goal, the other goals as they are), its exact hypervolume, and `hypervolume_fraction` of a set of
  found cells against it. The reference point is the front's nadir (its worst value on each axis), so
  only cells within the front's range count, as is usual for benchmark fronts.
- `LimitGaps`: for each limit on a cost column, the best report value of any cell under it minus
  the best report value among the cells of the search's front under it (none there counts as the
  worst cell under it). The table's own front by the searched goals is the floor.

The report metric is taken as larger-better (an accuracy). Reads tables only: no training, no
TensorFlow, no Ray; it must not import experiments/simulate/tabular.py (which imports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence

import numpy as np

from evolution.objectives import Goal
from evolution.pareto import front, hypervolume


class Table(Protocol):
    """What is read of a table (experiments/simulate/tabular.py's `Table`, which imports this module): each
    cell's report metric and every column read, by canonical key."""

    report: Mapping[str, float]
    columns: Mapping[str, Mapping[str, float]]

PERCENTILES = (5, 15, 25, 35, 45, 55, 65, 75, 85, 95)  # of the cost column: the limits gaps are given at


def _points(table: Table, keys: Sequence[str], goals: Sequence[Goal], first: str | None = None) -> list[tuple]:
    """Each key's goal values, signed larger-better (the first goal's column replaced by `first`)."""
    # the first goal is the search metric (run_benchmark checks it); `first` scores in its place
    columns = [first or goals[0].metric, *(g.metric for g in goals[1:])]
    signs = [1.0 if g.mode == "max" else -1.0 for g in goals]
    return [tuple(s * table.columns[c][k] for c, s in zip(columns, signs)) for k in keys]


def found_front(table: Table, keys: Sequence[str], goals: Sequence[Goal]) -> list[str]:
    """The distinct evaluated cells no other evaluated cell beats on every goal, in evaluation order."""
    distinct = list(dict.fromkeys(keys))
    return [distinct[i] for i in front(_points(table, distinct, goals))]


@dataclass(frozen=True)
class TableFront:
    """The table's front with the report metric in place of the first goal, and its hypervolume."""

    goals: tuple[Goal, ...]
    report_metric: str
    reference: tuple[float, ...]
    keys: tuple[str, ...]
    volume: float

    @classmethod
    def of(cls, table: Table, goals: Sequence[Goal], report_metric: str) -> "TableFront":
        every = list(table.report)
        points = _points(table, every, goals, report_metric)
        on_front = front(points)
        reference = tuple(min(points[i][d] for i in on_front) for d in range(len(goals)))  # the front's nadir
        volume = hypervolume([points[i] for i in on_front], reference)
        return cls(tuple(goals), report_metric, reference, tuple(every[i] for i in on_front), volume)

    def hypervolume_fraction(self, table: Table, keys: Sequence[str]) -> float:
        """The hypervolume of `keys`, scored by the report metric, as a share of the table front's."""
        points = _points(table, list(dict.fromkeys(keys)), self.goals, self.report_metric)
        return hypervolume(points, self.reference) / self.volume if self.volume > 0 else float("nan")


def percentile_limits(table: Table, cost_column: str, percentiles: Sequence[float] = PERCENTILES) -> list[float]:
    return [float(v) for v in np.percentile(list(table.columns[cost_column].values()), percentiles)]


@dataclass(frozen=True)
class LimitGaps:
    """Limits on a cost column, with the table's best and worst report value under each."""

    cost_column: str
    limits: tuple[float, ...]
    best: tuple[float, ...]
    worst: tuple[float, ...]

    @classmethod
    def of(cls, table: Table, cost_column: str, limits: Sequence[float]) -> "LimitGaps":
        cost = table.columns[cost_column]
        under = [[v for k, v in table.report.items() if cost[k] <= limit] for limit in limits]
        empty = [limit for limit, values in zip(limits, under) if not values]
        if empty:
            raise ValueError(f"limits {empty}: no cell of the table is under them ({cost_column})")
        return cls(cost_column, tuple(limits), tuple(map(max, under)), tuple(map(min, under)))

    def gaps(self, table: Table, found: Sequence[str]) -> np.ndarray:
        """Per limit: the table's best report value under it minus the best among the `found` cells
        under it (a search's front; none under the limit counts as the worst cell there)."""
        cost = self.cost_column and table.columns[self.cost_column]
        gaps = []
        for limit, best, worst in zip(self.limits, self.best, self.worst):
            under = [table.report[k] for k in found if cost[k] <= limit]
            gaps.append(best - (max(under) if under else worst))
        return np.array(gaps)
