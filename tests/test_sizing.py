"""A search sized to its data (experiments/sizing.py, experiments/calibration.py): the rule gives
CIFAR-10's race proxy on CIFAR-10's counts, scales to small photo folders, and yields to every flag
given; the calibration's figures become the target, the limits and the length."""

from __future__ import annotations

import json
import os

import pytest

from experiments import sizing

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _flagfile(name: str) -> dict[str, str]:
    lines = open(os.path.join(REPO, "experiments", "configs", name)).read().splitlines()
    return dict(line[2:].split("=", 1) for line in lines if line.startswith("--") and "=" in line)


def test_on_cifar10s_counts_the_rule_gives_the_race_proxy_of_its_config():
    sized = sizing.proxy_settings(sizing.DataFacts(50_000, 10))
    race = _flagfile("search_cifar10_cpu_convnet.cfg")
    for name in ("validation_images", "train_images", "epochs", "train_batch_size", "learning_rate", "momentum",
                 "weight_decay", "bn_lr_factor", "bn_weight_decay", "label_smoothing", "lookahead_every",
                 "whiten_bias_epochs", "epochs_per_eval", "image_size"):
        assert float(sized[name]) == float(race[name]), name
    for name in ("lr_schedule", "augmentation", "eval_tta"):
        assert sized[name] == race[name], name


@pytest.mark.parametrize("images, classes, held, train, epochs, batch", [
    (4_300, 5, 430, 3_870, 21, 256),  # a folder of photos: more epochs of fewer images
    (1_000, 10, 200, 800, 30, 64),  # 20 per class held out; 10 steps an epoch; 30 epochs at most
    (200_000, 100, 2_000, 10_000, 8, 256),
])
def test_the_rule_scales_with_the_images_and_classes(images, classes, held, train, epochs, batch):
    sized = sizing.proxy_settings(sizing.DataFacts(images, classes))
    assert (sized["validation_images"], sized["train_images"], sized["epochs"], sized["train_batch_size"]) == (
        held, train, epochs, batch)
    assert sized["learning_rate"] == pytest.approx(0.375 * batch / 256)
    assert sized["whiten_bias_epochs"] == pytest.approx(3 * epochs / 8, abs=0.01)


def test_too_few_images_and_a_dir_without_metadata_are_errors_naming_them(tmp_path):
    with pytest.raises(ValueError, match="30 training images of 2 classes are too few"):
        sizing.proxy_settings(sizing.DataFacts(30, 2))
    with pytest.raises(ValueError, match=f"{tmp_path}: no metadata.json"):
        sizing.DataFacts.read(str(tmp_path))
    (tmp_path / "metadata.json").write_text(json.dumps({"num_train_images": 10}))
    with pytest.raises(ValueError, match="metadata.json: no usable num_train_images and num_label_classes"):
        sizing.DataFacts.read(str(tmp_path))


def test_the_calibration_sets_the_target_limits_and_length_but_not_what_was_given():
    from experiments.calibration import _apply, calibration_config, calibration_line
    from experiments.search_config import SearchConfig
    from core.proxy_config import ProxyConfig

    assert sizing.calibrated(0.8, 230.0) == {"target_accuracy": 0.76, "target_seconds": 345.0, "timeout_s": 690.0,
                                             "max_trials": 6}
    assert sizing.calibrated(0.5, 10.0)["max_trials"] == 60 and sizing.calibrated(0.5, 1e4)["max_trials"] == 6
    with pytest.raises(ValueError, match="calibration: an accuracy in"):
        sizing.calibrated(0.0, 10.0)
    config = SearchConfig(output_dir="/tmp/s", proxy_space="convnet", max_trials=30,
                          proxy=ProxyConfig(image_size=32, epochs=2, timeout_s=900.0))
    sized = _apply(config, sizing.calibrated(0.8, 230.0), given={("max_trials",)})
    assert (sized.proxy.target_accuracy, sized.proxy.target_seconds, sized.proxy.timeout_s, sized.max_trials) == (
        0.76, 345.0, 690.0, 30)
    assert (sized.objective, sized.mode) == ("seconds_to_target", "min")  # the target makes the objective
    probe = calibration_config(sized)  # the seed, once, to the end of its epochs, beside the search
    assert (probe.output_dir, probe.max_trials, probe.objective, probe.proxy.target_accuracy) == (
        "/tmp/s/calibration", 1, "val_accuracy", 0.0)
    assert probe.initial[0]["activation"] == "gelu" and probe.proxy.epochs == 2
    assert calibration_line(0.8, 230.0, sized) == (
        "calibration: airbench94 reached 0.8000 validation accuracy in 230 s on this data; candidates race to "
        "0.7600 (at most 345 s each); 30 trials, about 115 min at that pace")


def test_data_without_a_space_is_sized_and_every_flag_given_wins(cifar_mini, tmp_path):
    from absl import flags

    from experiments.commands.search import config_from_flags, define_search_flags

    def config(*given: str):
        values = flags.FlagValues()
        settings = define_search_flags(values)
        values(["amoeba", f"--output_dir={tmp_path}", f"--data={cifar_mini[1]}", *given])
        return config_from_flags(values, settings)

    sized = config("--epochs=2")
    assert (sized.proxy_space, sized.repeats, sized.population_size, sized.sample_size, sized.max_concurrent) == (
        "convnet", "reuse", 6, 3, 1)  # one trial at a time: times compare only alone
    assert [g["stem"] for g in sized.initial] == ["whiten2x2"] * 6  # airbench94 fills the first population
    assert (sized.proxy.validation_images, sized.proxy.train_images, sized.proxy.train_batch_size) == (200, 800, 64)
    assert (sized.proxy.epochs, sized.proxy.augmentation, sized.proxy.lookahead_every) == (2, "airbench", 5)
    assert sized.sized_to_data and not config("--space=convnet").sized_to_data
    plain = config("--space=nasnet")  # a space given: today's defaults
    assert (plain.proxy_space, plain.proxy.epochs, plain.proxy.augmentation, plain.initial) == ("nasnet", 4, "cifar", ())
    (tmp_path / "search_config.json").write_text("{}")  # a search saved there before the rule: resumed as made
    assert config().proxy_space == "nasnet"


def test_a_promote_of_a_sized_search_races_the_fast_baselines_under_airbench94s_recipe_sized_too(tmp_path):
    from experiments.commands import promote as command

    _, recipe = sizing.promote_settings(sizing.DataFacts(50_000, 10))
    airbench = _flagfile("airbench94_cifar10.cfg")
    for name, value in recipe.items():  # on CIFAR-10's counts: airbench94's own recipe
        flag = {"num_epochs": "epochs"}.get(name, name)
        if flag not in airbench:  # --nesterov and --cache, flags without a value; one evaluation an epoch
            assert value is True or (flag == "epochs_per_eval" and value == 1.0), name
        elif isinstance(value, str):
            assert value == airbench[flag], name
        else:
            assert float(value) == float(airbench[flag]), name
    search, data = tmp_path / "search", tmp_path / "data"
    for folder, name, content in [(search, "search_config.json", {"sized_to_data": True}),
                                  (data, "metadata.json", {"num_train_images": 3_870, "num_label_classes": 5})]:
        folder.mkdir()
        (folder / name).write_text(json.dumps(content))
    assert command.sized_searches((str(search),)) and not command.sized_searches((str(tmp_path),))
    try:
        command.FLAGS(["amoeba", f"--data={data}", f"--output_dir={tmp_path / 'p'}", f"--search_dir={search}",
                       "--top_k=1", "--learning_rate=0.05"])
        fields = {"data": str(data), "baselines": (), "top_k": 1}
        recipe = {"learning_rate": 0.05}
        command._size(fields, recipe)
    finally:
        command.FLAGS.unparse_flags()
    assert fields == {"data": str(data), "baselines": sizing.BASELINES, "top_k": 1, "max_concurrent": 1}  # --top_k kept
    assert (recipe["num_epochs"], recipe["train_batch_size"], recipe["learning_rate"]) == (25.8, 128, 0.05)
    assert recipe["epochs_per_eval"] == pytest.approx(2.61) and recipe["augmentation"] == "airbench"
