"""What the search machinery costs per trial, and how it scales: real searches (Ray Tune, the
searcher, the journal, warm workers) whose trials only sleep a fixed time.

For 1, 2, 4 and 8 trials at a time on a local Ray (8 CPUs declared, so sleeping trials are never
short of CPUs), `--waves` trials per slot: the overhead per trial (slot time beyond the sleep:
search wall time x concurrency / trials - sleep, the worker processes' start included) and the
scaling efficiency (trials per hour at c, over c times the trials per hour at 1); and, from the
trials' own timestamps, the start-up (search start to a worker's first trial) and the steady
dispatch (the gap between consecutive trials on one warm worker). Then the driver's memory over a longer search
(`--memory_trials`): its resident memory at each eighth of the trials (the ratio: the end over 25%), in one Tune
experiment and in experiments of `--memory_trials_per_tuner` trials (SearchConfig.trials_per_tuner).
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
from experiments.search.local_ray import init_ray  # noqa: E402
from experiments.search.driver import SearchConfig, open_search, run_search  # noqa: E402
from experiments.search.trial import resident_mb, sleep_trial  # noqa: E402
from child import run_child  # noqa: E402 - benchmarks/child.py: a measurement in a fresh process


def timed_search(out: str, trials: int, concurrency: int, sleep: float, on_progress=None,
                 trials_per_tuner: int = 1000) -> tuple[float, float, float]:
    """The search's wall time; the median wait from its start to a worker's first trial (worker
    processes starting); and the mean gap between consecutive trials on one warm worker (dispatch)."""
    config = SearchConfig(output_dir=out, max_trials=trials, max_concurrent=concurrency, cpus_per_trial=1,
                          population_size=10, sample_size=3, trials_per_tuner=trials_per_tuner)
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


def memory_search(trials: int, concurrency: int, per_tuner: int) -> dict[str, float]:
    """This process's resident memory at a quarter of a search of 0.05 s trials and at its end."""
    samples: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        wall, _, _ = timed_search(os.path.join(tmp, "memory"), trials, concurrency, 0.05,
                                  on_progress=lambda done: samples.append((done, resident_mb())),
                                  trials_per_tuner=per_tuner)
    early = next(rss for done, rss in samples if done >= trials // 4)
    eighths = {trials * q // 8: next(rss for done, rss in samples if done >= trials * q // 8) for q in range(1, 8)}
    return {"early_mb": early, "late_mb": samples[-1][1], "wall_s": wall,
            "rss_mb_at": {**{str(k): round(v, 1) for k, v in eighths.items()}, str(trials): round(samples[-1][1], 1)}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sleep", type=float, default=2.0)
    parser.add_argument("--waves", type=int, default=6)
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--memory_trials", type=int, default=200)
    parser.add_argument("--memory_trials_per_tuner", type=int, default=50)
    parser.add_argument("--memory_child", type=int, default=0, help="(a child: one memory search)")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    init_ray(None, num_cpus=max(levels))
    if args.memory_child:
        figures = memory_search(args.memory_trials, max(levels), args.memory_child)
        ray.shutdown()
        print(json.dumps(figures))
        return
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

    ray.shutdown()
    n = args.memory_trials
    memory = {}
    for per_tuner in (n, args.memory_trials_per_tuner):  # each in a fresh process: no allocator left over
        out = run_child(__file__, [f"--memory_child={per_tuner}", f"--memory_trials={n}",
                                   f"--concurrency={max(levels)}"])
        memory[per_tuner] = out["late_mb"] / out["early_mb"]
        print(f"driver memory over {n} trials, Tune experiments of {per_tuner} ({out['wall_s']:.0f} s): "
              f"{out['early_mb']:.0f} MiB at trial {n // 4}, {out['late_mb']:.0f} MiB at the end "
              f"({memory[per_tuner]:.3f}x)")
        print("  resident MiB at trial " + ", ".join(f"{k}: {v:.0f}" for k, v in out["rss_mb_at"].items()))
    figures = {f"overhead_s_at_{c}": round(r["overhead_s"], 3) for c, r in rows.items()}
    figures.update({f"efficiency_at_{c}": round(r["efficiency"], 3) for c, r in rows.items()})
    figures.update({f"dispatch_s_at_{c}": round(r["dispatch_s"], 3) for c, r in rows.items()})
    figures.update({f"steady_efficiency_at_{c}": round(r["steady_efficiency"], 3) for c, r in rows.items()})
    figures.update({f"worker_start_s_at_{c}": round(r["worker_start_s"], 2) for c, r in rows.items()})
    figures.update({"sleep_s": args.sleep, "waves": args.waves, "memory_trials": n,
                    "driver_rss_end_over_quarter_one_experiment": round(memory[n], 3),
                    f"driver_rss_end_over_quarter_experiments_of_{args.memory_trials_per_tuner}":
                        round(memory[args.memory_trials_per_tuner], 3)})
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
