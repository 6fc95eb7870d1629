"""Pareto evolution against random search and against one latency-limited evolution per limit, on
the shared NAS-Bench-201 tables: accuracy (`val_acc_200ep` reported, `val_acc_12ep` searched)
against latency (`latency_ms_pixel3`).

For each table and at 100, 300 and 1,000 evaluations, over --runs seeds:
- the hypervolume of the front found (the evaluated cells' front by val_acc_12ep and latency,
  scored by val_acc_200ep) as a share of the table's own front's (experiments/simulate/fronts.py);
- the per-limit gap: at latency limits at the 5th, 15th, ..., 95th percentiles, the best
  val_acc_200ep of any cell under the limit minus the best on the front found under it, averaged
  over the limits. A limited search (regularized evolution with --max_latency_ms at one limit;
  proposals over it rejected before they are charged) is scored at its own limit only.
The floor: the table's whole 12-epoch front. Needs ../shared (or $AMOEBA_SHARED).
Run: .venv/bin/python benchmarks/tabular_pareto.py [--runs=300]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np

from evolution.objectives import parse_goals
from experiments.simulate.fronts import PERCENTILES, LimitGaps, TableFront, found_front, percentile_limits
from experiments.simulate.tabular import TableCosts, load_table, run_once

SHARED = os.environ.get("AMOEBA_SHARED", os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
TABLES = ("cifar100", "imagenet16")
LATENCY = "latency_ms_pixel3"
GOALS = parse_goals(f"val_acc_12ep:max,{LATENCY}:min")
MARKS = (100, 300, 1000)
PARETO = {"population_size": 50, "sample_size": 10}
LIMIT = {"population_size": 50, "sample_size": 5, "tournament": "limit", "offspring": 3}  # proposal.py LimitTournament
EVOLUTION = {"population_size": 20, "sample_size": 5}


def mean_se(values: list[float]) -> dict:
    values = np.asarray(values, dtype=float)
    se = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return {"mean": round(float(values.mean()), 4), "se": round(float(se), 4)}


def searched(table, algorithm: str, params: dict, costs: TableCosts, runs: int) -> list[list[str]]:
    return [run_once(table, "nasbench201", algorithm, max(MARKS), seed, "max", params, False, costs)[1]
            for seed in range(runs)]


def scores(table, runs_keys: list[list[str]], front: TableFront, gaps: LimitGaps) -> dict:
    out = {}
    for mark in MARKS:
        fronts = [found_front(table, keys[:mark], GOALS) for keys in runs_keys]
        out[str(mark)] = {"hypervolume_fraction": mean_se([front.hypervolume_fraction(table, f) for f in fronts]),
                          "limit_gap": mean_se([gaps.gaps(table, f).mean() for f in fronts])}
    return out


def main() -> None:
    global MARKS
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--tables", default=",".join(TABLES))
    parser.add_argument("--marks", default=",".join(map(str, MARKS)), help="evaluation counts to score at")
    parser.add_argument("--searches", default="pareto_evolution,limit_tournament,random,limited_evolution")
    args = parser.parse_args()
    MARKS = tuple(int(m) for m in args.marks.split(","))
    searches = args.searches.split(",")
    results = {}
    started = time.perf_counter()
    for name in args.tables.split(","):
        table = load_table(os.path.join(SHARED, "data", "nasbench201", f"nb201_{name}.csv"), "nasbench201", "arch",
                           "val_acc_12ep", "val_acc_200ep", [LATENCY])
        front = TableFront.of(table, GOALS, "val_acc_200ep")
        limits = percentile_limits(table, LATENCY)
        gaps = LimitGaps.of(table, LATENCY, limits)
        plain = TableCosts(LATENCY, objectives=GOALS)
        setups = {"pareto_evolution": ("pareto_evolution", PARETO), "limit_tournament": ("pareto_evolution", LIMIT),
                  "random": ("random", {})}
        rows = {search: scores(table, searched(table, *setups[search], plain, args.runs), front, gaps)
                for search in searches if search in setups}
        if "limited_evolution" in searches:
            limited = {}  # per mark: each run's mean over the limits of its own gap
            per_limit = []
            for limit in limits:
                costs = TableCosts(LATENCY, objectives=GOALS, limits={"latency_ms": limit})
                own = LimitGaps.of(table, LATENCY, [limit])
                keys = searched(table, "regularized_evolution", EVOLUTION, costs, args.runs)
                per_limit.append({str(m): [own.gaps(table, found_front(table, k[:m], GOALS))[0] for k in keys]
                                  for m in MARKS})
            for mark in MARKS:
                limited[str(mark)] = mean_se(np.mean([p[str(mark)] for p in per_limit], axis=0).tolist())
            rows["limited_evolution"] = {m: {"limit_gap": v} for m, v in limited.items()}
        floor = gaps.gaps(table, found_front(table, list(table.report), GOALS)).mean()
        results[name] = {"rows": rows, "floor_gap": round(float(floor), 4), "table_front_cells": len(front.keys),
                         "limits_ms": [round(v, 3) for v in limits]}
        print(f"{name}: floor {floor:.3f}; front of {len(front.keys)} cells; limits at percentiles {PERCENTILES}")
        for algorithm, by_mark in rows.items():
            cells = "  ".join(f"{m}: gap {v['limit_gap']['mean']:.3f}+-{v['limit_gap']['se']:.3f}"
                              + (f" hv {v['hypervolume_fraction']['mean']:.4f}+-{v['hypervolume_fraction']['se']:.4f}"
                                 if "hypervolume_fraction" in v else "") for m, v in by_mark.items())
            print(f"  {algorithm:<20} {cells}", flush=True)
    print(json.dumps({"benchmark": "tabular_pareto", "runs": args.runs, "pareto": PARETO, "limit": LIMIT,
                      "evolution": EVOLUTION,
                      "seconds": round(time.perf_counter() - started, 1), "tables": results}))


if __name__ == "__main__":
    main()
