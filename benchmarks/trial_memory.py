"""Host memory of a warm trial worker over many consecutive trials, in a real search.

Runs `amoeba search` on the digits proxy with one trial at a time, so one Ray worker (kept warm by
Tune's actor reuse) trains every trial; each trial reports the worker's resident memory after it
(`worker_rss_mb`). Goal: RSS at trial 50 within 10% of trial 10 (after warm-up).
Run: .venv/bin/python benchmarks/trial_memory.py [--trials=50]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from evolution import resume  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "search")
        subprocess.run([sys.executable, "-c", "from experiments.cli import run; run()", "search",
                        f"--output_dir={out}", f"--max_trials={args.trials}", "--max_concurrent=1",
                        "--population_size=10", "--sample_size=3", "--epochs=1"],
                       check=True, cwd=REPO, stdout=subprocess.DEVNULL,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        algorithm = resume(os.path.join(out, "journal.jsonl"), read_only=True)
    metrics = [algorithm.outcomes[t].metrics for t in sorted(algorithm.outcomes)]
    workers = {m["worker_pid"] for m in metrics}
    rss = [m["worker_rss_mb"] for m in metrics]
    print(f"{len(metrics)} trials in {len(workers)} worker process(es)")
    print(f"{'trial':>6}{'worker trial':>14}{'RSS MiB':>10}")
    for i, m in enumerate(metrics, start=1):
        if i in (1, 2, 5) or i % 10 == 0:
            print(f"{i:>6}{m['worker_trial']:>14}{m['worker_rss_mb']:>10.1f}")
    check = min(10, len(rss))
    figures = {
        "trials": len(metrics), "workers": len(workers),
        "rss_mb_trial_1": round(rss[0], 1), f"rss_mb_trial_{check}": round(rss[check - 1], 1),
        f"rss_mb_trial_{len(rss)}": round(rss[-1], 1), "rss_mb_max": round(max(rss), 1),
        "rss_last_over_trial_10_ratio": round(rss[-1] / rss[check - 1], 3),
    }
    figures["goal_met"] = len(workers) == 1 and abs(figures["rss_last_over_trial_10_ratio"] - 1) <= 0.10
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
