"""benchmarks/gpu_training.py, tiny on CPU: both sides (our Trainer, Keras fit) train a model of the
table in mixed_float16 and the script ends with its JSON line. Its GPU figures come from a GPU
machine. The script builds every model alike: CIFAR ResNet-20 costs 48 CPU-seconds here where
ResNet-50 and AmoebaNet-D cost 80 (NASNet cells in mixed_float16 train in tests/test_trainer.py;
bfloat16 training is tested in tests/test_train.py). The script's own process runs here (it only
writes the labels and starts a fresh process per side): a TensorFlow import less."""

import contextlib
import io
import json
import os
import runpy
import sys
from unittest import mock

import pytest

from tests.conftest import REPO


@pytest.mark.integration
def test_the_gpu_training_benchmark_runs_tiny_on_cpu(monkeypatch):
    script, out = os.path.join(REPO, "benchmarks", "gpu_training.py"), io.StringIO()
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    argv = [script, "--models=resnet20", "--image_size=32", "--batch=2", "--filters=8", "--num_classes=10",
            "--steps=2", "--loops=1", "--precisions=mixed_float16", "--num_cells=1"]
    with mock.patch.object(sys, "argv", argv), mock.patch.object(sys, "path", [os.path.dirname(script), *sys.path]), \
            contextlib.redirect_stdout(out):
        runpy.run_path(script, run_name="__main__")
    figures = json.loads(out.getvalue().strip().splitlines()[-1])
    rows = {(r["model"], r["precision"]): r for r in figures["rows"]}
    assert set(rows) == {("resnet20", "mixed_float16")}
    for row in rows.values():
        assert row["trainer_images_per_sec"] > 0 and row["fit_images_per_sec"] > 0 and row["device"] == "CPU"
