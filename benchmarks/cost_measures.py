"""What measuring a candidate's costs costs, and how far two time-budgeted runs of one cell disagree.

1. Digits (the built-in proxy), --digits_trials random cells trained one after the other in this
   process (warm, as a Ray worker runs them): the share of each trial's time spent on its batch-1
   latency (the inference trace, which evaluation then reuses, and the timed calls). Goal: < 5%.
2. --train_seconds: one cell (seeded) trained twice for the same seconds, side by side in two
   processes of one thread each (as a 2-trial search on 2 cores runs them), on a prepared data dir
   with the CPU search config's proxy (N=1, F=8, 10,000 training and 5,000 validation images at
   32 px): each run's calibrated step count, step time and validation accuracy.
Run: .venv/bin/python benchmarks/cost_measures.py --data=PREPARED_CIFAR10 [--train_seconds=60]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def timed_run(data: str, seconds: float, seed: int) -> dict:
    from searchspace import space_from_config
    from trainer.candidate import train_candidate
    from core.proxy_config import ProxyConfig

    genotype = space_from_config({"name": "nasnet", "num_blocks": 5}).sample(random.Random(seed))
    proxy = ProxyConfig(dataset="prepared", data=data, image_size=32, validation_images=5000, train_images=10000,
                        num_cells=1, filters=8, train_batch_size=64, threads=1, train_seconds=seconds, seed=0)
    metrics = train_candidate(genotype, proxy)
    return {k: metrics[k] for k in ("train_steps", "calibration_step_ms", "step_ms", "val_accuracy", "train_seconds",
                                    "latency_ms", "params")}


def digits_overhead(trials: int) -> dict:
    from searchspace import space_from_config
    from trainer.candidate import train_candidate
    from core.proxy_config import ProxyConfig

    space = space_from_config({"name": "nasnet", "num_blocks": 5})
    rng = random.Random(0)
    shares = []
    for _ in range(trials):
        t = time.perf_counter()
        metrics = train_candidate(space.sample(rng), ProxyConfig(threads=1))
        shares.append(metrics["latency_seconds"] / (time.perf_counter() - t))
    return {"trials": trials, "latency_share_mean": round(sum(shares) / len(shares), 4),
            "latency_share_max": round(max(shares), 4)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--train_seconds", type=float, default=60.0)
    parser.add_argument("--cell_seed", type=int, default=3)
    parser.add_argument("--digits_trials", type=int, default=6)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(timed_run(args.data, args.train_seconds, args.cell_seed)))
        return
    overhead = digits_overhead(args.digits_trials)
    print(f"digits: batch-1 latency takes {overhead['latency_share_mean']:.1%} of a trial on average "
          f"(at most {overhead['latency_share_max']:.1%}) over {overhead['trials']} trials", flush=True)
    command = [sys.executable, os.path.abspath(__file__), f"--data={args.data}", "--worker",
               f"--train_seconds={args.train_seconds}", f"--cell_seed={args.cell_seed}"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1"}
    workers = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
               for _ in range(2)]
    runs = [json.loads(w.communicate()[0].strip().splitlines()[-1]) for w in workers]
    for i, run in enumerate(runs):
        print(f"run {i}: {run['train_steps']} steps (calibrated at {run['calibration_step_ms']:.1f} ms, steady "
              f"median {run['step_ms']:.1f} ms), val_accuracy {run['val_accuracy']:.4f}")
    steps = [r["train_steps"] for r in runs]
    print(json.dumps({"benchmark": "cost_measures", "digits": overhead, "train_seconds": args.train_seconds,
                      "runs": runs, "step_count_ratio": round(max(steps) / min(steps), 4),
                      "val_accuracy_difference": round(abs(runs[0]["val_accuracy"] - runs[1]["val_accuracy"]), 4)}))


if __name__ == "__main__":
    main()
