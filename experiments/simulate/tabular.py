"""Search algorithms on a tabular NAS benchmark: the table is the evaluator.

Runs the same engine classes as `amoeba search` (evolution.ALGORITHMS), in memory. The search
sees only the search metric; what is reported is the report metric of the architecture the search
would pick at each point (the best so far by the search metric). No training, no TensorFlow.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from evolution import ALGORITHMS, make_algorithm
from evolution.objectives import LIMITED, Goal, MnasReward
from experiments.simulate.fronts import LimitGaps, TableFront, found_front
from searchspace import NasBench201Genotype, NasBench201Space

log = logging.getLogger(__name__)
SPACES = {"nasbench201": (NasBench201Space, NasBench201Genotype.from_string)}


@dataclass(frozen=True)
class Table:
    """Canonical key -> (search metric, report metric), for every architecture of the space, and
    every other column read (fidelities, cost), by column name."""

    search: dict[str, float]
    report: dict[str, float]
    columns: dict[str, dict[str, float]] = field(default_factory=dict)
    search_column: str = ""  # the names of the search and report columns
    report_column: str = ""


def load_table(path: str, space_name: str, arch_column: str, search_metric: str, report_metric: str,
               more_columns: Sequence[str] = ()) -> Table:
    """Read and validate the CSV; errors name the file, line and column."""
    if space_name not in SPACES:
        raise ValueError(f"space: unknown {space_name!r}; known: {sorted(SPACES)}")
    space_cls, parse = SPACES[space_name]
    try:
        frame = pd.read_csv(path, dtype={arch_column: str}, keep_default_na=False, skip_blank_lines=False)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ValueError(f"{path}: cannot read the table: {err}") from None
    metrics = list(dict.fromkeys([search_metric, report_metric, *more_columns]))
    for column in (arch_column, *metrics):
        if column not in frame.columns:
            raise ValueError(f"{path}: no column {column!r}; columns: {list(frame.columns)}")
    columns: dict[str, dict[str, float]] = {name: {} for name in metrics}
    seen_at: dict[str, int] = {}
    rows = zip(frame[arch_column], *(frame[name] for name in metrics))
    for line, (arch, *raw) in enumerate(rows, start=2):  # the header is line 1
        arch = str(arch).strip()
        if not arch:
            raise ValueError(f"{path}:{line}: column {arch_column!r} is empty")
        try:
            key = parse(arch).key()
        except ValueError as err:
            raise ValueError(f"{path}:{line}: {err}") from None
        if key in seen_at:
            raise ValueError(f"{path}:{line}: duplicate architecture {arch} (first on line {seen_at[key]})")
        seen_at[key] = line
        for name, value in zip(metrics, raw):
            columns[name][key] = _finite(value, path, line, name)
    missing = [g for g in space_cls().all_genotypes() if g.key() not in seen_at]
    if missing:
        raise ValueError(
            f"{path}: the table does not cover the {space_name} space: {len(missing)} of "
            f"{len(missing) + len(seen_at)} architectures are missing, e.g. {missing[0]}"
        )
    return Table(columns[search_metric], columns[report_metric], columns, search_metric, report_metric)


def _finite(raw: Any, path: str, line: int, column: str) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"{path}:{line}: column {column!r} is not a finite number: {raw!r}")
    return value


@dataclass(frozen=True)
class TableCosts:
    """Which columns stand for a cell's costs, and how the search uses them: `limits` on any measure
    of evolution.objectives.LIMITED, judged before a cell is charged; `objectives` (columns) for
    Pareto evolution; MnasNet's `reward` on its cost measure. A measure is read from its column
    times a scale: "latency_ms" from `latency_column`, "params" from `params_column` (in millions,
    as NAS-Bench-201's params_mb), any other from `more_columns` (measure -> (column, scale)). A new
    limited measure is its entry in LIMITED and a column here; nothing else names it."""

    latency_column: str | None = None
    params_column: str = "params_mb"
    objectives: tuple[Goal, ...] = ()
    limits: dict[str, float] = field(default_factory=dict)
    reward: MnasReward | None = None
    more_columns: dict[str, tuple[str, float]] = field(default_factory=dict)

    def measure_columns(self) -> dict[str, tuple[str, float]]:
        """Each cost measure's column and scale."""
        known = {"params": (self.params_column, 1e6), **self.more_columns}
        if self.latency_column:
            known["latency_ms"] = (self.latency_column, 1.0)
        return known

    def measures(self) -> list[str]:
        """The cost measures the search reads: its limits' and its reward's."""
        return list(dict.fromkeys([*self.limits, *([self.reward.cost_metric] if self.reward else [])]))

    def columns(self) -> list[str]:
        """The columns these settings read."""
        known = self.measure_columns()
        wanted = [g.metric for g in self.objectives] + ([self.latency_column] if self.latency_column else [])
        return list(dict.fromkeys(wanted + [known[m][0] for m in self.measures() if m in known]))

    def figures(self, table: Table, key: str) -> dict[str, float]:
        figures = {g.metric: table.columns[g.metric][key] for g in self.objectives}
        known = self.measure_columns()
        for measure in self.measures():
            column, scale = known[measure]
            figures[measure] = scale * table.columns[column][key] if scale != 1.0 else table.columns[column][key]
        return figures

    def costs(self, table: Table, key: str) -> dict[str, float]:
        """What is known of a cell before it is trained (a size measure's figures): every figure but
        the first goal's, the one the search pays to evaluate."""
        first = self.objectives[0].metric if self.objectives else None
        return {k: v for k, v in self.figures(table, key).items() if k != first}

    def algorithm_kwargs(self, table: Table) -> dict[str, Any]:
        unknown = [m for m in self.limits if m not in LIMITED]
        if unknown:
            raise ValueError(f"limits: {unknown} cannot be limited; known: {list(LIMITED)}")
        missing = [m for m in self.measures() if m not in self.measure_columns()]
        if missing:
            flag = "--latency_column" if missing == ["latency_ms"] else "--measure_columns"
            raise ValueError(f"the limits and reward on {missing} (--max_*, --latency_target_ms) need {flag}")
        measure = (lambda genotype: self.costs(table, genotype.key())) if self.limits or self.objectives else None
        return {"limits": self.limits, "measure": measure, "reward": self.reward}


def check_objectives(goals: Sequence[Goal], search_metric: str, mode: str, report_metric: str,
                     unpaid: Sequence[str] = ()) -> None:
    """A search's goals must not read what it has not paid for: the first must be the search metric
    (--search_metric, or the first --fidelities column) with --mode, and none may be the report
    column or a higher fidelity's column (`unpaid`)."""
    if not goals:
        return
    if search_metric and goals[0] != Goal(search_metric, mode):
        raise ValueError(f"--objectives: the first must be the search metric and its mode ({search_metric}:{mode}, "
                         f"from --search_metric or the first of --fidelities and --mode), got {goals[0]}")
    for goal in goals:
        if goal.metric == report_metric or goal.metric in unpaid:
            what = "the report column (--report_metric)" if goal.metric == report_metric else \
                "a higher fidelity's column (--fidelities), which the search has not paid for"
            raise ValueError(f"--objectives: {goal.metric} is {what}; a search may only read what it evaluated")


def run_once(table: Table, space_name: str, algorithm: str, budget: int, seed: int, mode: str,
             params: dict[str, Any], dedup: bool, costs: TableCosts = TableCosts()) -> tuple[np.ndarray, list[str]]:
    """One search: the report metric of the pick after each charged evaluation, and the keys of
    the architectures charged, in order (with --dedup, never the same one twice). A proposal that
    breaks a limit is rejected before it is charged."""
    params = {**params, "objectives": [str(g) for g in costs.objectives]} if costs.objectives else params
    search = make_algorithm(algorithm, SPACES[space_name][0](), params, seed=seed, objective="search", mode=mode,
                            **costs.algorithm_kwargs(table))
    curve = np.empty(budget)
    evaluated: set[str] = set()
    charged_keys: list[str] = []
    best_search, best_report = -math.inf, math.nan
    charged, proposals = 0, 0
    while charged < budget:
        proposals += 1
        if proposals > 100 * budget:
            raise ValueError(f"{algorithm}: no new architecture in {100 * budget} proposals; "
                             "the budget exceeds what --dedup can find")
        trial = search.ask()
        key = trial.genotype.key()
        search.tell(trial.trial_id, {"search": table.search[key], **costs.figures(table, key)})
        if dedup and key in evaluated:
            continue
        evaluated.add(key)
        charged_keys.append(key)
        if search.outcomes[trial.trial_id].status == "ok" and search.fitness(trial.trial_id) > best_search:
            best_search, best_report = search.fitness(trial.trial_id), table.report[key]
        curve[charged] = best_report
        charged += 1
    return curve, charged_keys


def sample_std(values: np.ndarray) -> float:
    """Standard deviation over runs (ddof=1, as the plot's confidence bands); 0 for one run."""
    return float(values.std(ddof=1)) if len(values) > 1 else 0.0


def write_synthetic_table(path: str, seed: int = 0, drop: int = 0) -> None:
    """A NAS-Bench-201-shaped table with an additive landscape (a value per edge and op) plus
    noise: `val` for searching, `test` for reporting, and costs that loosely follow the value:
    `lat` (a latency) and `params_mb` (in millions). For tests and benchmarks; `drop` leaves out
    the first cells to make an incomplete table."""
    import random

    from searchspace.ops import NASBENCH201_OPS

    rng = random.Random(seed)
    value = {(e, op): rng.gauss(0, 1) for e in range(6) for op in NASBENCH201_OPS}
    cost = {k: 1 + max(0.0, 0.5 * v + rng.gauss(0, 0.5)) for k, v in value.items()}  # accuracy costs, loosely
    with open(path, "w", encoding="utf-8") as f:
        f.write("arch,val,test,lat,params_mb\n")
        for genotype in NasBench201Space().all_genotypes()[drop:]:
            score = sum(value[(e, op)] for e, op in enumerate(genotype.ops))
            lat = sum(cost[(e, op)] for e, op in enumerate(genotype.ops))
            f.write(f"{genotype},{score + rng.gauss(0, 0.3):.5f},{score + rng.gauss(0, 0.3):.5f},{lat:.4f},"
                    f"{lat / 20:.5f}\n")


def checkpoints(budget: int) -> list[int]:
    """A few intermediate budgets: about 10%, 25%, 50% and 100%."""
    return sorted({max(1, round(budget * f)) for f in (0.1, 0.25, 0.5)} | {budget})


def run_benchmark(table: Table, space_name: str, algorithms: Sequence[str], budget: int, runs: int,
                  seed: int, mode: str, params: dict[str, Any], dedup: bool, costs: TableCosts = TableCosts(),
                  gap_limits: Sequence[float] = (), report_metric: str = "", marks: Sequence[int] = (),
                  search_metric: str = "") -> dict[str, Any]:
    """Every algorithm `runs` times (seeds seed..seed+runs-1); curves and summary figures. With
    objectives: at each budget the hypervolume fraction of what was evaluated (experiments/simulate/fronts.py)
    and each run's front at the end; with `gap_limits` on the latency column: the mean gap under them
    (the table's front and the gaps score cells by the column `report_metric`). Figures are given at
    `marks` evaluations (default: about 10, 25, 50 and 100% of the budget)."""
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise ValueError(f"algorithms: unknown {unknown}; known: {sorted(ALGORITHMS)}")
    if budget < 1 or runs < 1:
        raise ValueError("budget and runs must be at least 1")
    if dedup and budget > len(table.search):
        raise ValueError(f"budget {budget} exceeds the {len(table.search)} architectures of the table")
    marks = sorted(set(marks)) or checkpoints(budget)
    if marks[0] < 1 or marks[-1] > budget:
        raise ValueError(f"evaluations to report at: {marks} must lie within 1..{budget}")
    if gap_limits and not costs.objectives:
        raise ValueError("limit gaps score a search's front: give --objectives")
    check_objectives(costs.objectives, search_metric or table.search_column, mode, report_metric or table.report_column)
    true_front = TableFront.of(table, costs.objectives, report_metric) if len(costs.objectives) > 1 else None
    gaps = LimitGaps.of(table, costs.latency_column, gap_limits) if gap_limits and costs.latency_column else None
    curves, summary, fronts = {}, {}, {}
    for name in algorithms:
        outs = [run_once(table, space_name, name, budget, seed + r, mode, params, dedup, costs) for r in range(runs)]
        curve = curves[name] = np.stack([c for c, _ in outs])
        summary[name] = {str(b): {"mean": float(curve[:, b - 1].mean()), "std": sample_std(curve[:, b - 1])}
                         for b in marks}
        for b in marks:
            if true_front is not None:
                fractions = [true_front.hypervolume_fraction(table, found_front(table, keys[:b], costs.objectives))
                             for _, keys in outs]
                summary[name][str(b)]["hypervolume_fraction"] = _mean_std(fractions)
            if gaps is not None:
                per_run = [gaps.gaps(table, found_front(table, keys[:b], costs.objectives)).mean() for _, keys in outs]
                summary[name][str(b)]["limit_gap"] = _mean_std(per_run)
        if costs.objectives:
            fronts[name] = [found_front(table, keys, costs.objectives) for _, keys in outs]
    result = {"budget": budget, "runs": runs, "seed": seed, "dedup": dedup, "params": params,
              "summary": summary, "curves": curves}
    if costs.objectives:
        result["objectives"] = [str(g) for g in costs.objectives]
        result["fronts"] = fronts
    if true_front is not None:
        result["table_front_size"] = len(true_front.keys)
    if gaps is not None:
        result["gap_limits"] = list(gaps.limits)
    return result


def _mean_std(values: Sequence[float]) -> dict[str, float]:
    values = np.asarray(values, dtype=float)
    return {"mean": float(values.mean()), "std": sample_std(values)}
