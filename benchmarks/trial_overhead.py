"""Where a search's time goes, measured in real searches: warm workers against a fresh process per
trial, side by side.

Runs `amoeba search` (real Ray Tune, `max_concurrent` trials at a time as the flagfile says) with
warm workers (the default) and with `--noreuse_workers`, alternated, on the same seed, and splits
the trial slots' time (search wall time x max_concurrent) into the parts the trials report: TensorFlow
import, data load, model build, first step (tracing + graph optimisation), the remaining training
steps, evaluation, the rest of the trial (clearing Keras's state, reporting), and what lies outside
the trial function (worker start, Ray dispatch, idle slots,
Ray's own start-up). The non-training share is everything but the remaining training steps.
Run: .venv/bin/python benchmarks/trial_overhead.py [--trials=30] [--flagfile=... --data=DIR --modes=warm,fresh]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from evolution import resume  # noqa: E402

PARTS = ("import", "load", "build", "first_step", "steps", "eval", "other", "outside")


def run_search(flagfile: str, trials: int, mode: str, data: str | None, out: str) -> dict[str, float]:
    cmd = [sys.executable, "-c", "from experiments.cli import run; run()", "search", f"--flagfile={flagfile}",
           f"--output_dir={out}", f"--max_trials={trials}", f"--{'' if mode == 'warm' else 'no'}reuse_workers"]
    cmd += [f"--data={data}"] if data else []
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    wall = time.perf_counter() - t0
    concurrency = json.load(open(os.path.join(out, "search_config.json")))["max_concurrent"]
    algorithm = resume(os.path.join(out, "journal.jsonl"), read_only=True)
    metrics = [o.metrics for o in algorithm.outcomes.values()]
    results = {t: (algorithm.trials[t].genotype.key(), o.metrics["val_accuracy"]) for t, o in algorithm.outcomes.items()}
    total = {
        "import": sum(m["import_seconds"] for m in metrics),
        "load": sum(m["load_seconds"] for m in metrics),
        "build": sum(m["setup_seconds"] - m["load_seconds"] for m in metrics),
        "first_step": sum(m["first_step_seconds"] for m in metrics),
        "steps": sum(m["train_seconds"] - m["first_step_seconds"] for m in metrics),
        "eval": sum(m["eval_seconds"] for m in metrics),
    }
    slots = wall * concurrency
    total["other"] = sum(m["trial_seconds"] for m in metrics) - sum(total.values())  # clearing Keras, reporting
    total["outside"] = slots - sum(m["trial_seconds"] for m in metrics)
    per_trial = {part: value / len(metrics) for part, value in total.items()}
    return {**per_trial, "slot_per_trial": slots / len(metrics), "wall": wall,
            "workers": len({m["worker_pid"] for m in metrics}), "results": results,
            "mean_val_accuracy": statistics.mean(m["val_accuracy"] for m in metrics)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--flagfile", default=os.path.join(REPO, "experiments/configs/search_digits.cfg"))
    parser.add_argument("--data", default=None)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--modes", default="warm,fresh")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if not re.search(r"^--max_concurrent=[1-9]", open(args.flagfile).read(), re.MULTILINE):
        raise SystemExit(f"{args.flagfile}: set --max_concurrent (1 or more) for this benchmark: it counts "
                         "trial slots, and 0 (from the resources) leaves their number to Ray")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            results[mode] = run_search(args.flagfile, args.trials, mode, args.data, os.path.join(tmp, mode))
    print(f"{os.path.basename(args.flagfile)}{' on ' + args.data if args.data else ''}: {args.trials} trials; "
          "seconds per trial of slot time (wall x max_concurrent)")
    print(f"{'part':<12}" + "".join(f"{m + ' s':>10}{'share':>8}" for m in modes))
    for part in PARTS + ("slot_per_trial",):
        print(f"{part:<12}" + "".join(f"{r[part]:>10.2f}{r[part] / r['slot_per_trial']:>8.0%}" for r in results.values()))
    figures = {"flagfile": os.path.basename(args.flagfile), "trials": args.trials}
    for mode, r in results.items():
        figures[f"{mode}_wall_s"] = round(r["wall"], 1)
        figures[f"{mode}_workers"] = r["workers"]
        figures[f"{mode}_non_training_share"] = round(1 - r["steps"] / r["slot_per_trial"], 3)
        figures[f"{mode}_first_step_s"] = round(r["first_step"], 2)
        figures[f"{mode}_mean_val_accuracy"] = round(r["mean_val_accuracy"], 4)
    if {"warm", "fresh"} <= set(results):
        figures["wall_warm_over_fresh_ratio"] = round(results["warm"]["wall"] / results["fresh"]["wall"], 3)
        # The same trial id got the same cell in both (always for the first P, random, trials; later ones
        # depend on which results came in first): the same cell and seed must score the same.
        warm, fresh = results["warm"]["results"], results["fresh"]["results"]
        same = [t for t in warm if t in fresh and warm[t][0] == fresh[t][0]]
        figures["same_cell_trials"] = len(same)
        figures["same_cell_identical_accuracy"] = sum(warm[t][1] == fresh[t][1] for t in same)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
