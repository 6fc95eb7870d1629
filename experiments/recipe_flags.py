"""The flags of a training recipe (every TrainConfig field but the model, data and model_dir), defined
once for `amoeba train` and `amoeba promote`, so a flag means the same in both. Defaults and choices
are TrainConfig's own. This module must not import TensorFlow.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from absl import app, flags

from core.proxy_config import PRECISIONS
from core.train_config import AUGMENTATIONS, OPTIMIZERS, SCHEDULES, TrainConfig

D = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
# Old spellings, still read (with a warning): the vocabulary of amoeba search is the one
DEPRECATED = {"reduction_size": "filters", "lr": "learning_rate"}


def define_recipe_flags(values: flags.FlagValues) -> None:
    F = {"flag_values": values}
    flags.DEFINE_integer("train_batch_size", D["train_batch_size"], "Global training batch size.", **F)
    flags.DEFINE_integer("eval_batch_size", D["eval_batch_size"], "Global evaluation batch size.", **F)
    flags.DEFINE_integer("train_steps", D["train_steps"], "Training steps (0: use num_epochs).", **F)
    flags.DEFINE_float("num_epochs", D["num_epochs"], "Training epochs, when train_steps is 0.", **F)
    flags.DEFINE_integer("steps_per_eval", D["steps_per_eval"], "Evaluate every this many steps (0: every "
                         "epochs_per_eval epochs, or at the end).", **F)
    flags.DEFINE_float("epochs_per_eval", D["epochs_per_eval"], "Evaluate every this many epochs, when "
                       "steps_per_eval is 0 (0: at the end only).", **F)
    flags.DEFINE_integer("image_size", D["image_size"], "Input image size.", **F)
    flags.DEFINE_integer("num_cells", D["num_cells"], "NASNet family: N, normal cells per stack (3 stacks), as in "
                         "amoeba search.", **F)
    flags.DEFINE_integer("filters", D["filters"], "NASNet family: F, filters of the first stack, as in amoeba "
                         "search.", **F)
    flags.DEFINE_float("learning_rate", D["learning_rate"], "Peak learning rate.", **F)
    flags.DEFINE_enum("lr_schedule", D["lr_schedule"], list(SCHEDULES), "Decay after warm-up.", **F)
    flags.DEFINE_float("lr_decay_value", D["lr_decay_value"], "Decay factor (exponential: per lr_decay_epochs; "
                       "piecewise: per boundary).", **F)
    flags.DEFINE_list("lr_decay_epochs", [f"{e:g}" for e in D["lr_decay_epochs"]], "Exponential: decay period "
                      "in epochs; piecewise: boundaries.", **F)
    flags.DEFINE_float("lr_warmup_epochs", D["lr_warmup_epochs"], "Linear warm-up epochs.", **F)
    flags.DEFINE_enum("optimizer", D["optimizer"], list(OPTIMIZERS), "Optimizer.", **F)
    flags.DEFINE_float("momentum", D["momentum"], "Momentum of rmsprop and momentum.", **F)
    flags.DEFINE_float("weight_decay", D["weight_decay"], "L2 weight decay (not on BN or biases).", **F)
    flags.DEFINE_float("label_smoothing", D["label_smoothing"], "Label smoothing.", **F)
    flags.DEFINE_enum("precision", D["precision"], list(PRECISIONS), "Compute precision: bfloat16 and "
                      "mixed_float16 compute in 16 bits and keep float32 weights.", **F)
    flags.DEFINE_integer("iterations_per_loop", D["iterations_per_loop"], "Steps per tf.function call "
                         "(steps_per_execution).", **F)
    flags.DEFINE_integer("save_checkpoints_steps", D["save_checkpoints_steps"], "Checkpoint every N steps (0: "
                         "every save_checkpoints_secs).", **F)
    flags.DEFINE_float("save_checkpoints_secs", D["save_checkpoints_secs"], "With save_checkpoints_steps 0: "
                       "checkpoint at the first loop end this long after the last (and always at evaluations "
                       "and the end).", **F)
    flags.DEFINE_string("tpu", D["tpu"], "TPU name: train with TPUStrategy.", **F)
    flags.DEFINE_float("dropout", D["dropout"], "Dropout before the classifier.", **F)
    flags.DEFINE_float("drop_path_keep_prob", D["drop_path_keep_prob"], "NASNet family: ScheduledDropPath final "
                       "keep probability.", **F)
    flags.DEFINE_float("aux_weight", D["aux_weight"], "NASNet family: auxiliary head loss weight (0: no head).",
                       **F)
    flags.DEFINE_enum("augmentation", D["augmentation"], list(AUGMENTATIONS), "inception: distorted crops "
                      "(ImageNet); cifar: pad-crop-flip of whole small images, evaluated uncropped.", **F)
    flags.DEFINE_integer("cutout", D["cutout"], "With --augmentation=cifar: side of the cutout square in "
                         "pixels (0: none).", **F)
    flags.DEFINE_integer("label_offset", D["label_offset"], "Subtracted from record labels (default: the data's "
                         "metadata.json; 1 for ImageNet TFRecords).", **F)
    flags.DEFINE_bool("cache", D["cache"], "Cache decoded data in memory (small data).", **F)
    flags.DEFINE_integer("seed", D["seed"], "Seed.", **F)
    flags.DEFINE_integer("reduction_size", None, "Deprecated: --filters.", **F)
    flags.DEFINE_float("lr", None, "Deprecated: --learning_rate.", **F)


def _apply_deprecated_spellings(values: flags.FlagValues, command: str) -> None:
    for old, new in DEPRECATED.items():
        if values[old].value is not None:
            print(f"amoeba {command}: --{old} is deprecated; use --{new}", file=sys.stderr)
            if values[new].present:
                raise app.UsageError(f"--{old} and --{new} are the same flag; give --{new} only")
            values[new].value = values[old].value


def recipe_from_flags(values: flags.FlagValues, command: str) -> dict[str, Any]:
    """The TrainConfig fields the recipe flags set."""
    _apply_deprecated_spellings(values, command)
    fields = {f.name for f in dataclasses.fields(TrainConfig)} - {"model", "data", "model_dir", "genotype"}
    recipe = {name: values[name].value for name in fields}
    recipe["lr_decay_epochs"] = tuple(float(e) for e in values.lr_decay_epochs)
    return recipe
