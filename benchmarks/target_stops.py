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
   would give (the trial's own median step, and that times its parent's evaluations to the target),
   and with --zero_cost SNIP at initialisation (a zero-cost proxy; TensorFlow).

The last line printed is one JSON object.

Run: .venv/bin/python benchmarks/target_stops.py SEARCH_DIR [--margins=1,1.1,1.25,1.5]
       [--slacks=0,0.02,0.05] [--min_hits=3] [--zero_cost]
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
                    "hits": sum(r["hit"] for r in rows),
                    "misses_stopped": sum(r["stopped"] and not r["hit"] for r in rows),
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


def zero_cost(algorithm, ids: list[int], search_dir: str, images: int = 64) -> dict[int, float]:
    """SNIP at initialisation (Lee et al. 2019; Abdelfattah et al. 2021's zero-cost proxies): the sum of
    |weight x gradient of the loss| over the weights, on `images` training images of the search's proxy
    data, negated so that, as the other scores, smaller predicts better (a net more trainable at its
    start is predicted to reach the target sooner)."""
    import keras
    import tensorflow as tf

    from core.proxy_config import ProxyConfig
    from trainer.convnet import build_convnet
    from trainer.proxy_data import load_proxy_data

    config = json.load(open(os.path.join(search_dir, "search_config.json")))
    proxy = ProxyConfig(**{k: v for k, v in config["proxy"].items() if k in ProxyConfig.__dataclass_fields__})
    data = load_proxy_data(proxy)
    x = tf.constant(data.x_train[:images], tf.float32)
    x = x / 127.5 - 1 if data.x_train.dtype == "uint8" else x
    y = tf.constant(data.y_train[:images])
    out = {}
    for trial_id in ids:
        keras.utils.set_random_seed(0)
        model = build_convnet(algorithm.trials[trial_id].genotype, tuple(x.shape[1:]), data.num_classes)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, model(x, training=True),
                                                                               from_logits=True))
        grads = tape.gradient(loss, model.trainable_variables)
        out[trial_id] = -float(sum(tf.reduce_sum(tf.abs(w * g)) for w, g in zip(model.trainable_variables, grads)
                                   if g is not None))
        keras.backend.clear_session()
    return out


def taus(algorithm, ids: list[int], search_dir: str, with_zero_cost: bool) -> dict[str, dict]:
    time = {t: float(algorithm.outcomes[t].metrics["seconds_to_target"]) for t in ids}
    metrics = {t: algorithm.outcomes[t].metrics for t in ids}
    scores = {name: {t: float(m[name]) for t, m in metrics.items() if name in m}
              for name in ("params", "multiply_adds", "step_ms")}
    scores["surrogate"] = surrogate_scores(algorithm, ids)
    if with_zero_cost:
        scores["snip (zero-cost, negated)"] = zero_cost(algorithm, ids, search_dir)
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
    parser.add_argument("--zero_cost", action="store_true", help="also SNIP at initialisation (TensorFlow; a "
                                                                  "convnet search's nets built on its proxy data)")
    args = parser.parse_args()
    config = json.load(open(os.path.join(args.search_dir, "search_config.json")))
    target = float(config["proxy"]["target_accuracy"])
    algorithm = resume(os.path.join(args.search_dir, "journal.jsonl"), read_only=True)
    ids = trained(algorithm)
    stops = stop_rows(algorithm, ids, target, [float(m) for m in args.margins.split(",")],
                      [float(s) for s in args.slacks.split(",")], args.min_hits)
    for row in stops:
        print(json.dumps(row))
    tau = taus(algorithm, ids, args.search_dir, args.zero_cost)
    for name, row in tau.items():
        print(f"{name}: Kendall tau {row['tau']} over {row['nets']} nets")
    print(json.dumps({"search_dir": args.search_dir, "target": target, "trained_nets": len(ids),
                      "hits": sum(algorithm.outcomes[t].metrics.get("time_to_target_s") is not None for t in ids),
                      "stops": stops, "tau": tau}))


if __name__ == "__main__":
    main()
