"""TrainConfig without TensorFlow: flag defaults from it, and old model_dirs read in today's terms."""

import subprocess
import sys

import pytest

from core.train_config import TrainConfig, config_from_saved
from experiments.commands import train as train_command
from tests.conftest import REPO


def test_the_train_command_takes_its_defaults_from_the_config():
    defaults = TrainConfig(model="resnet18", data="d", model_dir="m", train_steps=1)
    for name in ("num_cells", "filters", "learning_rate", "optimizer", "lr_schedule", "precision", "image_size"):
        assert train_command.FLAGS[name].default == getattr(defaults, name), name
    probe = "import sys, experiments.commands.train; print('tensorflow' in sys.modules, 'keras' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.split() == ["False", "False"]  # `amoeba train --help` needs no TensorFlow


def test_a_train_config_json_written_before_the_one_vocabulary_still_loads():
    old = {"model": "amoebanet_d", "data": "d", "model_dir": "m", "num_cells": 6, "reduction_size": 128,
           "lr": 2.56, "lr_decay_epochs": [1.0], "num_epochs": 35.0, "genotype": None, "total_steps": 9}
    config = config_from_saved(old, model_dir="elsewhere")
    assert (config.num_cells, config.filters, config.learning_rate) == (2, 128, 2.56)  # 6 in all = 2 per stack
    assert config.model_dir == "elsewhere"
    assert config_from_saved(config.to_json()) == config


def test_train_and_promote_share_the_recipe_flags():
    from experiments.commands import promote as promote_command

    recipe = [name for name in train_command.FLAGS if name not in ("model", "data", "model_dir", "export_dir")]
    for name in recipe:
        assert promote_command.FLAGS[name].default == train_command.FLAGS[name].default, name
        assert promote_command.FLAGS[name].help == train_command.FLAGS[name].help, name


def test_augmentation_and_evaluation_period():
    import pytest

    from trainer.records import DataInfo
    from trainer.train import steps_per_eval

    with pytest.raises(ValueError, match="cutout: only with augmentation 'cifar'"):
        TrainConfig(model="resnet20", data="d", model_dir="m", train_steps=1, cutout=16)
    info = DataInfo(50_000, 10_000, 10, tuple("abcdefghij"), 0)
    config = TrainConfig(model="resnet20", data="d", model_dir="m", train_steps=1, train_batch_size=128,
                         augmentation="cifar", epochs_per_eval=1.0)
    assert steps_per_eval(config, info) == 391 and not config.center_crop
    assert steps_per_eval(TrainConfig(**{**config.__dict__, "steps_per_eval": 5}), info) == 5



def test_the_fast_recipe_fields_default_to_todays_recipe_and_refuse_what_they_cannot_do():
    import pytest

    plain = TrainConfig(model="resnet20", data="d", model_dir="m", train_steps=1)
    assert (plain.label_smoothing, plain.nesterov, plain.ema_decay, plain.eval_tta) == (0.0, False, 0.0, "none")
    assert (plain.lr_start_factor, plain.lr_peak_at, plain.lr_end_factor) == (0.2, 0.23, 0.07)  # airbench's
    assert (plain.bn_momentum, plain.bn_epsilon) == (0.0, 0.0)  # each family's own
    for flag in ("nesterov", "ema_decay", "eval_tta", "lr_start_factor", "lr_peak_at", "lr_end_factor",
                 "bn_momentum", "bn_epsilon"):
        assert train_command.FLAGS[flag].default == getattr(plain, flag), flag
    assert train_command.FLAGS["eval_tta"].parser.enum_values == ["none", "flip", "flip_translate"]
    assert "triangular" in train_command.FLAGS["lr_schedule"].parser.enum_values
    bad = {"nesterov": ({"nesterov": True, "optimizer": "rmsprop"}, "nesterov: only with optimizer 'momentum'"),
           "ema_decay": ({"ema_decay": 1.0}, r"ema_decay: in \[0, 1\)"),
           "eval_tta": ({"eval_tta": "flip_crop"}, "eval_tta: unknown 'flip_crop'"),
           "label_smoothing": ({"label_smoothing": 1.5}, r"label_smoothing: in \[0, 1\)"),
           "lr_peak_at": ({"lr_schedule": "triangular", "lr_peak_at": 1.5}, r"lr_peak_at: in \[0, 1\]"),
           "lr_start_factor": ({"lr_schedule": "triangular", "lr_start_factor": -0.1}, "lr_start_factor: 0 or more"),
           "bn_momentum": ({"bn_momentum": 1.0}, r"bn_momentum: in \[0, 1\)"),
           "bn_epsilon": ({"bn_epsilon": -1e-3}, "bn_epsilon: 0 or more"),
           "warm-up": ({"lr_schedule": "triangular", "lr_warmup_epochs": 1.0}, "triangular: its own warm-up")}
    for name, (changes, message) in bad.items():
        with pytest.raises(ValueError, match=message):
            TrainConfig(**{**plain.__dict__, **changes})
    TrainConfig(**{**plain.__dict__, "nesterov": True, "optimizer": "momentum", "ema_decay": 0.9999,
                   "eval_tta": "flip_translate", "lr_schedule": "triangular"})


def test_a_recipe_at_other_epochs_scales_what_it_measures_in_epochs():
    from core.train_config import at_epochs

    recipe = {"num_epochs": 90.0, "lr_schedule": "piecewise", "lr_decay_epochs": (30.0, 60.0, 80.0),
              "lr_warmup_epochs": 5.0, "whiten_bias_epochs": 0.04, "epochs_per_eval": 9.0}
    assert at_epochs(recipe, 9.0) == {"num_epochs": 9.0, "train_steps": 0, "lr_decay_epochs": (3.0, 6.0, 8.0),
                                      "lr_warmup_epochs": 0.5, "whiten_bias_epochs": 0.01, "epochs_per_eval": 0.9}
    by_steps = at_epochs({"train_steps": 600, "lr_warmup_epochs": 5.0, "lr_decay_epochs": (2.4,)}, 2.0)
    assert by_steps == {"num_epochs": 2.0, "train_steps": 0, "lr_warmup_epochs": 2.0}  # capped; decay kept
    with pytest.raises(ValueError, match="epochs: a positive number of epochs, got 0"):
        at_epochs(recipe, 0.0)
