"""Whether a search's proxy ranks networks as full training does (issue 35, item 4): for networks
trained to the end by `amoeba train` (their model dirs) and scored by a convnet search's proxy (its
results.csv, matched by the network's genotype key), Kendall's tau (scipy's tau-b) between the
proxy's score (seconds_to_target, smaller first) and full training's time to each top-1 target
(a net that never reached one ranks after every one that did, tied among themselves), and its final
top-1.

A model dir's network is its train_config.json's convnet genotype, or a family the convnet space
holds exactly at width 1 (airbench94, airbench94_relu, resnet9), or resnet9 at another width (its
widths scaled).
Time to a target: the wall seconds at the end of the first evaluation at or over it
(eval_history.jsonl: training and evaluations, DAWNBench's count), so it is only as fine as the
evaluations were frequent. This script must not train or write anything: it prints a table and
one JSON line at the end.

Run: .venv/bin/python benchmarks/proxy_rank_agreement.py --search_dirs=S1,S2 --model_dirs=M1,M2,...
       [--targets=0.85,0.9]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import pandas as pd
from scipy.stats import kendalltau

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from searchspace import genotype_from_json  # noqa: E402
from searchspace.convnet import ConvNetGenotype, family_network  # noqa: E402

def network_of(model_dir: str) -> ConvNetGenotype:
    """The convnet genotype a model dir trained; ValueError naming the dir when it has none."""
    with open(os.path.join(model_dir, "train_config.json"), encoding="utf-8") as f:
        saved = json.load(f)
    if saved.get("genotype"):
        genotype = genotype_from_json(saved["genotype"])
        if isinstance(genotype, ConvNetGenotype):
            return genotype
    network = family_network(str(saved.get("model")), saved.get("width_multiplier"))
    if network is None:
        raise ValueError(f"{model_dir}: model {saved.get('model')!r} is not a network of the convnet space")
    return network


def proxy_scores(search_dirs: list[str]) -> dict[str, float]:
    """seconds_to_target of each genotype key the searches trained (its first finished trial)."""
    scores: dict[str, float] = {}
    for search_dir in search_dirs:
        results = pd.read_csv(os.path.join(search_dir, "results.csv"))
        for row in results[results.status == "ok"].sort_values("trial_id").itertuples():
            scores.setdefault(row.key, float(row.seconds_to_target))
    return scores


def full_training(model_dir: str, targets: list[float]) -> dict[str, float]:
    """Final top-1, the seconds to each target (inf: not reached) and the total wall seconds."""
    with open(os.path.join(model_dir, "eval_history.jsonl"), encoding="utf-8") as f:
        history = [json.loads(line) for line in f if line.strip()]
    if not history:
        raise ValueError(f"{model_dir}: no evaluation in eval_history.jsonl")
    row = {"top1": history[-1]["top1"], "seconds": history[-1]["wall_seconds"]}
    for target in targets:
        row[f"to_{target:g}"] = next((e["wall_seconds"] for e in history if e["top1"] >= target), math.inf)
    return row


def agreement(table: pd.DataFrame, targets: list[float]) -> dict[str, dict[str, float]]:
    """Kendall's tau-b (and its p-value) of the proxy's score against each full-training measure."""
    measures = {"top1": -table.top1, **{f"to_{t:g}": table[f"to_{t:g}"] for t in targets}}
    out = {}
    for name, values in measures.items():
        tau, p = kendalltau(table.proxy_seconds, values)
        out[name] = {"tau": round(float(tau), 3), "p": round(float(p), 4)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--search_dirs", required=True, help="comma-separated convnet search dirs")
    parser.add_argument("--model_dirs", required=True, help="comma-separated amoeba train model dirs")
    parser.add_argument("--targets", default="0.85,0.9", help="comma-separated top-1 targets")
    args = parser.parse_args()
    targets = [float(t) for t in args.targets.split(",")]
    scores = proxy_scores(args.search_dirs.split(","))
    rows = []
    for model_dir in args.model_dirs.split(","):
        key = network_of(model_dir).key()
        if key not in scores:
            raise ValueError(f"{model_dir}: its network {key} was not scored by {args.search_dirs}")
        rows.append({"model_dir": os.path.basename(model_dir.rstrip("/")), "proxy_seconds": scores[key],
                     **full_training(model_dir, targets)})
    table = pd.DataFrame(rows).sort_values("proxy_seconds")
    print(table.to_string(index=False))
    print(json.dumps({"networks": len(table), "kendall_tau": agreement(table, targets),
                      "rows": table.replace(math.inf, None).to_dict("records")}))


if __name__ == "__main__":
    main()
