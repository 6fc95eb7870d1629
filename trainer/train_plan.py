"""How long a full training run is and where it runs: the distribution strategy, the training
images it trains on (the training split less the validation images held out of it), its total steps
and the steps between evaluations, and whether a checkpoint's state lets a run resume. Must not
build models or read images.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import tensorflow as tf

from core.train_config import TrainConfig
from trainer.records import DataInfo


def make_strategy(tpu: str | None) -> tf.distribute.Strategy:
    if tpu:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    if tf.config.list_physical_devices("GPU"):
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def trained_split(info: DataInfo, config: TrainConfig) -> DataInfo:
    """`info` with num_train_images the images trained on: the training split less the validation
    images held out of it (its first, trainer/records.py); ValueError when that leaves none."""
    held = config.validation_images
    if held and held >= info.num_train_images:
        raise ValueError(f"validation_images: {held} of the {info.num_train_images} training images of "
                         f"{config.data} leave none to train on; hold out fewer")
    return dataclasses.replace(info, num_train_images=info.num_train_images - held)


def total_steps(config: TrainConfig, info: DataInfo) -> int:
    if config.train_steps > 0:
        return config.train_steps
    return math.ceil(config.num_epochs * info.num_train_images / config.train_batch_size)


def steps_per_eval(config: TrainConfig, info: DataInfo) -> int:
    """Steps between evaluations; 0: once, at the end."""
    if config.steps_per_eval > 0 or config.epochs_per_eval <= 0:
        return config.steps_per_eval
    return max(1, round(config.epochs_per_eval * info.num_train_images / config.train_batch_size))


def check_checkpoint_state(config: TrainConfig, saved: dict[str, Any]) -> None:
    """A checkpoint holds a weights' average only as its run kept one: refuse to resume training
    with --ema_decay or --lookahead_every turned on or off (a missing average would restart from
    zeros or the raw weights; an unused one would be silently dropped). Evaluating the raw
    weights of such a checkpoint (restore) stays allowed."""
    for name in ("ema_decay", "lookahead_every"):
        before, now = bool(saved.get(name, 0)), bool(getattr(config, name))
        if before != now:
            raise ValueError(f"{config.model_dir} was trained {'with' if before else 'without'} --{name}"
                             f"{'=' + str(saved[name]) if before else ''}: resume it "
                             f"{'with' if before else 'without'} it, or use a new --model_dir")


def next_multiple(step: int, every: int) -> int:
    return (step // every + 1) * every
