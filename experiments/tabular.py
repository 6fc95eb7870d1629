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
    return Table(columns[search_metric], columns[report_metric], columns)


def _finite(raw: Any, path: str, line: int, column: str) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"{path}:{line}: column {column!r} is not a finite number: {raw!r}")
    return value


def run_once(table: Table, space_name: str, algorithm: str, budget: int, seed: int, mode: str,
             params: dict[str, Any], dedup: bool) -> tuple[np.ndarray, list[str]]:
    """One search: the report metric of the pick after each charged evaluation, and the keys of
    the architectures charged, in order (with --dedup, never the same one twice)."""
    search = make_algorithm(algorithm, SPACES[space_name][0](), params, seed=seed, objective="search", mode=mode)
    sign = 1.0 if mode == "max" else -1.0
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
        value = table.search[key]
        search.tell(trial.trial_id, {"search": value})
        if dedup and key in evaluated:
            continue
        evaluated.add(key)
        charged_keys.append(key)
        if sign * value > best_search:
            best_search, best_report = sign * value, table.report[key]
        curve[charged] = best_report
        charged += 1
    return curve, charged_keys


def sample_std(values: np.ndarray) -> float:
    """Standard deviation over runs (ddof=1, as the plot's confidence bands); 0 for one run."""
    return float(values.std(ddof=1)) if len(values) > 1 else 0.0


def write_synthetic_table(path: str, seed: int = 0, drop: int = 0) -> None:
    """A NAS-Bench-201-shaped table with an additive landscape (a value per edge and op) plus
    noise: `val` for searching, `test` for reporting. For tests and benchmarks; `drop` leaves out
    the first cells to make an incomplete table."""
    import random

    from searchspace.ops import NASBENCH201_OPS

    rng = random.Random(seed)
    value = {(e, op): rng.gauss(0, 1) for e in range(6) for op in NASBENCH201_OPS}
    with open(path, "w", encoding="utf-8") as f:
        f.write("arch,val,test\n")
        for genotype in NasBench201Space().all_genotypes()[drop:]:
            score = sum(value[(e, op)] for e, op in enumerate(genotype.ops))
            f.write(f"{genotype},{score + rng.gauss(0, 0.3):.5f},{score + rng.gauss(0, 0.3):.5f}\n")


def checkpoints(budget: int) -> list[int]:
    """A few intermediate budgets: about 10%, 25%, 50% and 100%."""
    return sorted({max(1, round(budget * f)) for f in (0.1, 0.25, 0.5)} | {budget})


def run_benchmark(table: Table, space_name: str, algorithms: Sequence[str], budget: int, runs: int,
                  seed: int, mode: str, params: dict[str, Any], dedup: bool) -> dict[str, Any]:
    """Every algorithm `runs` times (seeds seed..seed+runs-1); curves and summary figures."""
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise ValueError(f"algorithms: unknown {unknown}; known: {sorted(ALGORITHMS)}")
    if budget < 1 or runs < 1:
        raise ValueError("budget and runs must be at least 1")
    if dedup and budget > len(table.search):
        raise ValueError(f"budget {budget} exceeds the {len(table.search)} architectures of the table")
    curves = {a: np.stack([run_once(table, space_name, a, budget, seed + r, mode, params, dedup)[0]
                           for r in range(runs)]) for a in algorithms}
    summary = {}
    for name, curve in curves.items():
        summary[name] = {
            str(b): {"mean": float(curve[:, b - 1].mean()), "std": sample_std(curve[:, b - 1])}
            for b in checkpoints(budget)
        }
    return {"budget": budget, "runs": runs, "seed": seed, "dedup": dedup, "params": params,
            "summary": summary, "curves": curves}
