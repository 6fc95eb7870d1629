"""A search sized to its data (experiments/search/sizing.py, experiments/search/calibration.py): the rule gives
CIFAR-10's race proxy on CIFAR-10's counts, scales to small photo folders, and yields to every flag
given; the calibration's figures become the target, the limits and the length."""

from __future__ import annotations

import json
import os

import pytest

from experiments.search import sizing

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


def _built(facts: sizing.DataFacts):
    """The proxy a search sized to `facts` builds, and its split of the training images (the
    split's ValueError when the proxy cannot be fed), as the search driver checks it."""
    from core.proxy_config import ProxyConfig, plan_split

    proxy = ProxyConfig(dataset="prepared", data="/unused", **sizing.proxy_settings(facts))
    return proxy, plan_split(proxy, facts.train_images)


@pytest.mark.parametrize("images, classes, sized", [
    (1, 1, None),  # the smallest dir `amoeba prepare` writes: nothing to hold out and train on (refused)
    (2, 1, (1, 1, 1)), (2, 2, (1, 1, 1)), (3, 3, (1, 2, 2)),  # the smallest a search can be fed
    (10, 2, (2, 8, 8)), (50, 2, (10, 40, 16)),  # once 10 to train on after 40 held out, under batch 16
    (300, 10, (60, 240, 16)),  # once 200 of 300 held out
    (1_000, 100, (200, 800, 64)), (3_870, 5, (387, 3_483, 256)),  # photos
    (50_000, 10, (2_000, 10_000, 256)), (1_000_000, 1_000, (2_000, 10_000, 256)),
])
def test_every_dir_prepare_writes_gets_a_proxy_that_can_be_fed_or_is_refused_at_once(images, classes, sized):
    facts = sizing.DataFacts(images, classes)
    if sized is None:
        with pytest.raises(ValueError, match="data/tiny: 1 training image.* too few to search.* at least 2"):
            sizing.proxy_settings(sizing.DataFacts(images, classes, source="data/tiny"))
    else:
        proxy, plan = _built(facts)
        assert (plan.num_validation, plan.num_train, proxy.train_batch_size) == sized
        assert plan.num_validation <= max(1, images // 5) and plan.num_train // proxy.train_batch_size >= 1
        assert proxy.learning_rate == pytest.approx(0.375 * proxy.train_batch_size / 256)
    _, recipe = sizing.promote_settings(facts)  # the promote trains on all but its own hold-out: a batch it fills
    trained = images - sizing.promote_held_out(facts)
    assert 1 <= recipe["train_batch_size"] <= trained and sizing.promote_held_out(facts) < images
    assert recipe["learning_rate"] == pytest.approx(1.5 * recipe["train_batch_size"] / 1024)
    if trained >= 1_280:  # 20 steps an epoch at the floor of 64
        assert recipe["train_batch_size"] >= 64 and trained // recipe["train_batch_size"] >= 20


def test_cifar10s_counts_stay_the_race_proxy_and_promote():  # as before the rule fed tiny dirs
    proxy, plan = _built(sizing.DataFacts(50_000, 10))
    assert (proxy.validation_images, proxy.train_images, proxy.train_batch_size, proxy.epochs) == (2_000, 10_000,
                                                                                                    256, 8)
    _, recipe = sizing.promote_settings(sizing.DataFacts(50_000, 10))
    assert (recipe["num_epochs"], recipe["train_batch_size"]) == (9.9, 1024)


def test_a_tiny_dir_is_searched_as_the_command_sizes_it_or_refused_naming_it(tmp_path):
    """`amoeba search --data=DIR` with no space, on 50 photos of 2 classes: the proxy the command
    builds passes the driver's check; on a dir of one image, the command refuses, naming it."""
    from absl import flags

    from core.proxy_config import check_proxy
    from experiments.commands.search import config_from_flags, define_search_flags

    def config(data: str):
        values = flags.FlagValues()
        settings = define_search_flags(values)
        values(["amoeba", f"--output_dir={tmp_path / 'search'}", f"--data={data}"])
        return config_from_flags(values, settings)

    for name, images in (("fifty", 50), ("one", 1)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metadata.json").write_text(json.dumps({"num_train_images": images,
                                                                  "num_label_classes": min(2, images)}))
    plan = check_proxy(config(str(tmp_path / "fifty")).proxy)
    assert (plan.num_validation, plan.num_train) == (10, 40)
    with pytest.raises(ValueError, match=f"{tmp_path / 'one'}: 1 training image.* at least 2"):
        config(str(tmp_path / "one"))


def test_the_promotes_length_is_estimated_at_the_calibrations_pace():
    pace = 230.0 / 80_000  # CIFAR-10's calibration: 8 epochs of 10,000 images in 230 s
    assert sizing.promote_line(sizing.DataFacts(1_000_000, 10), pace) == (
        "amoeba promote afterwards (not in the search's time): 6 models x 9.9 epochs of 998,000 images, about "
        "2.0 days at that pace, one model at a time (its --epochs or fewer --baselines shorten it)")
    assert "9.9 epochs of 48,000 images, about 2.3 h" in sizing.promote_line(sizing.DataFacts(50_000, 10), pace)
    assert "28.7 epochs of 3,483 images, about 29 min" in sizing.promote_line(sizing.DataFacts(3_870, 5), pace)
    assert sizing.promote_seconds(sizing.DataFacts(1_000_000, 10), pace) == pytest.approx(6 * 9.9 * 998_000 * pace)


def test_a_dir_without_metadata_is_an_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path}: no metadata.json"):
        sizing.DataFacts.read(str(tmp_path))
    (tmp_path / "metadata.json").write_text(json.dumps({"num_train_images": 10}))
    with pytest.raises(ValueError, match="metadata.json: no usable num_train_images and num_label_classes"):
        sizing.DataFacts.read(str(tmp_path))


def test_the_calibration_sets_the_target_limits_and_length_but_not_what_was_given():
    from experiments.search.calibration import _apply, calibration_config, calibration_line
    from experiments.search.search_config import SearchConfig
    from core.proxy_config import ProxyConfig

    assert sizing.calibrated(0.8, 230.0) == {"target_accuracy": 0.76, "target_seconds": 345.0, "timeout_s": 690.0,
                                             "max_trials": 60, "time_budget_s": 1270.0}  # issue 55: by the time
    assert sizing.calibrated(0.5, 1e4)["time_budget_s"] == 1e4  # at least the calibration's own trial
    with pytest.raises(ValueError, match="calibration: an accuracy in"):
        sizing.calibrated(0.0, 10.0)
    config = SearchConfig(output_dir="/tmp/s", proxy_space="convnet", max_trials=30,
                          proxy=ProxyConfig(image_size=32, epochs=2, timeout_s=900.0))
    sized = _apply(config, sizing.calibrated(0.8, 230.0), given={("max_trials",), ("time_budget_s",)})
    assert (sized.proxy.target_accuracy, sized.proxy.target_seconds, sized.proxy.timeout_s, sized.max_trials) == (
        0.76, 345.0, 690.0, 30)
    assert (sized.objective, sized.mode) == ("seconds_to_target", "min")  # the target makes the objective
    probe = calibration_config(sized)  # the seed, once, to the end of its epochs, beside the search
    assert (probe.output_dir, probe.max_trials, probe.objective, probe.proxy.target_accuracy) == (
        "/tmp/s/calibration", 1, "val_accuracy", 0.0)
    assert probe.initial[0]["activation"] == "gelu" and probe.proxy.epochs == 2
    assert calibration_line(0.8, 230.0, sized) == (
        "calibration: airbench94 reached 0.8000 validation accuracy in 230 s on this data; candidates race to "
        "0.7600 (at most 345 s each); up to 30 trials, about 115 min at that pace")


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
    assert (recipe["num_epochs"], recipe["train_batch_size"], recipe["learning_rate"]) == (28.7, 128, 0.05)
    assert recipe["epochs_per_eval"] == pytest.approx(2.9) and recipe["augmentation"] == "airbench"
