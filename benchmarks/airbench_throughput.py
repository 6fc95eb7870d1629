"""Training and evaluation images/s of airbench94's network (the convnet space's airbench94) on this
CPU, with other activations and stage widths: what a hardware-aware search of the activation and
the widths trades against accuracy (issue 35).

A variant is `ACTIVATION` or `ACTIVATION:W1/W2/W3` (the three stages' widths; airbench94 is
gelu:64/256/256). Each measurement is a fresh child process: Keras compile + fit at `--batch` on
random 32x32x3 images held in memory, Nesterov SGD, one untimed step (the trace) then `--steps`
steps, each timed by a callback (the figure: batch / the median step; fit's own start and end are
left out); then a traced forward pass at `--eval_batch`, each of `--eval_calls` calls timed (the
figure: batch / the median call; evaluation counts in a race's time to a target: 6-view TTA is 6
forward passes an image). Rounds alternate the order so drift hits all alike; the figure is the
median over rounds. Images per CPU-second (the process's
user + system time) is reported beside images/s: on a shared machine it moves less with what else
runs. The CPU's AVX-512 flags are reported too. This script must not write anything: it prints a
line per measurement and one JSON line at the end.

Run: .venv/bin/python benchmarks/airbench_throughput.py [--variants=gelu,relu --rounds=1 --steps=4 --batch=512]
  (about 30 s a variant a round on 2 CPUs)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_flags() -> list[str]:
    """The avx512* flags of /proc/cpuinfo, sorted (none: an empty list)."""
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return []
    return sorted(set(re.findall(r"\bavx512[a-z0-9_]*", text)))


def variant_genotype(variant: str):
    """airbench94's convnet genotype with the activation and widths `variant` names."""
    from dataclasses import replace

    from searchspace.convnet import AIRBENCH94

    activation, _, widths = variant.partition(":")
    genotype = replace(AIRBENCH94, activation=activation)
    if widths:
        sizes = [int(w) for w in widths.split("/")]
        if len(sizes) != len(AIRBENCH94.stages):
            raise ValueError(f"{variant}: {len(AIRBENCH94.stages)} widths, W1/W2/W3")
        genotype = replace(genotype, stages=tuple(replace(s, width=w) for s, w in zip(AIRBENCH94.stages, sizes)))
    return genotype


def step_timer():
    """A Keras callback that keeps each step's wall and CPU seconds (the process's, all its threads)
    in its `wall` and `cpu` lists."""
    import keras

    class StepTimer(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.wall: list[float] = []
            self.cpu: list[float] = []

        def on_train_batch_begin(self, batch, logs=None) -> None:
            self.start = (time.perf_counter(), time.process_time())

        def on_train_batch_end(self, batch, logs=None) -> None:
            self.wall.append(time.perf_counter() - self.start[0])
            self.cpu.append(time.process_time() - self.start[1])

    return StepTimer()


def child(variant: str, steps: int, batch: int, eval_batch: int, eval_calls: int) -> dict:
    import keras
    import numpy as np
    import tensorflow as tf

    from trainer.convnet import build_convnet
    from trainer.models import model_report

    model = build_convnet(variant_genotype(variant), (32, 32, 3), 10)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (batch, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, batch)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).repeat()
    model.compile(keras.optimizers.SGD(0.05, momentum=0.85, nesterov=True),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    times = step_timer()
    model.fit(data, epochs=1, steps_per_epoch=steps + 1, verbose=0, callbacks=[times])
    wall, cpu = statistics.median(times.wall[1:]), statistics.median(times.cpu[1:])  # the first traces
    forward = tf.function(lambda images: model(images, training=False))
    images = tf.constant(rng.uniform(-1, 1, (eval_batch, 32, 32, 3)).astype("float32"))
    forward(images)
    calls = []
    for _ in range(eval_calls):
        start = time.perf_counter()
        forward(images).numpy()
        calls.append(time.perf_counter() - start)
    eval_rate = eval_batch / statistics.median(calls)
    return {"variant": variant, **model_report(model), "images_per_sec": round(batch / wall, 1),
            "images_per_cpu_sec": round(batch / cpu, 1), "eval_images_per_sec": round(eval_rate, 1)}


def measure(variant: str, args: argparse.Namespace) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    command = [sys.executable, __file__, "--child", variant, f"--steps={args.steps}", f"--batch={args.batch}",
               f"--eval_batch={args.eval_batch}", f"--eval_calls={args.eval_calls}"]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", default="gelu,relu", help="ACTIVATION[:W1/W2/W3], comma-separated; the "
                        "first is the one the others are compared with")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--eval_batch", type=int, default=1000)
    parser.add_argument("--eval_calls", type=int, default=6, help="forward calls timed at --eval_batch (the median)")
    parser.add_argument("--child")
    args = parser.parse_args()
    if min(args.steps, args.eval_calls, args.rounds) < 1:
        parser.error("--steps, --eval_calls and --rounds must be 1 or more")
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.batch, args.eval_batch, args.eval_calls)))
        return
    variants = args.variants.split(",")
    for variant in variants:
        variant_genotype(variant)  # a bad variant fails before any measurement
    rows: dict[str, list[dict]] = {v: [] for v in variants}
    for r in range(args.rounds):
        for variant in (variants if r % 2 == 0 else reversed(variants)):
            row = measure(variant, args)
            rows[variant].append(row)
            print(f"round {r + 1} {variant}: {row['images_per_sec']:.1f} images/s training, "
                  f"{row['images_per_cpu_sec']:.1f} per CPU-second, {row['eval_images_per_sec']:.1f} evaluating",
                  flush=True)
    summary = {}
    for variant, measured in rows.items():
        summary[variant] = {"params": measured[0]["params"], "multiply_adds": measured[0]["multiply_adds"],
                            **{k: statistics.median(m[k] for m in measured)
                               for k in ("images_per_sec", "images_per_cpu_sec", "eval_images_per_sec")}}
    first = summary[variants[0]]
    for values in summary.values():
        values["training_speedup"] = round(values["images_per_sec"] / first["images_per_sec"], 3)
        values["eval_speedup"] = round(values["eval_images_per_sec"] / first["eval_images_per_sec"], 3)
    print(json.dumps({"benchmark": "airbench_throughput", "batch": args.batch, "eval_batch": args.eval_batch,
                      "eval_calls": args.eval_calls,
                      "steps": args.steps, "rounds": args.rounds, "cpus": os.cpu_count(), "avx512": cpu_flags(),
                      "variants": summary}))


if __name__ == "__main__":
    main()
