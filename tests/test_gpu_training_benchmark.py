"""benchmarks/gpu_training.py, tiny on CPU: both sides (our Trainer, Keras fit) train a model of the
table in mixed_float16 and the script ends with its JSON line. Its GPU figures come from a GPU
machine. The script builds every model alike: CIFAR ResNet-20 costs 48 CPU-seconds here where
ResNet-50 and AmoebaNet-D cost 80 (NASNet cells in mixed_float16 train in tests/test_trainer.py;
bfloat16 training is tested in tests/test_train.py). The script's own process runs here (it only
writes the labels and starts a fresh process per side): a TensorFlow import less."""

import json
import os

import pytest

from tests.conftest import REPO, script_here


@pytest.mark.integration
def test_the_gpu_training_benchmark_runs_tiny_on_cpu(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    out = script_here(os.path.join(REPO, "benchmarks", "gpu_training.py"), "--models=resnet20", "--image_size=32",
                      "--batch=2", "--filters=8", "--num_classes=10", "--steps=2", "--loops=1",
                      "--precisions=mixed_float16", "--num_cells=1")
    figures = json.loads(out.strip().splitlines()[-1])
    rows = {(r["model"], r["precision"]): r for r in figures["rows"]}
    assert set(rows) == {("resnet20", "mixed_float16")}
    for row in rows.values():
        assert row["trainer_images_per_sec"] > 0 and row["fit_images_per_sec"] > 0 and row["device"] == "CPU"
