"""The controller under many random asynchronous schedules: the state machine of
tests/test_controller_simulation.py (every algorithm, tournament, rung rule and repeats setting;
failures, duplicate and late results, lost workers, retries, and a kill at any event followed by
resume; after every step a strict and a read-only replay of the journal reach the live state), run
in batches of Hypothesis examples, each batch with its own seed, until `--schedules` schedules ran.
A failing batch prints its shrunk schedule and the run goes on with the next. Pure Python, one core.

Run: .venv/bin/python benchmarks/controller_simulation.py [--schedules=10000 --steps=80 --batch=1000 --seed=0]
Ends with one JSON line: schedules, steps, failures, seconds, and what the schedules did.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tests.test_controller_simulation import run_schedules  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=10_000, help="run batches until this many schedules ran")
    parser.add_argument("--steps", type=int, default=80, help="at most this many steps in a schedule")
    parser.add_argument("--batch", type=int, default=1000, help="Hypothesis examples per batch (one seed each)")
    parser.add_argument("--seed", type=int, default=0, help="the first batch's seed; the next ones count up")
    args = parser.parse_args()
    logging.getLogger("evolution").setLevel(logging.ERROR)  # the schedules' ignored duplicates warn by design
    counts: Counter = Counter()
    failures: list[dict] = []
    t0 = time.perf_counter()
    seed = args.seed
    while counts["schedules"] < args.schedules:
        done: Counter = Counter()
        try:
            run_schedules(args.batch, args.steps, seed, done)
        except Exception as err:  # noqa: BLE001 - a failure found: report it and go on
            notes = "\n".join(getattr(err, "__notes__", []))
            print(f"seed {seed}: FAILED {type(err).__name__}: {err}\n{notes}", file=sys.stderr, flush=True)
            failures.append({"seed": seed, "error": f"{type(err).__name__}: {str(err)[:300]}"})
        counts.update(done)
        print(f"seed {seed}: {done['schedules']} schedules, {done['steps']} steps; {counts['schedules']} in all, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        seed += 1
    figures = {"schedules": counts.pop("schedules"), "steps": counts.pop("steps"), "failures": len(failures),
               "failed": failures, "seconds": round(time.perf_counter() - t0, 1), "max_steps": args.steps,
               "batch": args.batch, "seeds": [args.seed, seed - 1], **dict(sorted(counts.items()))}
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
