"""Training images/s of small CIFAR-sized networks on this CPU, with TensorFlow's oneDNN on and off.

Each measurement is a fresh child process (oneDNN is chosen when TensorFlow is imported): Keras
compile + fit at batch 128 on random 32x32x3 images held in memory, SGD, steps_per_execution 10,
one untimed epoch (the trace) then `--steps` timed steps. Models: ResNet-20, ResNet-9 at a quarter
width, a pooling NASNet cell network at N=1, F=8 (the guide's 250 images/s figure), and the macro
space's closest genotype to ResNet-9 at F=16 when it had 3 stacks (no third reduction). Rounds
alternate oneDNN off, on, on, off (ABBA) so drift on the machine hits both alike; the ratio is
the median of each round's on/off pair.

Run: .venv/bin/python benchmarks/model_throughput.py [--rounds=2 --steps=30]   (~4 min on 2 CPUs)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ("resnet20", "resnet9@0.25", "nasnet_pool_n1_f8", "macro_resnet9_like_f16")


def spec(name: str):
    from searchspace import Block, Macro, MacroGenotype, NasNetGenotype, make_cell
    from trainer.models import ModelSpec

    if name == "resnet9@0.25":
        return ModelSpec("resnet9", 10, 32, width_multiplier=0.25)
    if name == "nasnet_pool_n1_f8":
        pool = make_cell([Block((0, 1), ("max_pool_3x3", "avg_pool_3x3"))] +
                         [Block((i % 2, 2), ("none", "max_pool_3x3")) for i in range(4)])
        return ModelSpec("genotype", 10, 32, num_cells=1, filters=8, stem="cifar", fused_batch_norm=True,
                         genotype=NasNetGenotype(pool, pool))
    if name == "macro_resnet9_like_f16":
        residual = make_cell([Block((0, 0), ("plain_conv_3x3", "none")), Block((2, 2), ("plain_conv_3x3", "none"))])
        return ModelSpec("nasnet_macro", 10, 32, fused_batch_norm=True, genotype=MacroGenotype(
            residual, residual, macro=Macro((0, 1, 1), 16, "conv_pool", "none")))
    return ModelSpec(name, 10, 32)


def child(name: str, steps: int) -> dict:
    import time

    import keras
    import numpy as np
    import tensorflow as tf

    from trainer.models import build_model, model_report

    model = build_model(spec(name))
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (128 * 10, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, 128 * 10)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(128, drop_remainder=True).repeat().prefetch(2)
    model.compile(keras.optimizers.SGD(0.05, momentum=0.9),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=10)
    model.fit(data, epochs=1, steps_per_epoch=10, verbose=0)
    start = time.perf_counter()
    model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
    seconds = time.perf_counter() - start
    return {"model": name, **model_report(model), "images_per_sec": round(128 * steps / seconds, 1)}


def measure(name: str, onednn: bool, steps: int) -> dict:
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1" if onednn else "0", "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, __file__, "--child", name, f"--steps={steps}"], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps)))
        return
    rows = {}
    for name in MODELS:
        pairs, size = [], {}
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            got = {on: measure(name, on, args.steps) for on in order}
            pairs.append((got[False]["images_per_sec"], got[True]["images_per_sec"]))
            size = {k: got[False][k] for k in ("params", "multiply_adds")}
        off = statistics.median(p[0] for p in pairs)
        on = statistics.median(p[1] for p in pairs)
        rows[name] = {**size, "images_per_sec_onednn_off": off, "images_per_sec_onednn_on": on,
                      "on_over_off": round(statistics.median(b / a for a, b in pairs), 3)}
        print(f"{name:24} {size['params']:>9,} params {size['multiply_adds'] / 1e6:7.1f}M MACs  "
              f"oneDNN off {off:7.1f}  on {on:7.1f} images/s", flush=True)
    print(json.dumps({"benchmark": "model_throughput", "batch": 128, "steps": args.steps, "rounds": args.rounds,
                      "models": rows}))


if __name__ == "__main__":
    main()
