"""Multi-fidelity regularized evolution against plain evolution and random search on the shared
NAS-Bench-201 tables, on the simulated clock (NAS-Bench-201's protocol: each evaluation is charged
its training time), and the simulator's own speed.

For each table: random search, regularized evolution (P=10, S=3) at 12 epochs, and multi-fidelity
evolution with rungs at 12 and 200 epochs under each rung rule (evolution/rungs.py RUNG_RULES:
"stopping", decided when a trial reports; "payoff", the same, buying the top rung only while its
results change the lead as often, per result, as the lower rung's; and "promotion", a trial
pauses and the best paused one goes on when the rung's share allows), at the NATS-Bench budget
(CIFAR-100 40,000 s, ImageNet16-120 120,000 s of one worker) and at 2x and 4x; then the same compute on 8, 64 and 450
asynchronous workers (the wall-clock budget divided by the workers). The report metric is
val_acc_200ep of each run's pick. The rules are swapped by name; plain ASHA (reference only) is a
rule of this script, entered in the table under its own name. Needs ../shared (or $AMOEBA_SHARED).
A table NAME_agreeing (e.g. cifar100_agreeing) is NAME with its 200-epoch column replaced by the
12-epoch one: there a 200-epoch result never changes which cell leads, so a rung rule can only
lose to plain evolution (the case of a table where the top rung does not pay).
Run: .venv/bin/python benchmarks/tabular_rungs.py [--runs=300] [--rules=stopping,payoff,promotion]
     [--tables=cifar100,imagenet16,cifar100_agreeing] [--workers=1x8w,1x64w,4x8w,4x64w,4x450w]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time

from evolution.rungs import CONTINUE, RUNG_RULES, STOP, Promotions, in_top_fraction
from experiments.simulate.simulator import Fidelities, run_time_benchmark
from experiments.simulate.tabular import load_table

SHARED = os.environ.get("AMOEBA_SHARED", os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
TABLES = {"cifar100": 40_000.0, "imagenet16": 120_000.0}
FIDELITIES = {12: "val_acc_12ep", 200: "val_acc_200ep"}
PARAMS = {"population_size": 10, "sample_size": 3}


class PlainASHA(Promotions):
    """Reference only: ASHA without our cost rule (the top 1/eta at a rung always goes on)."""

    name = "plain_asha"

    def decide(self, rung: int, value: float, cost_per_epoch: float, trial_id: int | None = None) -> str:
        self.record(rung, value, cost_per_epoch)
        top = in_top_fraction(self.results[rung], value, 1 / self.rungs.reduction_factor)
        return CONTINUE if rung < self.rungs.top and top else STOP


RUNG_RULES.setdefault(PlainASHA.name, PlainASHA)  # the table's extension point: a rule by its name
SETUPS = {  # name: (algorithm, rungs, rule)
    "random": ("random", (), "stopping"),
    "regularized_evolution": ("regularized_evolution", (), "stopping"),
    "multi_fidelity_evolution": ("regularized_evolution", (12, 200), "stopping"),
    "payoff_rule_evolution": ("regularized_evolution", (12, 200), "payoff"),
    "promotion_rule_evolution": ("regularized_evolution", (12, 200), "promotion"),
}
AGREEING = "_agreeing"  # a table's variant whose 200-epoch column is its 12-epoch one: the top rung never pays


def load(name: str):
    """A shared table by name; NAME_agreeing: the same with val_acc_200ep := val_acc_12ep (reported
    too), a table on which a 200-epoch result never changes which cell leads."""
    base = name.removesuffix(AGREEING)
    table = load_table(os.path.join(SHARED, "data", "nasbench201", f"nb201_{base}.csv"), "nasbench201", "arch",
                       "val_acc_12ep", "val_acc_200ep", [*FIDELITIES.values(), "train_s_per_epoch"])
    if name.endswith(AGREEING):
        short = table.columns["val_acc_12ep"]
        table = dataclasses.replace(table, report=short, columns={**table.columns, "val_acc_200ep": short})
    return table


def run(table, algorithm: str, rungs: tuple, budget: float, workers: int, runs: int, rule: str = "stopping") -> dict:
    result = run_time_benchmark(table, "nasbench201", [algorithm], Fidelities(FIDELITIES, rungs, rule=rule),
                                "train_s_per_epoch", budget / workers, workers, runs, 0, "max", PARAMS)
    summary = result["summary"][algorithm]
    return {share: {"mean": v["n"] and round(v["mean"], 3), "se": v["n"] and round(v["std"] / math.sqrt(v["n"]), 3),
                    "n": v["n"]} for share, v in summary.items()} | {"trials": round(result["mean_trials"][algorithm], 1)}


def gap_in_standard_errors(rows: dict, setup: str = "multi_fidelity_evolution") -> dict:
    """(`setup` - plain evolution) / the standard error of that difference, for each budget,
    worker count and share of the budget where both have results."""
    gaps = {}
    for label, plain in rows.items():
        if not label.startswith("regularized_evolution ") or f"{setup} {label.split(' ', 1)[1]}" not in rows:
            continue
        setting = label.split(" ", 1)[1]
        multi = rows[f"{setup} {setting}"]
        gaps[setting] = {s: round((multi[s]["mean"] - plain[s]["mean"]) / math.hypot(multi[s]["se"], plain[s]["se"]), 2)
                         for s in plain if s != "trials" and plain[s]["n"] and multi[s]["n"]
                         and math.hypot(multi[s]["se"], plain[s]["se"]) > 0}
    return gaps


WORKER_SETTINGS = ((1, 8), (1, 64), (4, 8), (4, 64), (4, 450))  # (budget factor, workers)


def table_rows(table, base: float, runs: int, rules: list[str], settings=WORKER_SETTINGS) -> dict:
    """Every setup of one table: budgets 1x, 2x, 4x on one worker, plain ASHA, then more workers."""
    setups = {name: setup for name, setup in SETUPS.items() if not setup[1] or setup[2] in rules}
    rows = {}
    for factor in (1, 2, 4):
        for setup, (algorithm, rungs, rule) in setups.items():
            rows[f"{setup} {factor}x 1w"] = run(table, algorithm, rungs, base * factor, 1, runs, rule)
    for factor in (1, 4):
        rows[f"plain ASHA evolution {factor}x 1w"] = run(table, "regularized_evolution", (12, 200), base * factor,
                                                        1, runs, PlainASHA.name)
    for factor, workers in settings:
        for setup, (algorithm, rungs, rule) in setups.items():
            if setup != "random":
                rows[f"{setup} {factor}x {workers}w"] = run(table, algorithm, rungs, base * factor, workers, runs, rule)
    return rows


def show(name: str, base: float, runs: int, rows: dict, figures: dict) -> None:
    print(f"{name} (budget {base:,.0f} s = 1x; val_acc_200ep of the pick, mean +- standard error over {runs} runs)")
    for label, row in rows.items():
        cells = "  ".join(f"{s}: {row[s]['mean']:.2f} +- {row[s]['se']:.2f}" if row[s]["n"] else f"{s}: -"
                          for s in ("0.1", "0.25", "0.5", "1"))
        print(f"  {label:<36} {cells}  trials {row['trials']}")
    for setup, key in (("multi_fidelity_evolution", "gap_in_standard_errors"),
                       ("payoff_rule_evolution", "payoff_gap_in_standard_errors"),
                       ("promotion_rule_evolution", "promotion_gap_in_standard_errors")):
        gaps = gap_in_standard_errors(rows, setup)
        if not gaps:
            continue
        figures[f"{name}_{key}"] = gaps
        print(f"  {setup} minus plain evolution, in standard errors of the difference, at each share:")
        for label, by_share in gaps.items():
            print(f"    {label:<8} " + "  ".join(f"{s}: {g:+.1f}" for s, g in by_share.items()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rules", default="stopping,payoff,promotion", help="rung rules to run (evolution/rungs.py)")
    parser.add_argument("--tables", default=",".join(TABLES), help="tables to run; NAME_agreeing: the table whose "
                                                                   "200-epoch column is its 12-epoch one")
    parser.add_argument("--workers", default=",".join(f"{f}x{w}w" for f, w in WORKER_SETTINGS),
                        help="multi-worker settings to run, FACTORxWORKERSw (empty: one worker only)")
    args = parser.parse_args()
    runs, rules = args.runs, args.rules.split(",")
    settings = [tuple(int(n) for n in item.rstrip("w").split("x")) for item in args.workers.split(",") if item]
    figures: dict = {"runs": runs, "rules": rules}
    for name in args.tables.split(","):
        base, table = TABLES[name.removesuffix(AGREEING)], load(name)
        rows = figures[name] = table_rows(table, base, runs, rules, settings)
        show(name, base, runs, rows, figures)
    table = load("cifar100")
    t0 = time.perf_counter()
    run_time_benchmark(table, "nasbench201", ["regularized_evolution"], Fidelities(FIDELITIES, (12, 200)),
                       "train_s_per_epoch", 40_000 / 8, 8, 100, 0, "max", PARAMS)
    figures["seconds_100_runs_40000s_8_workers"] = round(time.perf_counter() - t0, 2)
    print(f"100 runs of a 40,000 s budget on 8 workers, multi-fidelity: {figures['seconds_100_runs_40000s_8_workers']} s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
