"""A search on a tabular benchmark under a simulated wall-clock budget, with asynchronous workers
and fidelities (NAS-Bench-201's protocol: every evaluation is charged its training time).

The very algorithm classes `amoeba search` drives (evolution.ALGORITHMS, a rung rule from
evolution/rungs.py's RUNG_RULES by name), on a simulated clock: an evaluation at e epochs costs e
times the cell's cost column; a continued trial costs only its extra epochs; `workers` trials run
at once and each worker takes its next trial the moment it is free, so results reach the
algorithm in simulated finishing order, as Ray Tune delivers them. A trial the rule pauses frees
its worker untold; the worker's next `ask` may continue it from its rung (the promotion rule). No
training, no TensorFlow, no Ray.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from evolution import ALGORITHMS, make_algorithm
from evolution.rungs import CONTINUE, RUNG_RULES, STOP, Rungs
from experiments.simulate.tabular import SPACES, Table, TableCosts, check_objectives, sample_std

FRACTIONS = (0.1, 0.25, 0.5, 1.0)  # of the budget, where the summary is given
GRID_POINTS = 200  # the plotted curve's points over the budget


@dataclass(frozen=True)
class Fidelities:
    """Epochs -> the table's search-metric column at that many epochs, ascending; `rungs` (a subset
    of the epochs) are where a trial reports; without rungs every evaluation is at the first."""

    columns: dict[int, str]
    rungs: tuple[int, ...] = ()
    reduction_factor: float = 3.0
    rule: str = "stopping"  # the rung rule, a name in evolution.rungs.RUNG_RULES

    def __post_init__(self) -> None:
        if not self.columns:
            raise ValueError("fidelities: need at least one epochs:column pair")
        unknown = [r for r in self.rungs if r not in self.columns]
        if unknown:
            raise ValueError(f"rungs: {unknown} are not among the fidelities' epochs {sorted(self.columns)}")
        Rungs(self.rungs or (min(self.columns),), self.reduction_factor)  # validates them
        if self.rule not in RUNG_RULES:
            raise ValueError(f"--rung_rule: unknown {self.rule!r}; known: {sorted(RUNG_RULES)}")

    @property
    def first(self) -> int:
        return min(self.columns)

    def algorithm_rungs(self) -> Rungs | None:
        return Rungs(self.rungs, self.reduction_factor) if self.rungs else None


def parse_fidelities(text: Sequence[str]) -> dict[int, str]:
    """`12:val_acc_12ep,200:val_acc_200ep` (as a list of items) to {12: ..., 200: ...}."""
    columns = {}
    for item in text:
        epochs, _, column = item.partition(":")
        try:
            value = int(epochs)
        except ValueError:
            value = 0
        if value < 1 or not column:
            raise ValueError(f"fidelities: {item!r} is not EPOCHS:COLUMN with positive epochs")
        columns[value] = column
    return dict(sorted(columns.items()))


def pick_rule(fidelities: Fidelities) -> str:
    if fidelities.rungs and fidelities.rule != "stopping":
        return ("the pick: the best first-rung result, displaced by a cell that beat it at a higher rung "
                f"both reached (a paused trial counts with its last rung; rung rule: {fidelities.rule})")
    if fidelities.rungs:
        return ("the pick: the best first-rung result, displaced by a cell that beat it at a higher rung "
                "both reached")
    return "the pick: the best search-metric result so far"


def simulate(table: Table, space_name: str, algorithm: str, fidelities: Fidelities, cost_column: str | None,
             budget_s: float, workers: int, seed: int, mode: str, params: dict[str, Any],
             costs: TableCosts = TableCosts()) -> tuple[np.ndarray, np.ndarray, int]:
    """One search: the times of its results, the report metric of the pick after each (NaN before
    the first), and how many trials it started (a proposal over a limit is rejected at no cost; a
    continuation of a paused trial is not a new one)."""
    params = {**params, "objectives": [str(g) for g in costs.objectives]} if costs.objectives else params
    search = make_algorithm(algorithm, SPACES[space_name][0](), params, seed=seed, objective="search", mode=mode,
                            rungs=fidelities.algorithm_rungs(), rung_rule=fidelities.rule,
                            **costs.algorithm_kwargs(table))
    epochs = fidelities.rungs or (fidelities.first,)
    values = [table.columns[fidelities.columns[e]] for e in epochs]
    cost = table.columns[cost_column] if cost_column else None
    first = search.goals[0].metric if costs.objectives else None  # Pareto's first goal: the search metric
    events: list[tuple[float, int, int]] = []  # (finish time, trial, rung) in finishing order
    keys: dict[int, str] = {}

    def train(now: float, trial_id: int, rung: int) -> None:
        """Train the trial from the rung below `rung` (none for rung 0) to `rung`."""
        done = epochs[rung - 1] if rung else 0
        heapq.heappush(events, (now + (epochs[rung] - done) * (cost[keys[trial_id]] if cost else 1.0), trial_id, rung))

    def start(now: float) -> None:
        trial = search.ask()  # a new trial, or a paused one going on
        keys[trial.trial_id] = trial.genotype.key()
        train(now, trial.trial_id, trial.start_rung)

    for _ in range(workers):
        start(0.0)
    times, picks = [], []
    while events:
        now, trial_id, rung = heapq.heappop(events)
        if now > budget_s:
            break
        key = keys[trial_id]
        metrics = {"search": values[rung][key], "seconds_per_epoch": cost[key] if cost else 1.0,
                   **costs.figures(table, key), **({first: values[rung][key]} if first else {})}
        decision = search.report(trial_id, rung, metrics) if fidelities.rungs else STOP
        if decision == CONTINUE:
            train(now, trial_id, rung + 1)
        else:
            if decision == STOP:  # a paused trial stays untold: it may go on later
                search.tell(trial_id, {**metrics, **search.rung_results.get(trial_id, [{}])[-1]})
            start(now)
        times.append(now)
        best = search.best()
        picks.append(table.report[best[0].genotype.key()] if best else math.nan)
    return np.array(times), np.array(picks), len(keys)


def at_times(times: np.ndarray, picks: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The pick's report metric at each time of `grid` (the last result at or before it)."""
    index = np.searchsorted(times, grid, side="right") - 1
    out = np.full(len(grid), math.nan)
    out[index >= 0] = picks[index[index >= 0]]
    return out


def run_time_benchmark(table: Table, space_name: str, algorithms: Sequence[str], fidelities: Fidelities,
                       cost_column: str | None, budget_s: float, workers: int, runs: int, seed: int, mode: str,
                       params: dict[str, Any], costs: TableCosts = TableCosts()) -> dict[str, Any]:
    """Every algorithm `runs` times (seeds seed..seed+runs-1) on the simulated clock: the pick's
    report metric at 10/25/50/100% of the budget (mean, std, 95% interval) and on a time grid."""
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise ValueError(f"algorithms: unknown {unknown}; known: {sorted(ALGORITHMS)}")
    if budget_s <= 0 or runs < 1 or workers < 1:
        raise ValueError("budget_s must be positive, runs and workers at least 1")
    check_objectives(costs.objectives, fidelities.columns[fidelities.first], mode, table.report_column,
                     [c for e, c in fidelities.columns.items() if e != fidelities.first])
    grid = np.linspace(budget_s / GRID_POINTS, budget_s, GRID_POINTS)
    marks = np.array([budget_s * f for f in FRACTIONS])
    summary, curves, trials = {}, {}, {}
    for name in algorithms:
        runs_out = [simulate(table, space_name, name, fidelities, cost_column, budget_s, workers, seed + r, mode,
                             params, costs) for r in range(runs)]
        curves[name] = np.stack([at_times(t, p, grid) for t, p, _ in runs_out])
        at_marks = np.stack([at_times(t, p, marks) for t, p, _ in runs_out])
        summary[name] = {f"{f:g}": _stats(at_marks[:, i]) for i, f in enumerate(FRACTIONS)}
        trials[name] = float(np.mean([n for _, _, n in runs_out]))
    return {"budget_s": budget_s, "workers": workers, "runs": runs, "seed": seed, "params": params,
            "fidelities": {str(e): c for e, c in fidelities.columns.items()}, "rungs": list(fidelities.rungs),
            "reduction_factor": fidelities.reduction_factor, "rung_rule": fidelities.rule, "cost_column": cost_column,
            "pick": pick_rule(fidelities), "summary": summary, "mean_trials": trials, "grid_s": grid,
            "curves": curves}


def _stats(values: np.ndarray) -> dict[str, float]:
    """Mean, std and 95% interval half-width over runs, and how many runs: those without a result
    yet are left out."""
    values = values[~np.isnan(values)]
    if not len(values):  # no run has a result yet (JSON has no NaN)
        return {"mean": None, "std": None, "ci95": None, "n": 0}
    std = sample_std(values)
    return {"mean": float(values.mean()), "std": std, "ci95": 1.96 * std / math.sqrt(len(values)),
            "n": int(len(values))}
