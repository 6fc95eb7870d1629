"""Figures of finished (or running) searches, side by side at an equal budget.

For each search dir: validation accuracy of its trials (best, median, quartiles, worst), the best
so far after 10, 20, 40 and 60 trials, the mean trial's parts, and (from the journal's timestamps,
or --wall_s) trials per hour; for a search with rungs also how many trials reached each rung and
the best result at each. With several dirs (e.g. regularized evolution and random search on
the same config) every figure is taken over the first N trials of each, N the smallest count.
`--within_s=S` counts only the trials told within S seconds of the search's start.
Run: .venv/bin/python benchmarks/search_summary.py DIR [DIR ...] [--wall_s=S,S] [--within_s=S]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evolution import resume  # noqa: E402

BUDGETS = (10, 20, 40, 60)


def summarize(out: str, budget: int, wall_s: float | None, within_s: float | None = None) -> dict:
    algorithm = resume(os.path.join(out, "journal.jsonl"), read_only=True)
    ids = sorted(t for t, o in algorithm.outcomes.items()
                 if within_s is None or (o.told_at or 0) - algorithm.started_at <= within_s)[:budget]
    wall_s = within_s if within_s is not None and wall_s is None else wall_s
    metrics = [algorithm.outcomes[t].metrics for t in ids]
    accuracy = [m["val_accuracy"] for m in metrics]
    ok = [a for a in accuracy if a == a]  # failed trials report NaN
    best_so_far = [max(ok[: i + 1]) for i in range(len(ok))]
    times = [algorithm.outcomes[t].told_at for t in ids]
    if wall_s is None and algorithm.started_at and all(times):
        wall_s = max(times) - algorithm.started_at
    quartiles = statistics.quantiles(ok, n=4)
    return {
        "algorithm": algorithm.name, "trials": len(ids), "failed": len(accuracy) - len(ok),
        "best": round(max(ok), 4), "median": round(statistics.median(ok), 4),
        "q1": round(quartiles[0], 4), "q3": round(quartiles[2], 4), "worst": round(min(ok), 4),
        **{f"best_after_{n}": round(best_so_far[n - 1], 4) for n in BUDGETS if n <= len(best_so_far)},
        "median_last_20": round(statistics.median(ok[-20:]), 4),
        "mean_trial_s": round(statistics.mean(m["trial_seconds"] for m in metrics), 1),
        "mean_training_steps_s": round(statistics.mean(m["train_seconds"] - m["first_step_seconds"] for m in metrics), 1),
        **({"wall_s": round(wall_s), "trials_per_hour": round(len(ids) / wall_s * 3600, 1)} if wall_s else {}),
        **(rung_figures(algorithm, ids) if algorithm.rungs else {}),
    }


def rung_figures(algorithm, ids: list[int]) -> dict:
    """Trials that reached each rung, and the best result there (a multi-fidelity search)."""
    figures = {}
    for rung, epochs in enumerate(algorithm.rungs.epochs):
        values = [algorithm.rung_results[t][rung]["val_accuracy"] for t in ids
                  if len(algorithm.rung_results.get(t, ())) > rung]
        figures[f"trials_at_{epochs}_epochs"] = len(values)
        figures[f"best_at_{epochs}_epochs"] = round(max(values), 4) if values else None
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--wall_s", default="", help="wall seconds per dir, comma-separated (else from the journal)")
    parser.add_argument("--within_s", type=float, default=None, help="only trials told this soon after the start")
    args = parser.parse_args()
    walls = [float(w) for w in args.wall_s.split(",")] if args.wall_s else [None] * len(args.dirs)
    counts = [resume(os.path.join(d, "journal.jsonl"), read_only=True).completed() for d in args.dirs]
    budget = min(counts)
    if args.within_s is not None:
        budget = max(counts)
    rows = {d: summarize(d, budget, w if c == budget else None, args.within_s) for d, c, w in zip(args.dirs, counts, walls)}
    keys = list(dict.fromkeys(k for r in rows.values() for k in r))
    print(f"first {budget} trials of each")
    print(f"{'figure':<24}" + "".join(f"{os.path.basename(d.rstrip('/')):>16}" for d in rows))
    for k in keys:
        print(f"{k:<24}" + "".join(f"{str(r.get(k, '')):>16}" for r in rows.values()))
    print(json.dumps({"budget": budget, **{os.path.basename(d.rstrip("/")): r for d, r in rows.items()}}))


if __name__ == "__main__":
    main()
