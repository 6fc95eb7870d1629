"""Controller speed: median microseconds per ask+tell, and journal replay time.

Regularized evolution at P=100, S=25 over 20,000 ask+tell cycles with a hashed fake fitness,
in memory and with the journal; then `resume()` of the 20,000-trial journal.
Run: .venv/bin/python benchmarks/controller.py
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import tempfile
import time

from evolution import RegularizedEvolution, resume
from searchspace import NasNetSpace

CYCLES, P, S = 20_000, 100, 25
GOAL_CYCLE_US, GOAL_REPLAY_S = 100.0, 5.0


def fitness(key: str) -> float:
    return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) / 16**12


def cycle_times_us(journal_path: str | None, fsync: bool = False) -> list[float]:
    algorithm = RegularizedEvolution(NasNetSpace(), population_size=P, sample_size=S, seed=0,
                                     journal_path=journal_path, fsync=fsync)
    scores = {}
    times = []
    for _ in range(CYCLES):
        t0 = time.perf_counter_ns()
        trial = algorithm.ask()
        key = trial.genotype.key()
        t1 = time.perf_counter_ns()
        if key not in scores:  # the fake evaluator's own cost is not the controller's
            scores[key] = fitness(key)
        t2 = time.perf_counter_ns()
        algorithm.tell(trial.trial_id, {"val_accuracy": scores[key]})
        times.append((time.perf_counter_ns() - t2 + t1 - t0) / 1000)
    algorithm.close()
    return times


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        journal = os.path.join(tmp, "journal.jsonl")
        memory = statistics.median(cycle_times_us(None))
        journaled = statistics.median(cycle_times_us(journal))
        synced = statistics.median(cycle_times_us(os.path.join(tmp, "synced.jsonl"), fsync=True)[:2000])
        t0 = time.perf_counter()
        replayed = resume(journal)
        replay_s = time.perf_counter() - t0
        assert replayed.completed() == CYCLES
        size_mb = os.path.getsize(journal) / 1e6
    figures = {
        "cycles": CYCLES, "population_size": P, "sample_size": S,
        "median_cycle_us_in_memory": round(memory, 1),
        "median_cycle_us_with_journal": round(journaled, 1),
        "median_cycle_us_with_fsynced_journal": round(synced, 1),
        "journal_over_memory_ratio": round(journaled / memory, 2),
        "fsync_over_flush_ratio": round(synced / journaled, 2),
        "cycle_vs_goal_ratio": round(journaled / GOAL_CYCLE_US, 2),
        "replay_s": round(replay_s, 2),
        "replay_vs_goal_ratio": round(replay_s / GOAL_REPLAY_S, 2),
        "journal_mb": round(size_mb, 1),
    }
    print(f"ask+tell median: {memory:.1f} us in memory, {journaled:.1f} us with the journal flushed "
          f"(goal < {GOAL_CYCLE_US:g} us), {synced:.1f} us with each line fsynced (the default)")
    print(f"replay of {CYCLES} trials ({size_mb:.1f} MB journal): {replay_s:.2f} s "
          f"(goal < {GOAL_REPLAY_S:g} s)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
