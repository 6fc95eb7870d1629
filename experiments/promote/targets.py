"""DAWNBench's measures to target accuracies, from a trained model's evaluation history: the wall
time of the first evaluation at or over each target (training and its evaluations, to the end of
that evaluation: the clock of a search's `time_to_target_s` too), what that time costs, and the training
compute spent by then (3x the forward multiply-adds per training image: the forward pass and a
backward pass of twice its cost, the usual estimate). One column of the comparison per measure,
metric and target, named by `column`; `parse_column` reads a name back (for the report).

Pure Python: this module must not import TensorFlow or Ray.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

MEASURES = ("time", "macs", "cost")  # seconds, training multiply-adds, price
TRAINING_MACS_PER_FORWARD = 3
_COLUMN = re.compile(r"^(time|macs|cost)_to_(top1|top5)(?:_([0-9.]+))?(?:_s)?$")


def column(measure: str, metric: str, target: float) -> str:
    """The comparison column of `measure` to `metric` >= `target`: time_to_top1_0.7_s, macs_to_top1_0.7,
    cost_to_top1_0.7."""
    return f"{measure}_to_{metric}_{target:g}" + ("_s" if measure == "time" else "")


def parse_column(name: str) -> tuple[str, str, float | None] | None:
    """(measure, metric, target) of a column `column` named; target None for the single-target
    names of comparisons written before there were several (time_to_top1_s); None for others."""
    match = _COLUMN.match(name)
    if not match:
        return None
    measure, metric, target = match.groups()
    return measure, metric, float(target) if target else None


def first_eval_at(history: list[dict[str, Any]], metric: str, target: float) -> dict[str, Any] | None:
    """The first evaluation (by step) at or over `target`, or None (a row without `metric`: not)."""
    for row in sorted(history, key=lambda r: r["step"]):
        if row.get(metric) is not None and row[metric] >= target:
            return row
    return None


def first_at(history: list[dict[str, Any]], metric: str, target: float) -> float | None:
    """DAWNBench's time to accuracy: the wall time of the first evaluation at or over `target`."""
    row = first_eval_at(history, metric, target)
    return float(row["wall_seconds"]) if row else None


def to_targets(history: list[dict[str, Any]], targets: dict[str, Iterable[float]], multiply_adds: int | None,
               batch_size: int, cost_per_hour: float) -> dict[str, float | None]:
    """Every measure to every target of `targets` ({"top1": (0.5, 0.7)}), by its column name."""
    row_of: dict[str, float | None] = {}
    for metric, values in targets.items():
        for target in values:
            row = first_eval_at(history, metric, target) if history else None
            seconds = float(row["wall_seconds"]) if row else None
            row_of[column("time", metric, target)] = seconds
            row_of[column("macs", metric, target)] = (
                float(TRAINING_MACS_PER_FORWARD * multiply_adds * row["step"] * batch_size)
                if row and multiply_adds else None)
            row_of[column("cost", metric, target)] = seconds / 3600 * cost_per_hour if seconds and cost_per_hour \
                else None
    return row_of
