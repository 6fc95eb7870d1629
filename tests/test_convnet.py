"""The convnet space (--space=convnet): genotypes, sampling and one mutation per child, its networks,
which hold airbench94 and ResNet-9 exactly, and the search, train and promote paths that take them."""

import collections
import dataclasses
import json
import random

import keras
import numpy as np
import pytest

from evolution.objectives import CURVE_KEY
from searchspace import CONVNET_REFERENCES, ConvNetGenotype, ConvNetSpace, Stage, convnet_space, genotype_from_json
from searchspace.convnet import AIRBENCH94, MUTATIONS, RESNET9


def test_a_convnet_genotype_round_trips_through_json_with_a_canonical_key():
    for genotype in CONVNET_REFERENCES.values():
        data = json.loads(json.dumps(genotype.to_json()))
        assert genotype_from_json(data) == genotype == ConvNetSpace().genotype_from_json(data)
        assert genotype_from_json(data).key() == genotype.key()
    assert AIRBENCH94.key() == ("convnet[stem=whiten2x2;act=gelu;stages=64c1r0.256c1r0.256c1r0;order=conv_pool_bn;"
                                "bn_scale=0;head=max/9]")
    assert "stem 3x3 conv of 64, relu; stages: 128 wide, 1 conv, residual of 2" in RESNET9.describe()


@pytest.mark.parametrize("change, message", [
    ({"stem": "conv5x5"}, "stem: unknown 'conv5x5'"),
    ({"stem_width": 24}, "stem_width: 0 with stem whiten2x2"),
    ({"activation": "tanh"}, "activation: unknown 'tanh'"),
    ({"stages": []}, "stages: one or more"),
    ({"stages": [{"width": 0, "convs": 0, "residual": 0}]}, "stage width: a whole number of 1 or more"),
    ({"stages": [{"width": 8, "convs": 0, "residual": 1}]}, "stage residual: unknown 1"),
    ({"stages": [{"width": 8, "depth": 1}]}, "stages: .*unexpected keyword argument 'depth'"),
    ({"bn_scale": 1}, "bn_scale: true or false"),
    ({"head_divisor": 0}, "head_divisor: a whole number of 1 or more"),
    ({"colour": "red"}, r"unknown fields \['colour'\]"),
])
def test_a_bad_convnet_genotype_names_its_field(change, message):
    with pytest.raises(ValueError, match=message):
        ConvNetGenotype.from_json({**AIRBENCH94.to_json(), **change})


def test_sampling_and_mutation_are_seeded_valid_and_change_one_thing():
    space = ConvNetSpace()
    assert [space.sample(random.Random(3)).key() for _ in range(2)] == [space.sample(random.Random(3)).key()] * 2
    rng, seen = random.Random(0), collections.Counter()
    parent = space.sample(rng)
    for _ in range(600):
        child, what = space.mutate(parent, rng)
        seen[what.split(" ")[0] if not what.startswith("stage ") else what.split(" ")[2]] += 1
        if what != "identity":
            assert child.key() != parent.key(), what
            assert space.genotype_from_json(child.to_json()) == child
        parent = child
    assert set(MUTATIONS) | {"identity"} == set(seen)  # every kind of mutation happens
    assert space.to_config()["name"] == "convnet" and ConvNetSpace.from_config(space.to_config()) == space


def test_a_space_with_some_mutations_changes_only_those_and_keeps_them_in_its_config():
    space = convnet_space(32, ("activation", "stem", "pool_order"))
    rng, parent = random.Random(0), AIRBENCH94
    for _ in range(200):
        child, what = space.mutate(parent, rng)
        assert what.split(" ")[0] in {"activation", "stem", "pool_order", "identity"}, what
        assert (child.stages, child.head_pool, child.head_divisor, child.bn_scale) == \
            (AIRBENCH94.stages, "max", 9, False)
        parent = child
    assert ConvNetSpace.from_config(space.to_config()) == space
    assert "mutations" not in convnet_space(32).to_config()  # journals of the default stay as they were
    with pytest.raises(ValueError, match="mutations: unknown 'op'"):
        convnet_space(32, ("op",))


def test_mutations_that_cannot_change_a_network_are_a_config_error_or_a_warning(caplog):
    with pytest.raises(ValueError, match=r"mutations: none of \['activation'\] can change"):
        ConvNetSpace(activations=("relu",), mutations=("activation",))
    with pytest.raises(ValueError, match=r"none of \['stem_width'\]"):
        ConvNetSpace(stems=("whiten2x2",), mutations=("stem_width",))
    space = dataclasses.replace(convnet_space(32, ("stem_width",)), identity_prob=0.0)
    with caplog.at_level("WARNING", logger="searchspace.convnet"):  # applies to a conv3x3 stem only
        assert space.mutate(AIRBENCH94, random.Random(1)) == (AIRBENCH94, "identity")
    assert "none of the mutations ['stem_width'] applies" in caplog.text


def test_the_space_for_small_images_takes_fewer_stages():
    assert convnet_space(32).stage_counts == (2, 3, 4)
    assert convnet_space(8).stage_counts == (2,)
    with pytest.raises(ValueError, match="images of 4 pixels are too small"):
        convnet_space(4)
    with pytest.raises(ValueError, match="stages: 3, more than this space's images take"):
        convnet_space(8).genotype_from_json(AIRBENCH94.to_json())
    rng = random.Random(0)
    assert all(len(convnet_space(8).sample(rng).stages) == 2 for _ in range(20))


@pytest.mark.parametrize("name, build", [("airbench94", "airbench"), ("airbench94_relu", "airbench_relu"),
                                         ("resnet9", "resnet9")])
def test_the_space_holds_airbench94_and_resnet9_exactly(name, build):
    from trainer.airbench import build_airbench
    from trainer.convnet import build_convnet
    from trainer.models import model_report
    from trainer.resnet import build_resnet9

    published = {"airbench": lambda: build_airbench((32, 32, 3), 10),
                 "airbench_relu": lambda: build_airbench((32, 32, 3), 10, activation="relu"),
                 "resnet9": lambda: build_resnet9((32, 32, 3), 10)}[build]()
    searched = build_convnet(CONVNET_REFERENCES[name], (32, 32, 3), 10)
    assert model_report(searched) == model_report(published)  # trainable parameters and multiply-adds
    assert searched.count_params() == published.count_params()  # the frozen whitening kernel too
    def kinds(model):  # each layer's kind, an activation by its function (ResNet-9's ReLU layers are relu)
        return [("relu" if type(layer).__name__ == "ReLU" else layer.get_config()["activation"])
                if isinstance(layer, (keras.layers.Activation, keras.layers.ReLU)) else type(layer).__name__
                for layer in model.layers]

    assert kinds(searched) == kinds(published)
    assert searched.get_layer("logits").scale == published.get_layer("logits").scale  # 1/9 and 1/8


def test_a_convnet_builds_at_a_width_and_refuses_images_too_small():
    from trainer.convnet import build_convnet

    narrow = ConvNetGenotype("conv3x3", 32, "leaky_relu", (Stage(48, 2, 2), Stage(16)), "conv_bn_pool", True,
                             "mean", 1)
    model = build_convnet(narrow, (8, 8, 3), 4, width_multiplier=0.5)
    assert model.get_layer("stem_conv").filters == 16 and model.get_layer("stage1_res2_conv").filters == 24
    assert tuple(model.output.shape) == (None, 4)
    with pytest.raises(ValueError, match="needs inputs of at least 9 pixels"):
        build_convnet(AIRBENCH94.__class__(**{**AIRBENCH94.__dict__, "stages": AIRBENCH94.stages[:2] + (Stage(8),)}),
                      (8, 8, 3), 10)


def test_a_convnet_trains_whitened_from_its_data_and_resumes(tmp_path):
    from core.train_config import TrainConfig, genotype_model
    from trainer.airbench import pixel_kernel, whitening_layer
    from trainer.fake_imagenet import write_fake_imagenet
    from trainer.train import Trainer, load_trainer

    data, model_dir = str(tmp_path / "data"), str(tmp_path / "m")
    write_fake_imagenet(data, num_train=16, num_eval=8, num_classes=2, image_size=12)
    genotype = ConvNetGenotype("whiten2x2", 0, "relu", (Stage(8, 1), Stage(8, 0, 2)), "conv_pool_bn")
    assert genotype_model(genotype) == "convnet"
    config = TrainConfig(model="convnet", genotype=genotype, data=data, model_dir=model_dir, train_steps=2,
                         image_size=12, train_batch_size=8, eval_batch_size=8, augmentation="airbench",
                         optimizer="momentum", learning_rate=0.1, iterations_per_loop=2)
    trainer = Trainer(config)
    kernel = whitening_layer(trainer.model).kernel.numpy()
    assert not np.allclose(kernel, pixel_kernel(3))  # whitened from the training images
    assert np.isfinite(trainer.train()["loss"])
    again = load_trainer(model_dir)  # train_config.json's genotype read back
    assert again.config.genotype == genotype
    np.testing.assert_array_equal(whitening_layer(again.model).kernel.numpy(), kernel)


def test_the_search_proxy_trains_a_whitened_convnet_on_digits(monkeypatch):
    from core.proxy_config import ProxyConfig
    from experiments.search.search_config import SearchConfig
    from trainer import candidate_network
    from trainer.airbench import pixel_kernel, whitening_layer
    from trainer.candidate import train_candidate

    space = SearchConfig(output_dir="unused", proxy_space="convnet").search_space()
    assert space.stage_counts == (2,)  # 8x8 digits: room for two pools after the whitening conv
    genotype = ConvNetGenotype("whiten2x2", 0, "relu", (Stage(16, 1), Stage(32)), "conv_pool_bn", head_divisor=8)
    built, original = [], candidate_network.build_model
    monkeypatch.setattr(candidate_network, "build_model", lambda spec: built.append(original(spec)) or built[-1])
    metrics = train_candidate(genotype, ProxyConfig(epochs=3), space="convnet")
    assert metrics["val_accuracy"] > 0.5 and metrics["params"] > 0
    assert not np.allclose(whitening_layer(built[0]).kernel.numpy(), pixel_kernel(1))  # whitened from the digits
    with pytest.raises(ValueError, match="ops: the ops of cells; the convnet space has none"):
        SearchConfig(output_dir="unused", proxy_space="convnet", ops=("none",)).search_space()


def test_the_calibrations_run_trains_to_its_end_evaluated_and_timed_as_a_candidate(monkeypatch):
    """Issue 52: the calibration's run (ProxyConfig.calibration) evaluates every --epochs_per_eval on
    the candidates' clock, from its pipeline built, and trains all its epochs: its curve's end is
    the time a candidate's limit is set from, its curve what scores the search's trial 0."""
    from core.proxy_config import ProxyConfig
    from trainer.candidate import train_candidate

    genotype = ConvNetGenotype("whiten2x2", 0, "relu", (Stage(16, 1), Stage(32)), "conv_pool_bn", head_divisor=8)
    for clock in ("training_and_evaluations", "steady"):
        metrics = train_candidate(genotype, ProxyConfig(epochs=3, epochs_per_eval=1.0, calibration=True,
                                                        target_clock=clock), space="convnet")
        curve = metrics[CURVE_KEY]
        assert len(curve) == metrics["evaluations"] == 3 and metrics["epochs"] == 3  # no stop at any accuracy
        assert curve[-1][1] == metrics["val_accuracy"] and "seconds_to_target" not in metrics
        assert 0 < curve[0][0] < curve[1][0] < curve[2][0]
        if clock == "training_and_evaluations":  # the training's seconds and its evaluations'
            assert metrics["train_seconds"] < curve[-1][0]


@pytest.mark.integration
def test_a_search_sized_to_its_data_calibrates_then_its_best_is_trained_by_amoeba_train(cifar_mini, tmp_path,
                                                                                        shared_ray):
    """The README's photo path on prepared JPEGs: --data and no --space, so the convnet space from
    airbench94 and the fast recipe, sized to the data (experiments/search/sizing.py), the target set by a
    calibration run that a rerun reads back; then its best net trained by amoeba train."""
    from evolution import resume
    from tests.conftest import amoeba_here

    _, data = cifar_mini
    out = str(tmp_path / "search")
    command = ["search", f"--output_dir={out}", f"--data={data}", "--image_size=16", "--validation_images=100",
               "--train_images=256", "--epochs=1", "--max_trials=3", "--population_size=2", "--sample_size=2",
               "--max_concurrent=1", "--trial_timeout_s=600",  # given: kept (a child's first step may be slow)
               "--screen_children=2"]  # the race (issue 55): each child of two drawn, screened by its timed step
    search = amoeba_here(*command)
    assert "3 trials done (0 failed)" in search.stdout, search.stdout + search.stderr
    calibration = resume(f"{out}/calibration/journal.jsonl", read_only=True)
    accuracy = calibration.outcomes[0].metrics["val_accuracy"]
    assert calibration.trials[0].genotype == AIRBENCH94 and len(calibration.trials) == 1
    assert f"calibration: airbench94 reached {accuracy:.4f} validation accuracy" in search.stdout
    proxy = json.load(open(f"{out}/search_config.json"))["proxy"]
    assert proxy["target_accuracy"] == round(0.95 * accuracy, 4) and proxy["epochs"] == 1  # given: kept
    assert proxy["timeout_s"] == 600 and proxy["target_seconds"] > 0
    timed = calibration.outcomes[0].metrics  # on the candidates' clock, with their evaluations (issue 52)
    assert proxy["target_seconds"] == round(1.5 * timed[CURVE_KEY][-1][0], 1) < 1.5 * timed["trial_seconds"]
    assert "trial 0 (airbench94) is the calibration's run" in search.stdout  # not trained twice
    assert (proxy["augmentation"], proxy["lookahead_every"], proxy["train_batch_size"]) == ("airbench", 5, 64)
    algorithm = resume(f"{out}/journal.jsonl", read_only=True)
    assert algorithm.trials[0].genotype == AIRBENCH94 and algorithm.space.to_config()["stage_counts"] == [2, 3]
    assert algorithm.objective == "seconds_to_target" and algorithm.outcomes[1].reused_from == 0
    assert algorithm.outcomes[0].metrics["seeded_from"] == "calibration"
    curve = algorithm.outcomes[0].metrics[CURVE_KEY]  # the trainer's key, via Tune to the journal
    assert curve[-1][1] == algorithm.outcomes[0].metrics["val_accuracy"]
    first = min(curve[0][1], proxy["target_accuracy"])  # the accuracy of its first evaluation
    lower = amoeba_here("results", out, f"--at_target={first!r}", "--format=json").stdout
    assert {r["trial_id"]: r["time_to_target_s"] for r in json.loads(lower)}[0] == pytest.approx(curve[0][0])
    assert all(isinstance(t.genotype, ConvNetGenotype) for t in algorithm.trials.values())
    children = [t for t in algorithm.trials.values() if t.parent_id is not None]  # the race, through Ray
    assert children and all(t.stops["stop_after_s"] > 0 for t in children)  # past the seed's hit x 1.1
    assert algorithm.screened_out >= 1 and all(algorithm.measured[t.genotype.key()]["screen_step_ms"] > 0
                                               for t in children)
    assert {algorithm.outcomes[t.trial_id].metrics["stop_reason"] for t in children} <= {
        "target", "past the incumbent", "predicted miss", "time limit", "epochs"}
    again = amoeba_here(*command)  # the same command resumes: the calibration is read back, not trained again
    assert "all 3 trials already done" in again.stdout, again.stdout + again.stderr
    assert len(resume(f"{out}/calibration/journal.jsonl", read_only=True).trials) == 1
    trained = amoeba_here("train", f"--model={out}", f"--data={data}", f"--model_dir={tmp_path / 'best'}",
                          "--image_size=16", "--train_steps=2", "--train_batch_size=32", "--eval_batch_size=100",
                          "--optimizer=momentum", "--augmentation=airbench", "--iterations_per_loop=2")
    assert "eval at step 2" in trained.stdout, trained.stdout + trained.stderr
    saved = json.load(open(tmp_path / "best" / "train_config.json"))
    assert saved["model"] == "convnet" and saved["genotype"]["space"] == "convnet"
