"""What a time-to-target search's race would have saved, and which cheap score screens its children
best (issue 55, evolution/target_race.py), measured on a finished search's journal: no training.

1. The stops, replayed over the recorded curves in trial order (each trial given the stops its
   predecessors' results set; every trial was trained in full): for each --margins and --slacks
   rule, the winners it stops (a net faster to the target than every one before it), the hits it
   stops (each then ranks as a miss), the misses it stops, the seconds saved on the search's
   clock and the trained nets an hour at that saving (trials' whole seconds, less what was saved).
2. Each screening score's Kendall tau (tau-b) against seconds_to_target over the trained nets (a
   reused result counts once): params, multiply_adds and the additive model (evolution/surrogate.py,
   fitted to the trials before each one, as the screen fits it), beside what a measured step time
   would give (the trial's own median step, and that times its parent's evaluations to the target).

The last line printed is one JSON object.

Run: .venv/bin/python benchmarks/target_stops.py SEARCH_DIR [--margins=1,1.1,1.25,1.5]
       [--slacks=0,0.02,0.05] [--min_hits=3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evolution import resume  # noqa: E402
from evolution.surrogate import features, fit_additive  # noqa: E402
from evolution.target_race import TargetRace, kendall_tau, replay_stops  # noqa: E402


def trained(algorithm) -> list[int]:
    """The successful trials that trained (not reused), in the order they were told."""
    return [t for t, o in algorithm.outcomes.items() if o.status == "ok" and o.reused_from is None
            and "seconds_to_target" in o.metrics]


def stop_rows(algorithm, ids: list[int], target: float, margins: list[float], slacks: list[float],
              min_hits: int) -> list[dict]:
    results = [algorithm.outcomes[t].metrics for t in ids]
    trial_seconds = sum(float(m.get("trial_seconds", 0.0)) for m in results)
    rules = [("margin", m, TargetRace(stop_margin=m)) for m in margins]
    rules += [("slack", s, TargetRace(miss_slack=s, min_hits=min_hits)) for s in slacks]
    rules += [("both", f"{m}/{s}", TargetRace(stop_margin=m, miss_slack=s, min_hits=min_hits))
              for m in margins[:2] for s in slacks]
    out = []
    for kind, value, race in rules:
        rows = replay_stops(results, race, target)
        saved = sum(r["saved_s"] for r in rows)
        out.append({"rule": kind, "value": value, "winners_stopped": sum(r["winner"] and r["stopped"] for r in rows),
                    "hits_stopped": sum(r["hit"] and r["stopped"] for r in rows),
                    "hits": sum(r["hit"] for r in rows), "misses_stopped": sum(r["stopped"] and not r["hit"] for r in rows),
                    "misses": sum(not r["hit"] for r in rows), "saved_s": round(saved, 1),
                    "nets_per_hour": round(3600 * len(rows) / max(1.0, trial_seconds - saved), 1),
                    "nets_per_hour_before": round(3600 * len(rows) / max(1.0, trial_seconds), 1)})
    return out


def surrogate_scores(algorithm, ids: list[int]) -> dict[int, float]:
    """Each trial's time predicted by the additive model fitted to the trials told before it (from the
    third on): as the screen would have scored it."""
    scores = {}
    for n, trial_id in enumerate(ids):
        before = ids[:n]
        if len(before) >= 3:
            predict = fit_additive([features(algorithm.trials[t].genotype) for t in before],
                                   [algorithm.outcomes[t].metrics["seconds_to_target"] for t in before])
            scores[trial_id] = predict(features(algorithm.trials[trial_id].genotype))
    return scores


def parent_evaluations(algorithm, trial_id: int) -> float | None:
    """The evaluations the trial's parent took to its target (its curve's length for a hit)."""
    parent = algorithm.trials[trial_id].parent_id
    outcome = algorithm.outcomes.get(parent) if parent is not None else None
    if outcome is None or outcome.metrics.get("time_to_target_s") is None:
        return None
    return float(len(outcome.metrics["target_curve"]))


def taus(algorithm, ids: list[int]) -> dict[str, dict]:
    time = {t: float(algorithm.outcomes[t].metrics["seconds_to_target"]) for t in ids}
    scores = {name: {t: float(algorithm.outcomes[t].metrics[name]) for t in ids if name in algorithm.outcomes[t].metrics}
              for name in ("params", "multiply_adds", "step_ms")}
    scores["surrogate"] = surrogate_scores(algorithm, ids)
    scores["step_ms x parent's evaluations"] = {
        t: algorithm.outcomes[t].metrics["step_ms"] * parent_evaluations(algorithm, t) for t in ids
        if parent_evaluations(algorithm, t) is not None and "step_ms" in algorithm.outcomes[t].metrics}
    out = {}
    for name, score in scores.items():
        common = sorted(score)
        out[name] = {"tau": round(kendall_tau([score[t] for t in common], [time[t] for t in common]), 3),
                     "nets": len(common)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("search_dir")
    parser.add_argument("--margins", default="1,1.1,1.25,1.5")
    parser.add_argument("--slacks", default="0,0.02,0.05")
    parser.add_argument("--min_hits", type=int, default=3)
    args = parser.parse_args()
    config = json.load(open(os.path.join(args.search_dir, "search_config.json")))
    target = float(config["proxy"]["target_accuracy"])
    algorithm = resume(os.path.join(args.search_dir, "journal.jsonl"), read_only=True)
    ids = trained(algorithm)
    stops = stop_rows(algorithm, ids, target, [float(m) for m in args.margins.split(",")],
                      [float(s) for s in args.slacks.split(",")], args.min_hits)
    for row in stops:
        print(json.dumps(row))
    tau = taus(algorithm, ids)
    for name, row in tau.items():
        print(f"{name}: Kendall tau {row['tau']} over {row['nets']} nets")
    print(json.dumps({"search_dir": args.search_dir, "target": target, "trained_nets": len(ids),
                      "hits": sum(algorithm.outcomes[t].metrics.get("time_to_target_s") is not None for t in ids),
                      "stops": stops, "tau": tau}))


if __name__ == "__main__":
    main()
