"""The flags of a training recipe (every TrainConfig field but the model, data and model_dir), defined
once for `amoeba train` and `amoeba promote` through experiments/settings.py, so a flag means the
same in both. Defaults and choices are TrainConfig's own; the names are `amoeba search`'s (--epochs,
--filters, --learning_rate), old spellings still read with a warning. This module must not import
TensorFlow.
"""

from __future__ import annotations

from typing import Any

from absl import flags

from experiments.settings import Setting, apply_deprecated, define_flags, flag_settings
from core.proxy_config import PRECISIONS
from core.train_config import AUGMENTATIONS, OPTIMIZERS, SCHEDULES, TTA_VIEWS, TrainConfig

NOT_RECIPE = ("model", "data", "model_dir", "genotype")  # each command's own
RENAME = {"num_epochs": "epochs"}  # the search's word for it
# Old spellings, still read (with a warning): the vocabulary of amoeba search is the one
DEPRECATED = {"reduction_size": "filters", "lr": "learning_rate", "num_epochs": "epochs"}
CHOICES = {"lr_schedule": SCHEDULES, "optimizer": OPTIMIZERS, "precision": list(PRECISIONS),
           "augmentation": AUGMENTATIONS, "eval_tta": TTA_VIEWS}
# TrainConfig (core/train_config.py) carries no help metadata yet: its fields' help text, here
HELP = {
    "train_batch_size": "Global training batch size.",
    "eval_batch_size": "Global evaluation batch size.",
    "train_steps": "Training steps (0: use --epochs).",
    "num_epochs": "Training epochs, when train_steps is 0.",
    "steps_per_eval": "Evaluate every this many steps (0: every epochs_per_eval epochs, or at the end).",
    "epochs_per_eval": "Evaluate every this many epochs, when steps_per_eval is 0 (0: at the end only).",
    "image_size": "Input image size.",
    "num_cells": "NASNet family: N, normal cells per stack (3 stacks), as in amoeba search.",
    "filters": "NASNet family: F, filters of the first stack, as in amoeba search.",
    "width_multiplier": "ResNet-9 and airbench94: every width times this (0.25: a quarter of the published widths).",
    "learning_rate": "Peak learning rate.",
    "lr_schedule": "Decay after warm-up (triangular: its own linear warm-up and warm-down, airbench's).",
    "lr_decay_value": "Decay factor (exponential: per lr_decay_epochs; piecewise: per boundary).",
    "lr_decay_epochs": "Exponential: decay period in epochs; piecewise: boundaries.",
    "lr_warmup_epochs": "Linear warm-up epochs.",
    "lr_start_factor": "Triangular: the first step's learning rate, times --learning_rate.",
    "lr_peak_at": "Triangular: the fraction of the training steps at which the rate peaks (linear up to it).",
    "lr_end_factor": "Triangular: the last step's learning rate, times --learning_rate (linear down to it).",
    "optimizer": "Optimizer.",
    "momentum": "Momentum of rmsprop and momentum.",
    "nesterov": "Nesterov momentum (with --optimizer=momentum).",
    "weight_decay": "L2 weight decay (not on BN or biases).",
    "label_smoothing": "Label smoothing: this share of each label spread over all classes (Keras's).",
    "ema_decay": "Keep a moving average of the weights with this decay (0.9999: AmoebaNet-D's); evaluations "
                 "and exports use it, training the raw weights (0: off).",
    "precision": "Compute precision: bfloat16 and mixed_float16 compute in 16 bits and keep float32 weights.",
    "iterations_per_loop": "Steps per tf.function call (steps_per_execution).",
    "save_checkpoints_steps": "Checkpoint every N steps (0: every save_checkpoints_secs).",
    "save_checkpoints_secs": "With save_checkpoints_steps 0: checkpoint at the first loop end this long after the "
                             "last (and always at evaluations and the end).",
    "tpu": "TPU name: train with TPUStrategy.",
    "dropout": "Dropout before the classifier.",
    "drop_path_keep_prob": "NASNet family: ScheduledDropPath final keep probability.",
    "aux_weight": "NASNet family: auxiliary head loss weight (0: no head).",
    "augmentation": "inception: distorted crops (ImageNet); cifar: pad-crop-flip of whole small images, evaluated "
                    "uncropped; airbench: 2-pixel reflect translation and alternating flip (airbench94's).",
    "bn_lr_factor": "The batch-norm offsets' (beta's) learning rate, times --learning_rate (airbench94: 64; with "
                    "--optimizer=momentum or sgd).",
    "bn_weight_decay": "L2 weight decay of the batch-norm offsets (--weight_decay skips them; airbench94: "
                       "its weight decay / 64).",
    "lookahead_every": "airbench's lookahead: every this many steps, the weights' running average (BN statistics "
                       "too) is updated and copied back into the model; the model ends as the average (0: off).",
    "lookahead_decay": "The lookahead average's decay at the last step; at step t of T it is this x (t/T)^3 "
                       "(airbench: 0.95^5).",
    "whiten_bias_epochs": "airbench94: the whitening conv's bias trains this many epochs, then stays (0: always "
                          "trains).",
    "bn_momentum": "Every batch-norm layer's moving-average momentum, Keras's convention (airbench94: 0.6); 0: "
                   "each model family's own.",
    "bn_epsilon": "Every batch-norm layer's epsilon (airbench94: 1e-12); 0: each model family's own.",
    "cutout": "With --augmentation=cifar or airbench: side of the cutout square in pixels (0: none).",
    "eval_tta": "Test-time augmentation: the logits of the image and its mirror (flip), and of both shifted "
                "1 pixel up-left and down-right (flip_translate, airbench's 6 views), averaged.",
    "label_offset": "Subtracted from record labels (default: the data's metadata.json; 1 for ImageNet TFRecords).",
    "cache": "Keep in memory what the model reads: the image_size pixels of each image (uint8), or for "
             "--augmentation=inception, whose random crops need the whole image, the encoded JPEGs (small data).",
    "validation_images": "Hold out this many of the training split's images (its first, in file order) and "
                         "evaluate them at each evaluation beside the evaluation split (val_top1): what amoeba "
                         "promote chooses the export and the race's target by, so the evaluation split is only "
                         "timed and reported (0: none; promote's default: sized to the data).",
    "seed": "Seed.",
}
_SETTINGS: dict[int, list[Setting]] = {}  # by id(FlagValues): each command's own


def define_recipe_flags(values: flags.FlagValues) -> None:
    _SETTINGS[id(values)] = define_flags(TrainConfig, values, skip=NOT_RECIPE, help=HELP, rename=RENAME,
                                         choices=CHOICES, deprecated=DEPRECATED,
                                         module_name=__name__)


def recipe_from_flags(values: flags.FlagValues, command: str) -> dict[str, Any]:
    """The TrainConfig fields the recipe flags set (an old spelling given: a warning, then its value)."""
    apply_deprecated(values, DEPRECATED, command)
    return flag_settings(_SETTINGS[id(values)], values)


def given_recipe(values: flags.FlagValues) -> set[str]:
    """The TrainConfig fields the command line or a flagfile set."""
    return {s.path[-1] for s in _SETTINGS[id(values)] if values[s.flag].present}
