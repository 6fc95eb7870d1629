import os
import json
import subprocess
import sys

import keras
import numpy as np
import pytest

from searchspace import Block, NasNetGenotype, make_cell
from trainer.candidate import CandidateFailed, candidate_size, train_candidate, train_with_strategy
from trainer.proxy_data import eval_pipeline, load_digits, load_proxy_data
from trainer.nasnet import NasNetConfig, build_nasnet
from core.proxy_config import ProxyConfig
from tests.conftest import QUIET_TF, REPO

TINY = NasNetGenotype(make_cell([Block((0, 1), ("sep_conv_3x3", "none"))]),
                      make_cell([Block((0, 1), ("max_pool_3x3", "none"))]))


def test_width_doubles_at_each_reduction():
    model = build_nasnet(TINY, (8, 8, 1), 10, NasNetConfig(3, 4, "cifar"))  # N=1 per stack: 3 normal cells
    concat_widths = [layer.output.shape[-1] for layer in model.layers if isinstance(layer, keras.layers.Add)]
    assert concat_widths == [4, 8, 8, 16, 16]  # normal, reduction, normal, reduction, normal


def test_digits_split_is_fixed_and_stratified():
    a, b = load_digits(ProxyConfig()), load_digits(ProxyConfig())
    assert a.x_train.shape == (1437, 8, 8, 1) and a.x_val.shape == (360, 8, 8, 1)
    np.testing.assert_array_equal(a.y_val, b.y_val)
    counts = np.bincount(a.y_val, minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37
    assert 0.0 <= a.x_train.min() and a.x_train.max() <= 1.0


def test_eval_pipeline_pads_to_fixed_batches_with_zero_weight():
    x, y = np.ones((10, 2, 2, 1), "float32"), np.arange(10, dtype="int32")
    batches = list(eval_pipeline(x, y, 4))
    assert [b[0].shape[0] for b in batches] == [4, 4, 4]
    assert float(sum(np.sum(w) for _, _, w in batches)) == 10.0


def test_every_proxy_dataset_has_a_loader_and_bad_config_fails():
    with pytest.raises(ValueError, match="dataset"):
        ProxyConfig(dataset="imagenet21k")
    with pytest.raises(ValueError, match="epochs"):
        ProxyConfig(epochs=0)


@pytest.mark.integration
def test_train_candidate_learns_digits():
    proxy = ProxyConfig(epochs=3, filters=8)
    metrics = train_candidate(TINY, proxy)
    assert metrics["val_accuracy"] > 0.5  # chance is 0.1
    assert metrics["params"] > 1000 and metrics["images_per_sec"] > 0
    assert metrics["first_step_seconds"] < metrics["train_seconds"]
    # costs: trainable parameters as papers count them (the same before training), latencies, step time
    model = build_nasnet(TINY, (8, 8, 1), 10, NasNetConfig(3, 8, "cifar"))
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    assert metrics["params"] == trainable == candidate_size(TINY, proxy)["params"] < model.count_params()
    assert 0 < metrics["latency_ms"] < metrics["latency_ms_batch"] and metrics["eval_batch"] == 360
    assert 0 < metrics["step_ms"] < 1000 * metrics["train_seconds"]


@pytest.mark.integration  # trains 3 epochs, as test_train_candidate_learns_digits
@pytest.mark.parametrize("precision", ["bfloat16", "mixed_float16"])
def test_train_candidate_learns_digits_in_16_bit_precision(precision):
    metrics = train_candidate(TINY, ProxyConfig(epochs=3, filters=8, precision=precision))
    assert metrics["val_accuracy"] > 0.5  # chance is 0.1
    assert keras.mixed_precision.global_policy().name == "float32"  # the next trial starts in float32


@pytest.mark.integration  # trains 3 epochs, as test_train_candidate_learns_digits
def test_the_strategy_path_of_tpu_trials_learns_digits_under_the_default_strategy():
    import tensorflow as tf

    proxy = ProxyConfig(epochs=3, filters=8)
    metrics = train_with_strategy(TINY, proxy, load_proxy_data(proxy), tf.distribute.get_strategy())
    assert metrics["val_accuracy"] > 0.5 and metrics["validation_images"] == 360  # chance is 0.1


def test_a_timed_candidate_fixes_its_step_count_and_a_slow_one_is_measured_untrained(tmp_path):
    proxy = ProxyConfig(train_seconds=0.5, filters=8)
    metrics = train_candidate(TINY, proxy, state_dir=str(tmp_path))
    with open(tmp_path / "train_steps.json") as f:
        recorded = json.load(f)
    assert metrics["train_steps"] == recorded["train_steps"] >= 7  # the first, 5 calibration steps, then more
    with open(tmp_path / "progress.json") as f:  # what the search's progress line shows of a running trial
        progress = json.load(f)
    assert progress["phase"] == "training" and progress["step"] == progress["total_steps"] == metrics["train_steps"]
    assert metrics["train_steps"] * metrics["calibration_step_ms"] == pytest.approx(500, rel=0.2)
    assert metrics["epochs"] == pytest.approx(metrics["train_steps"] / (1437 // 64))
    with open(tmp_path / "train_steps.json", "w") as f:  # as a re-issued trial finds it
        json.dump({"train_steps": 9, "calibration_step_ms": 50.0}, f)
    assert train_candidate(TINY, proxy, state_dir=str(tmp_path))["train_steps"] == 9
    slow = train_candidate(TINY, ProxyConfig(epochs=50, filters=8), max_latency_ms=1e-6)
    assert slow["latency_ms"] > 1e-6 and np.isnan(slow["val_accuracy"]) and "train_seconds" not in slow
    deployed = train_candidate(TINY, ProxyConfig(epochs=50, filters=8, latency_runtime="tflite"), max_latency_ms=1e-6)
    assert deployed["latency_ms"] > 1e-6 and np.isnan(deployed["val_accuracy"])  # LiteRT's, as the limit reads it
    assert deployed["latency_ms"] != slow["latency_ms"]
    with pytest.raises(ValueError, match="proxy latency_runtime: unknown 'onnx'; known: \\['keras', 'tflite'\\]"):
        ProxyConfig(latency_runtime="onnx")


def test_a_time_to_accuracy_candidate_stops_at_the_target_and_a_miss_ranks_after_every_hit():
    hit = train_candidate(TINY, ProxyConfig(epochs=20, filters=8, target_accuracy=0.3, target_seconds=60,
                                            epochs_per_eval=0.5, weight_decay=5e-4, lr_warmup_epochs=0.5))
    assert hit["best_val_accuracy"] >= hit["val_accuracy"] >= 0.3 and hit["epochs"] < 20  # stopped early
    assert hit["seconds_to_target"] == hit["time_to_target_s"] < 60  # evaluations counted: tests/test_time_to_target.py
    assert hit["evaluations"] == round(hit["epochs"] / 0.5) and hit["train_steps"] % 11 == 0  # 22 steps an epoch
    miss = train_candidate(TINY, ProxyConfig(epochs=1, filters=4, target_accuracy=0.99, target_seconds=30,
                                             learning_rate=1e-4))
    assert "time_to_target_s" not in miss and miss["evaluations"] == 4 and miss["epochs"] == 1
    assert miss["seconds_to_target"] == pytest.approx(30 * (1 + 0.99 - miss["best_val_accuracy"]))


def test_warm_up_then_cosine():
    from trainer.fused_optimizer import RestartingCosine

    schedule = RestartingCosine(0.1, 100, warmup=10)
    assert [round(float(schedule(s)), 4) for s in (0, 5, 10, 55, 100)] == [0.0, 0.05, 0.1, 0.05, 0.0]
    assert float(RestartingCosine(0.1, 100)(0)) == pytest.approx(0.1)  # no warm-up: the peak at once


def test_the_strategy_path_of_tpu_trials_trains_the_one_device_recipe_with_decay_and_warm_up():
    import tensorflow as tf
    from trainer.candidate_strategy import _compiled_network
    from trainer.fused_optimizer import RestartingCosine

    proxy = ProxyConfig(epochs=4, filters=4, weight_decay=5e-4, lr_warmup_epochs=0.3)
    data = load_proxy_data(proxy)  # 1437 training images: 22 steps an epoch, a warm-up of 6.6
    model, _ = _compiled_network(TINY, proxy, data, tf.distribute.get_strategy(), "nasnet")
    kernels = [v for v in model.trainable_variables if len(v.shape) > 1]
    decay = 5e-4 * sum(float(tf.nn.l2_loss(v)) for v in kernels)  # the one-device loop's L2 term
    assert float(tf.add_n(model.losses)) == pytest.approx(decay, rel=1e-5)
    one_device = RestartingCosine(0.1, 4 * 22, warmup=0.3 * 22)
    for step in (0, 3, 6, 7, 40, 88):
        model.optimizer.iterations.assign(step)
        assert float(model.optimizer.learning_rate) == pytest.approx(float(one_device(step)), abs=1e-6), step


@pytest.mark.integration
def test_nan_loss_is_a_candidate_failure():
    with pytest.raises(CandidateFailed, match="NaN loss"):
        train_candidate(TINY, ProxyConfig(epochs=1, filters=4, learning_rate=1e30))


@pytest.mark.integration
def test_timeout_is_a_candidate_failure():
    with pytest.raises(CandidateFailed, match="timeout"):
        train_candidate(TINY, ProxyConfig(epochs=50, filters=4, timeout_s=0.5))


WORKER = """
import json
from searchspace import Block, NasNetGenotype, make_cell
from trainer.candidate import CandidateFailed, train_candidate
from core.proxy_config import ProxyConfig
tiny = NasNetGenotype(make_cell([Block((0, 1), ("sep_conv_3x3", "none"))]),
                      make_cell([Block((0, 1), ("max_pool_3x3", "none"))]))
other = NasNetGenotype(make_cell([Block((0, 1), ("avg_pool_3x3", "sep_conv_5x5"))]),
                       make_cell([Block((1, 0), ("sep_conv_3x3", "max_pool_3x3"))]))
fresh = train_candidate(tiny, ProxyConfig(epochs=1, filters=4, seed=3, threads=1))  # this process's first trial
train_candidate(other, ProxyConfig(epochs=1, filters=6, seed=4, threads=1))  # then another candidate
try:  # and one that timed out
    train_candidate(other, ProxyConfig(epochs=50, filters=4, seed=5, threads=1, timeout_s=0.5))
except CandidateFailed:
    pass
print(json.dumps([fresh, train_candidate(tiny, ProxyConfig(epochs=1, filters=4, seed=3, threads=1))]))
"""


@pytest.mark.integration
def test_a_warm_worker_gives_the_same_result_as_a_fresh_one():
    """A candidate trained in a worker that already ran others (one of them failed) gets exactly
    the metrics it got as the fresh worker's first trial: reusing workers changes no result."""
    measured = ("val_accuracy", "val_loss", "train_loss", "params")
    fresh, warm = ({k: v for k, v in metrics.items() if k in measured} for metrics in json.loads(subprocess.run(
        [sys.executable, "-c", WORKER], capture_output=True, text=True, check=True, cwd=REPO,
        env=QUIET_TF).stdout.splitlines()[-1]))
    assert warm == fresh and len(fresh) == len(measured)


def test_a_trial_stopped_between_rungs_goes_on_from_its_checkpoint(tmp_path):
    from trainer.rung_state import RungPlan

    first = []

    def driver_dies_after_rung_0(metrics):
        first.append(metrics)
        raise SystemExit(0)  # what Tune's report does to a trial it stops

    with pytest.raises(SystemExit):
        train_candidate(TINY, ProxyConfig(filters=4), RungPlan((1, 3), driver_dies_after_rung_0, 0, str(tmp_path)))
    assert os.listdir(tmp_path) == ["rung_0"] and first[0]["epochs"] == 1
    again = []
    final = train_candidate(TINY, ProxyConfig(filters=4), RungPlan((1, 3), again.append, 1, str(tmp_path)))
    assert [(m["rung"], m["restored_epochs"]) for m in again] == [(1, 1)] and final["epochs"] == 3
    assert final["val_accuracy"] > first[0]["val_accuracy"]  # it learned on from rung 0's weights
    assert os.listdir(tmp_path) == ["rung_1"]  # the older rung's state removed
    reported = []  # a rung finished before the driver heard of it is reported again, not retrained
    train_candidate(TINY, ProxyConfig(filters=4), RungPlan((1, 3), reported.append, 1, str(tmp_path)))
    assert reported == [{**again[0], "from_checkpoint": True}]


def _dense_family():
    """A model family of one's own for ChoiceSpace genotypes: a dense net `width` wide."""
    from trainer.models import ModelFamily

    def build(spec):
        inputs = keras.Input(spec.input_shape)
        hidden = keras.layers.Dense(spec.genotype["width"], activation="relu")(keras.layers.Flatten()(inputs))
        return keras.Model(inputs, keras.layers.Dense(spec.num_classes, dtype="float32")(hidden))

    return ModelFamily("a dense net of a chosen width (a test)", build=build, nasnet=False, space="choice")


def test_a_candidate_is_built_by_the_model_family_of_its_space(monkeypatch):
    from searchspace import ChoiceGenotype
    from trainer import models

    assert models.family_for_space("nasnet") == "genotype"
    with pytest.raises(ValueError, match=r"space 'choice': no entry of MODEL_FAMILIES .*\['convnet', 'nasnet', 'nasnet_macro'\]"):
        candidate_size(ChoiceGenotype({"width": 7}), ProxyConfig(), space="choice")
    nasnet = build_nasnet(TINY, (8, 8, 1), 10, NasNetConfig(3, 8, "cifar"))
    assert candidate_size(TINY, ProxyConfig())["params"] == sum(int(np.prod(w.shape)) for w in nasnet.trainable_weights)
    monkeypatch.setitem(models.MODEL_FAMILIES, "dense", _dense_family())
    size = candidate_size(ChoiceGenotype({"width": 7}), ProxyConfig(), space="choice")
    assert size["params"] == (64 * 7 + 7) + (7 * 10 + 10)  # 8x8x1 digits in, 10 classes out
