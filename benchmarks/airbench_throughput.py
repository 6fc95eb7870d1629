"""Training images/s of airbench94's network (trainer/airbench.py) at width 1 on this CPU, GELU
against ReLU (issue 35: on a CPU the activation alone moves the time by about 40%).

Each measurement is a fresh child process: Keras compile + fit at batch 512 on random 32x32x3
images held in memory, SGD with momentum, one untimed step (the trace) then `--steps` steps, each
timed by a callback (the figure: batch / the median step; fit's own start and end are left out).
Rounds alternate the order (GELU first, then ReLU first) so drift hits both alike; the figure is
the median over rounds. Images per CPU-second (the process's user + system time, all its threads)
is reported beside images/s: on a shared machine it moves less with what else runs. The CPU's
AVX-512 flags (from /proc/cpuinfo) are reported too. This script must not write anything: it prints a line per measurement and one JSON line at the end.

Run: .venv/bin/python benchmarks/airbench_throughput.py [--rounds=1 --steps=4 --batch=512]  (1 min a round on 2 CPUs)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {"gelu": "airbench94", "relu": "airbench94_relu"}


def cpu_flags() -> list[str]:
    """The avx512* flags of /proc/cpuinfo, sorted (none: an empty list)."""
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return []
    return sorted(set(re.findall(r"\bavx512[a-z0-9_]*", text)))


def step_timer():
    """A Keras callback that keeps each step's wall and CPU seconds (the process's, all its threads)
    in its `wall` and `cpu` lists."""
    import time

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


def child(activation: str, steps: int, batch: int) -> dict:
    import keras
    import numpy as np
    import tensorflow as tf

    from trainer.models import ModelSpec, build_model, model_report

    model = build_model(ModelSpec(MODELS[activation], 10, 32))
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (batch * 2, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, batch * 2)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True).repeat().prefetch(2)
    model.compile(keras.optimizers.SGD(0.05, momentum=0.85),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    times = step_timer()
    model.fit(data, epochs=1, steps_per_epoch=steps + 1, verbose=0, callbacks=[times])
    wall, cpu = statistics.median(times.wall[1:]), statistics.median(times.cpu[1:])  # the first traces
    return {"activation": activation, **model_report(model), "images_per_sec": round(batch / wall, 1),
            "images_per_cpu_sec": round(batch / cpu, 1)}


def measure(activation: str, steps: int, batch: int) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, __file__, "--child", activation, f"--steps={steps}", f"--batch={batch}"],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.batch)))
        return
    seen: dict[str, list[float]] = {name: [] for name in MODELS}
    per_cpu: dict[str, list[float]] = {name: [] for name in MODELS}
    size = {}
    for r in range(args.rounds):
        for activation in (MODELS if r % 2 == 0 else reversed(MODELS)):
            row = measure(activation, args.steps, args.batch)
            seen[activation].append(row["images_per_sec"])
            per_cpu[activation].append(row["images_per_cpu_sec"])
            size = {k: row[k] for k in ("params", "multiply_adds")}
            print(f"round {r + 1} {activation}: {row['images_per_sec']:.1f} images/s, "
                  f"{row['images_per_cpu_sec']:.1f} per CPU-second", flush=True)
    rates = {name: statistics.median(values) for name, values in seen.items()}
    cpu_rates = {name: statistics.median(values) for name, values in per_cpu.items()}
    print(json.dumps({"benchmark": "airbench_throughput", "batch": args.batch, "steps": args.steps,
                      "rounds": args.rounds, "cpus": os.cpu_count(), "avx512": cpu_flags(), **size,
                      "images_per_sec": rates, "relu_over_gelu": round(rates["relu"] / rates["gelu"], 3),
                      "images_per_cpu_sec": cpu_rates,
                      "relu_over_gelu_cpu": round(cpu_rates["relu"] / cpu_rates["gelu"], 3)}))


if __name__ == "__main__":
    main()
