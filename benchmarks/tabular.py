"""Speed of `amoeba benchmark`: 100 runs x 2 algorithms x 150 evaluations on NAS-Bench-201.

Uses a synthetic table covering the space (written to a temp dir), one process (one core).
Run: .venv/bin/python benchmarks/tabular.py
"""

from __future__ import annotations

import json
import os
import tempfile
import time

from experiments.simulate.tabular import load_table, run_benchmark, write_synthetic_table

GOAL_S = 60.0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "nb201.csv")
        write_synthetic_table(path)
        t0 = time.perf_counter()
        table = load_table(path, "nasbench201", "arch", "val", "test")
        load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = run_benchmark(table, "nasbench201", ["regularized_evolution", "random"], budget=150, runs=100,
                           seed=0, mode="max", params={"population_size": 20, "sample_size": 5}, dedup=False)
    run_s = time.perf_counter() - t0
    total = load_s + run_s
    finals = {a: round(v["150"]["mean"], 3) for a, v in result["summary"].items()}
    print(f"table load (15,625 rows): {load_s:.2f} s; 100 runs x 2 algorithms x 150 evaluations: "
          f"{run_s:.2f} s; total {total:.2f} s (goal < {GOAL_S:g} s)")
    print(f"final mean test metric: {finals}")
    print(json.dumps({"load_s": round(load_s, 2), "run_s": round(run_s, 2), "total_s": round(total, 2),
                      "total_vs_goal_ratio": round(total / GOAL_S, 3), "final_mean": finals}))


if __name__ == "__main__":
    main()
