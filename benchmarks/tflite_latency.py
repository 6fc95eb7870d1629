"""Latency as deployed against latency in Keras (issue 37): --networks random networks of the macro
space (nasnet_macro, seeded) at the CPU search config's proxy size (32 px, 10 classes), each measured
at batch 1 twice, in this process, one after the other: the traced Keras model in TensorFlow
(`--latency_runtime=keras`, the default) and the network converted to float32 TFLite and run by
LiteRT's interpreter (`--latency_runtime=tflite`), as trainer/candidate_network.py measures them.
Reported: Kendall's tau between the two orders, each network's pair, and what a TFLite latency costs
per candidate (conversion and calls) against a Keras one (the trace and calls).

Run: .venv/bin/python benchmarks/tflite_latency.py [--networks=24 --seed=0]
Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def measure(genotype, proxy) -> dict:
    """One network's Keras and TFLite batch-1 latencies and the seconds each measure took."""
    import tensorflow as tf

    from trainer.candidate_network import (batch1_latency_ms, inference_function, proxy_network,
                                           tflite_batch1_latency_ms)
    from trainer.worker_setup import reset_keras

    reset_keras()
    model, size = proxy_network(genotype, proxy, (32, 32, 3), 10, fused_batch_norm=True, space="nasnet_macro")
    image = tf.random.uniform([1, 32, 32, 3], -1.0, 1.0)
    t = time.perf_counter()
    keras_ms = batch1_latency_ms(inference_function(model, (32, 32, 3)), image)
    keras_s = time.perf_counter() - t
    t = time.perf_counter()
    tflite_ms = tflite_batch1_latency_ms(model, image)
    tflite_s = time.perf_counter() - t
    return {"params": size["params"], "multiply_adds": size["multiply_adds"], "keras_ms": round(keras_ms, 3),
            "tflite_ms": round(tflite_ms, 3), "keras_measure_s": round(keras_s, 2), "tflite_measure_s": round(tflite_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--networks", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from scipy.stats import kendalltau

    from core.proxy_config import ProxyConfig
    from searchspace import space_from_config

    space = space_from_config({"name": "nasnet_macro"})
    proxy = ProxyConfig(image_size=32, num_cells=1, filters=8, threads=0)
    rng = random.Random(args.seed)
    rows = []
    for i in range(args.networks):
        row = measure(space.sample(rng), proxy)
        rows.append(row)
        print(f"network {i}: {row}", flush=True)
    tau, p = kendalltau([r["keras_ms"] for r in rows], [r["tflite_ms"] for r in rows])
    ratio = [r["tflite_ms"] / r["keras_ms"] for r in rows]
    print(json.dumps({
        "networks": len(rows), "seed": args.seed, "kendall_tau": round(float(tau), 3), "p_value": round(float(p), 4),
        "median_tflite_over_keras_latency": round(statistics.median(ratio), 3),
        "median_keras_ms": round(statistics.median(r["keras_ms"] for r in rows), 3),
        "median_tflite_ms": round(statistics.median(r["tflite_ms"] for r in rows), 3),
        "median_keras_measure_s": round(statistics.median(r["keras_measure_s"] for r in rows), 2),
        "median_tflite_measure_s": round(statistics.median(r["tflite_measure_s"] for r in rows), 2),
    }))


if __name__ == "__main__":
    main()
