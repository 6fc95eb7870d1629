"""The weight-sharing supernet of the convnet space: its space (searchspace/supernet.py), its model
(trainer/supernet.py), its training and resume (trainer/supernet_training.py) and subnet scoring
(trainer/subnet_score.py), on random 16-pixel images and a two-stage frame."""

import dataclasses
import math
import os
import random
import shutil

import numpy as np
import pytest

from core.proxy_config import ProxyConfig
from experiments.search.search_config import SearchConfig
from searchspace.convnet import AIRBENCH94, ConvNetGenotype, Stage, at_width, convnet_space
from searchspace.supernet import frame_of, smallest_subnet, supernet_space

SEED = ConvNetGenotype("whiten2x2", 0, "relu", (Stage(24, 1), Stage(32, 0)), "conv_pool_bn", head_divisor=9)
SPACE = supernet_space(SEED, convnet_space(16))


def test_the_supernet_space_holds_the_seed_and_only_nets_within_its_widths():
    assert SPACE.genotype_from_json(SEED.to_json()) == SEED
    assert frame_of(SPACE) == dataclasses.replace(SEED, stages=(Stage(24, 2, 2), Stage(32, 2, 2)))
    assert smallest_subnet(SPACE).stages == (Stage(16, 0, 0), Stage(16, 0, 0))
    rng = random.Random(0)
    nets = [SPACE.sample(rng) for _ in range(40)]
    nets += [SPACE.mutate(net, rng)[0] for net in nets]
    assert all(n.stages[0].width <= 24 and n.stages[1].width <= 32 and len(n.stages) == 2 for n in nets)
    assert {(n.activation, n.stem, n.pool_order) for n in nets} == {("relu", "whiten2x2", "conv_pool_bn")}
    assert len({n.key() for n in nets}) > 20
    wider = dataclasses.replace(SEED, stages=(Stage(32, 1), Stage(32, 0)))
    with pytest.raises(ValueError, match="stage 0 width: 32, over this space's 24"):
        SPACE.genotype_from_json(wider.to_json())
    assert "max_stage_widths" not in convnet_space(32).to_config()  # a journal's space before it: unchanged
    assert type(SPACE).from_config(SPACE.to_config()) == SPACE
    narrow = supernet_space(at_width(AIRBENCH94, 0.25), convnet_space(32))  # its first stage: 16 wide only
    children = [narrow.mutate(at_width(AIRBENCH94, 0.25), rng)[0] for _ in range(200)]
    assert {c.stages[0].width for c in children} == {16} and len({c.key() for c in children}) > 10


def test_a_search_scores_subnets_only_of_the_convnet_space_and_without_training_of_its_own(tmp_path):
    config = SearchConfig(output_dir=str(tmp_path), proxy_space="convnet", evaluator="supernet",
                          initial=(at_width(AIRBENCH94, 0.5).to_json(),), proxy=ProxyConfig(image_size=16))
    assert config.search_space().max_stage_widths == (32, 128, 128)
    with pytest.raises(ValueError, match="convnet space's"):
        SearchConfig(output_dir=str(tmp_path), evaluator="supernet")
    with pytest.raises(ValueError, match="target_accuracy: a candidate's own training"):
        dataclasses.replace(config, proxy=ProxyConfig(image_size=16, target_accuracy=0.5, target_seconds=9))
    with pytest.raises(ValueError, match="mutations: a supernet's subnets differ only by"):
        dataclasses.replace(config, mutations=("activation", "width"))
    with pytest.raises(ValueError, match="ema_decay: the supernet trains in float32 without a weight average"):
        dataclasses.replace(config, proxy=ProxyConfig(image_size=16, ema_decay=0.99))
    relu = at_width(dataclasses.replace(AIRBENCH94, activation="relu"), 0.5)
    with pytest.raises(ValueError, match="initial\\[1\\]: not a subnet of the supernet initial\\[0\\] frames \\(its activation"):
        dataclasses.replace(config, initial=config.initial + (relu.to_json(),))
    with pytest.raises(ValueError, match="evaluator: train or supernet, got 'Supernet'"):
        dataclasses.replace(config, evaluator="Supernet")


@pytest.fixture(scope="module")
def tiny():
    from trainer.proxy_data import ArrayDataset

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 160).astype("int32")
    images = rng.integers(0, 256, (160, 16, 16, 3)).astype("uint8")
    images[..., 0] = np.where(labels[:, None, None] % 2, 255, 0)  # something to learn
    data = ArrayDataset(images[:128], labels[:128], images[128:], labels[128:], 4)
    proxy = ProxyConfig(image_size=16, epochs=2, train_batch_size=32, learning_rate=0.05, label_smoothing=0.2,
                        lookahead_every=2, bn_lr_factor=4.0, whiten_bias_epochs=1, weight_decay=1e-3)
    return data, proxy


def test_a_killed_training_resumes_from_its_last_epoch_to_the_same_weights(tiny, tmp_path, monkeypatch):
    from trainer import supernet_training
    data, proxy = tiny
    saves = []
    original = supernet_training.save_state

    def save_and_keep(parts, path, **facts):
        original(parts, path, **facts)
        if facts["epochs"] == 1:  # where a SIGKILL in epoch 2 leaves a run
            os.makedirs(tmp_path / "killed")
            shutil.copy(path, tmp_path / "killed" / supernet_training.CHECKPOINT)
        saves.append(facts["epochs"])

    monkeypatch.setattr(supernet_training, "save_state", save_and_keep)

    def train(folder: str) -> dict:  # 2 subnets a step: a trace half the default's, the same resume
        return supernet_training.train_supernet(SPACE, proxy, data, str(tmp_path / folder), sandwich=2)

    whole, resumed = train("whole"), train("killed")
    assert saves == [1, 2, 2] and whole["epochs"] == resumed["epochs"] == 2 and math.isfinite(whole["train_loss"])
    with np.load(tmp_path / "whole" / "checkpoint.npz") as a, np.load(tmp_path / "killed" / "checkpoint.npz") as b:
        assert a.files == b.files and len(a.files) > 50
        for name in a.files:
            if not name.startswith("fact/"):
                np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert train("whole") == whole  # done: read


def test_a_subnet_scores_as_its_stand_alone_net_with_the_inherited_weights(tiny, tmp_path):
    from trainer.subnet_score import SubnetScorer
    from trainer.supernet_training import train_supernet
    data, proxy = tiny
    proxy = dataclasses.replace(proxy, epochs=1, eval_tta="flip")
    with pytest.raises(ValueError, match="no trained supernet"):
        SubnetScorer(SPACE, proxy, data, str(tmp_path))
    train_supernet(SPACE, proxy, data, str(tmp_path), sandwich=2)  # 2 subnets a step: a smaller trace
    scorer = SubnetScorer(SPACE, proxy, data, str(tmp_path))
    images = scorer.recal_images[0][:32]
    for net in (SEED, smallest_subnet(SPACE), SPACE.sample(random.Random(3))):
        metrics = scorer.score(net)
        assert 0 <= metrics["val_accuracy"] <= 1 and metrics["latency_ms"] > 0 and metrics["params"] > 0
        assert metrics["evaluator"] == "supernet" and metrics["recal_images"] == 128
        stand_alone = scorer.subnet(net)  # recalibrated again: the same statistics
        np.testing.assert_allclose(stand_alone(images, training=False).numpy(),
                                   scorer.infer(images, _arch(net)).numpy(), rtol=1e-4, atol=1e-5)
    floats = dataclasses.replace(data, x_train=data.x_train.astype("float32") / 127.5 - 1,
                                 x_val=data.x_val.astype("float32") / 127.5 - 1)  # a float data set's, as digits'
    same = SubnetScorer(SPACE, proxy, floats, str(tmp_path))
    np.testing.assert_allclose(same.recal_images[0].numpy(), scorer.recal_images[0].numpy(), atol=1e-6)
    assert same.score(SEED)["val_accuracy"] == scorer.score(SEED)["val_accuracy"]
    slow = scorer.score(SEED, max_latency_ms=1e-6)
    assert math.isnan(slow["val_accuracy"]) and slow["latency_ms"] > 1e-6  # infeasible: not evaluated
    with pytest.raises(ValueError, match="is not a subnet of the supernet"):
        scorer.score(dataclasses.replace(SEED, activation="gelu"))


def _arch(net):
    from trainer.supernet import subnet_arch
    return subnet_arch(net, frame_of(SPACE))
