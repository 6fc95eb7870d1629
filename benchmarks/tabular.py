"""Speed of `amoeba benchmark`: 100 runs x 2 algorithms x 150 evaluations on NAS-Bench-201.

Uses a synthetic table covering the space (written to a temp dir), one process (one core).
Run: .venv/bin/python benchmarks/tabular.py
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time

from experiments.tabular import load_table, run_benchmark
from searchspace import NasBench201Space
from searchspace.ops import NASBENCH201_OPS

GOAL_S = 60.0


def main() -> None:
    rng = random.Random(0)
    value = {(e, op): rng.gauss(0, 1) for e in range(6) for op in NASBENCH201_OPS}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "nb201.csv")
        with open(path, "w") as f:
            f.write("arch,val,test\n")
            for g in NasBench201Space().all_genotypes():
                score = sum(value[(e, op)] for e, op in enumerate(g.ops))
                f.write(f"{g},{score + rng.gauss(0, 0.3)},{score + rng.gauss(0, 0.3)}\n")
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
