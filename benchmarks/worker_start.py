"""What a fresh process pays before its first trial trains: the imports a trial worker makes, and
a Keras `fit`'s first step with Adam's slots built inside it or before it. Each figure is the
median CPU-seconds of `--repeats` fresh processes, measured side by side in one run.

Run: .venv/bin/python benchmarks/worker_start.py [--repeats=5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPU = "import resource as r; u = r.getrusage(r.RUSAGE_SELF); print(u.ru_utime + u.ru_stime)"
IMPORTS = {  # a trial worker imports Ray Tune (to report), our trial module, then TensorFlow and Keras
    "ray_tune": "import ray; from ray import tune",
    "numpy": "import numpy",
    "numpy_ml_dtypes": "import numpy, ml_dtypes",
    "tensorflow_keras": "import tensorflow, keras",
}
FIT = """
import random, time, keras
from searchspace import NasNetSpace
from trainer.models import ModelSpec, build_model
import numpy as np
x, y = np.random.default_rng(0).normal(size=(200, 8, 8, 3)).astype("float32"), np.arange(200) % 10
model = build_model(ModelSpec("genotype", num_classes=10, image_size=8, num_cells=1, filters=8,
                              genotype=NasNetSpace(num_blocks=2).sample(random.Random(0))))
optimizer = keras.optimizers.Adam(3e-3)
if PREBUILD:
    optimizer.build(model.trainable_variables)
model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=False)
import resource as r
u = r.getrusage(r.RUSAGE_SELF); before = u.ru_utime + u.ru_stime
model.fit(x[:50], y[:50], batch_size=50, epochs=1, verbose=0)
u = r.getrusage(r.RUSAGE_SELF); print(u.ru_utime + u.ru_stime - before)
"""


def cpu_seconds(code: str) -> float:
    """The CPU-seconds a fresh interpreter reports on its last line after running `code`."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": REPO})
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cases = {name: f"{code}\n{CPU}" for name, code in IMPORTS.items()}
    cases["fit_first_step_slots_inside"] = FIT.replace("PREBUILD", "False")
    cases["fit_first_step_slots_before"] = FIT.replace("PREBUILD", "True")
    runs: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):  # interleaved, so drift on a noisy machine hits every case alike
        for name, code in cases.items():
            runs[name].append(cpu_seconds(code))
    medians = {name: round(statistics.median(values), 3) for name, values in runs.items()}
    import ml_dtypes

    figures = {**medians, "ml_dtypes": ml_dtypes.__version__,
               "ml_dtypes_import": round(medians["numpy_ml_dtypes"] - medians["numpy"], 3),
               "slots_before_over_inside": round(medians["fit_first_step_slots_before"]
                                                 / medians["fit_first_step_slots_inside"], 3)}
    for name, value in figures.items():
        print(f"{name:<32}{value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
