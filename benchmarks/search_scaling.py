"""What the search machinery costs per trial, and how it scales: real searches (Ray Tune, the
searcher, the journal, warm workers) whose trials only sleep a fixed time.

For 1, 2, 4 and 8 trials at a time on a local Ray (8 CPUs declared, so sleeping trials are never
short of CPUs), `--waves` trials per slot: the overhead per trial (slot time beyond the sleep:
search wall time x concurrency / trials - sleep, the worker processes' start included) and the
scaling efficiency (trials per hour at c, over c times the trials per hour at 1); and, from the
trials' own timestamps, the start-up (search start to a worker's first trial) and the steady
dispatch (the gap between consecutive trials on one warm worker). Then the driver's memory over a longer search
(`--memory_trials`): its resident memory at 25% of the trials and at the end.
Run: .venv/bin/python benchmarks/search_scaling.py [--sleep=2 --waves=6 --memory_trials=200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import ray  # noqa: E402
from ray import tune  # noqa: E402

from evolution import resume  # noqa: E402
from experiments.local_ray import init_ray  # noqa: E402
from experiments.search import SearchConfig, open_search, run_search  # noqa: E402
from experiments.trial import resident_mb, sleep_trial  # noqa: E402


def timed_search(out: str, trials: int, concurrency: int, sleep: float,
                 on_progress=None) -> tuple[float, float, float]:
    """The search's wall time; the median wait from its start to a worker's first trial (worker
    processes starting); and the mean gap between consecutive trials on one warm worker (dispatch)."""
    config = SearchConfig(output_dir=out, max_trials=trials, max_concurrent=concurrency, cpus_per_trial=1,
                          population_size=10, sample_size=3)
    algorithm = open_search(config)
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.25):
            on_progress(algorithm.completed())

    if on_progress is not None:
        threading.Thread(target=sample, daemon=True).start()
    t0, t0_wall = time.perf_counter(), time.time()
    run_search(config, algorithm, trainable=tune.with_parameters(sleep_trial, seconds=sleep))
    stop.set()
    wall = time.perf_counter() - t0
    by_worker: dict[int, list[tuple[float, float]]] = {}
    for outcome in resume(os.path.join(out, "journal.jsonl"), read_only=True).outcomes.values():
        m = outcome.metrics
        by_worker.setdefault(m["worker_pid"], []).append((m["trial_started_at"], m["trial_seconds"]))
    firsts, gaps = [], []
    for runs in by_worker.values():
        runs.sort()
        firsts.append(runs[0][0] - t0_wall)
        gaps += [b[0] - (a[0] + a[1]) for a, b in zip(runs, runs[1:])]
    return wall, statistics.median(firsts), statistics.mean(gaps) if gaps else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sleep", type=float, default=2.0)
    parser.add_argument("--waves", type=int, default=6)
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--memory_trials", type=int, default=200)
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    init_ray(None, num_cpus=max(levels))
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for c in levels:
            trials = args.waves * c
            wall, start_s, gap_s = timed_search(os.path.join(tmp, f"c{c}"), trials, c, args.sleep)
            rows[c] = {"trials": trials, "wall_s": wall, "trials_per_hour": trials / wall * 3600,
                       "overhead_s": wall * c / trials - args.sleep, "worker_start_s": start_s,
                       "dispatch_s": gap_s, "steady_efficiency": args.sleep / (args.sleep + gap_s)}
        base = rows[levels[0]]["trials_per_hour"] / levels[0]
        print(f"trials that sleep {args.sleep:g} s, {args.waves} per slot; local Ray, warm workers. overhead: slot "
              "time per trial beyond the sleep, start-up included; dispatch: gap between trials on a warm worker")
        print(f"{'concurrent':>10}{'trials':>7}{'wall s':>8}{'trials/h':>9}{'overhead s':>11}{'efficiency':>11}"
              f"{'worker start s':>15}{'dispatch s':>11}{'steady eff.':>12}")
        for c, r in rows.items():
            r["efficiency"] = r["trials_per_hour"] / (c * base)
            print(f"{c:>10}{r['trials']:>7}{r['wall_s']:>8.1f}{r['trials_per_hour']:>9.0f}{r['overhead_s']:>11.2f}"
                  f"{r['efficiency']:>11.2f}{r['worker_start_s']:>15.2f}{r['dispatch_s']:>11.3f}"
                  f"{r['steady_efficiency']:>12.3f}")

        samples: list[tuple[int, float]] = []
        n = args.memory_trials
        wall, _, _ = timed_search(os.path.join(tmp, "memory"), n, max(levels), 0.05,
                                  on_progress=lambda done: samples.append((done, resident_mb())))
        early = next(rss for done, rss in samples if done >= n // 4)
        late = samples[-1][1]
        print(f"driver memory over {n} trials ({wall:.0f} s): {early:.0f} MiB at trial {n // 4}, "
              f"{late:.0f} MiB at the end ({late / early:.3f}x)")
    ray.shutdown()
    figures = {f"overhead_s_at_{c}": round(r["overhead_s"], 3) for c, r in rows.items()}
    figures.update({f"efficiency_at_{c}": round(r["efficiency"], 3) for c, r in rows.items()})
    figures.update({f"dispatch_s_at_{c}": round(r["dispatch_s"], 3) for c, r in rows.items()})
    figures.update({f"steady_efficiency_at_{c}": round(r["steady_efficiency"], 3) for c, r in rows.items()})
    figures.update({f"worker_start_s_at_{c}": round(r["worker_start_s"], 2) for c, r in rows.items()})
    figures.update({"sleep_s": args.sleep, "waves": args.waves, "memory_trials": n,
                    "driver_rss_end_over_quarter": round(late / early, 3)})
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
