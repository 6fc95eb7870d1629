"""How far a supernet's inherited accuracy can be trusted (issue 54, item 4), and what it costs: on a
prepared data dir with the sized search's proxy (experiments/search/sizing.py), in one process,

1. the supernet of `--seed_net` at `--width` trained once (trainer/supernet_training.py), timed;
2. `--candidates` random subnets scored (trainer/subnet_score.py: inherited weights, BN recalibrated,
   validation accuracy, TFLite batch-1 latency of the stand-alone subnet), timed: candidates an hour,
   and within the hour the supernet's training leaves;
3. `--audit` nets trained alone by the search's proxy trainer (same data, recipe and validation
   images), half spread over the scored front (accuracy against latency), half at random, with the
   seed itself (the frame's airbench94 at that width): Kendall's tau (scipy, tau-b) between
   inherited and stand-alone validation accuracy, and the mean gap; the seed's stand-alone training
   time is what the supernet's is compared with.

Each result is appended to OUT/rows.jsonl as it comes (a rerun skips what is there), and the last
line printed is one JSON object. Nothing else is written.

Run: .venv/bin/python benchmarks/supernet_fidelity.py --data=DIR --out=DIR [--width=0.5]
       [--candidates=200] [--audit=12] [--image_size=32] [--epochs=0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rows(path: str) -> list[dict]:
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def append(path: str, row: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def front(scored: list[dict]) -> list[dict]:
    """The scored nets no other is both more accurate and faster than, fastest first."""
    return sorted((r for r in scored if not any(o["val_accuracy"] >= r["val_accuracy"] and o["latency_ms"] <=
                                                r["latency_ms"] and o is not r and (o["val_accuracy"], o["latency_ms"])
                                                != (r["val_accuracy"], r["latency_ms"]) for o in scored)),
                  key=lambda r: r["latency_ms"])


def audit_nets(scored: list[dict], seed_key: str, count: int) -> list[str]:
    """The keys to train alone: the seed, spread over the front, then at random (seeded)."""
    best = front(scored)
    picks = [seed_key] + [best[round(i * (len(best) - 1) / max(1, count // 2 - 1))]["key"] for i in range(count // 2)]
    rest = [r["key"] for r in scored if r["key"] not in picks]
    random.Random(0).shuffle(rest)
    picks = list(dict.fromkeys(picks))
    return picks + rest[:count - len(picks)]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed_net", default="airbench94")
    parser.add_argument("--width", type=float, default=0.5)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--audit", type=int, default=12)
    parser.add_argument("--image_size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=0, help="0: the sized search's rule")
    return parser.parse_args()


def score_candidates(log: str, space, proxy, data, seed, count: int) -> None:
    """The seed and random subnets scored from the trained supernet, each appended to the log."""
    from trainer.subnet_score import scorer

    found, rng = scorer(space, proxy, data, os.path.join(os.path.dirname(log), "supernet")), random.Random(1)
    for net in dict.fromkeys([seed] + [space.sample(rng) for _ in range(count - 1)]):
        metrics = found.score(net)
        append(log, {"kind": "scored", "key": net.key(), "genotype": net.to_json(),
                     **{k: metrics[k] for k in ("val_accuracy", "latency_ms", "params", "multiply_adds",
                                                "score_seconds", "latency_seconds")}})


def train_alone(log: str, space, proxy, keys: list[str], scored: list[dict]) -> None:
    """Each net of `keys` trained alone by the proxy trainer (those the log has are skipped)."""
    from trainer.candidate import train_candidate

    for key in keys:
        if ("alone", key) in {(r["kind"], r.get("key")) for r in rows(log)}:
            continue
        genotype = space.genotype_from_json(next(r["genotype"] for r in scored if r["key"] == key))
        metrics = train_candidate(genotype, proxy, space="convnet")
        append(log, {"kind": "alone", "key": key, **{k: metrics.get(k) for k in (
            "val_accuracy", "train_seconds", "images_per_sec", "latency_ms")}})


def summary(log: str, supernet: dict, seed_key: str) -> dict:
    from scipy.stats import kendalltau

    scored = [r for r in rows(log) if r["kind"] == "scored"]
    alone = {r["key"]: r for r in rows(log) if r["kind"] == "alone"}
    inherited = {r["key"]: r["val_accuracy"] for r in scored}
    keys = sorted(alone)
    tau, p = kendalltau([inherited[k] for k in keys], [alone[k]["val_accuracy"] for k in keys])
    score_s = statistics.mean(r["score_seconds"] for r in scored)
    seed_alone = alone[seed_key]["train_seconds"]
    return {"cpu": "avx512" if "avx512bw" in open("/proc/cpuinfo").read() else "avx2",
            "train_images": supernet["train_images"], "epochs": supernet["epochs"], "seed": seed_key,
            "supernet_seconds": round(supernet["train_seconds"], 1), "seed_alone_seconds": round(seed_alone, 1),
            "supernet_over_seed": round(supernet["train_seconds"] / seed_alone, 2),
            "score_seconds_mean": round(score_s, 2), "candidates_per_hour": round(3600 / score_s),
            "candidates_in_hour_after_training": max(0, int((3600 - supernet["train_seconds"]) / score_s)),
            "audited": len(keys), "kendall_tau": round(float(tau), 3), "p_value": round(float(p), 4),
            "mean_gap": round(statistics.mean(alone[k]["val_accuracy"] - inherited[k] for k in keys), 4)}


def main() -> None:
    args = arguments()
    from core.proxy_config import ProxyConfig
    from experiments.search import sizing
    from searchspace.convnet import CONVNET_REFERENCES, at_width, convnet_space
    from searchspace.supernet import supernet_space
    from trainer.proxy_data import load_proxy_data
    from trainer.supernet_training import train_supernet

    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "rows.jsonl")
    proxy = ProxyConfig(dataset="prepared", data=os.path.abspath(args.data), latency_runtime="tflite",
                        **{**sizing.proxy_settings(sizing.DataFacts.read(args.data)), "image_size": args.image_size,
                           **({"epochs": args.epochs} if args.epochs else {})})
    seed = at_width(CONVNET_REFERENCES[args.seed_net], args.width)
    space = supernet_space(seed, convnet_space(args.image_size))
    data = load_proxy_data(proxy)
    supernet = train_supernet(space, proxy, data, os.path.join(args.out, "supernet"))
    if not any(r["kind"] == "supernet" for r in rows(log)):
        append(log, {"kind": "supernet", **{k: supernet[k] for k in ("train_seconds", "images_per_sec", "epochs",
                                                                   "train_images", "sandwich")}})
    if not any(r["kind"] == "scored" for r in rows(log)):
        score_candidates(log, space, proxy, data, seed, args.candidates)
    scored = [r for r in rows(log) if r["kind"] == "scored"]
    train_alone(log, space, proxy, audit_nets(scored, seed.key(), args.audit), scored)
    print(json.dumps(summary(log, supernet, seed.key())))


if __name__ == "__main__":
    main()
