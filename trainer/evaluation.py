"""What an evaluation sees: the moving average of the weights in place of the raw ones, and the
test-time-augmented views of each image.

Averaged weights (`ema_decay` > 0): Keras's optimizer keeps the average (`use_ema`); for an
evaluation or an export `averaged_weights` copies it into the model (the optimizer's own
`finalize_variable_values`) and puts the raw weights back after, so training goes on from them and a
checkpoint holds both. Only trainable weights are averaged: BN's moving statistics are averages
already, of the raw weights' activations.

Test-time augmentation (`eval_tta`), airbench94's `infer` at its levels 0-2: `none`, one view;
`flip`, the mean of the logits of the image and its mirror; `flip_translate`, half that mean and a
quarter each of the same mean for the image shifted one pixel either way diagonally (reflect padding
of 1, cropped at the top-left and at the bottom-right corner): 6 views, their logits averaged (not
their probabilities). This module must not train.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Sequence

import keras
import tensorflow as tf

from core.train_config import TTA_VIEWS


def _mirrored_mean(logits_of: Callable[[tf.Tensor], tf.Tensor], images: tf.Tensor) -> tf.Tensor:
    """The mean of the float32 logits of `images` and of their left-right mirror."""
    plain = tf.cast(logits_of(images), tf.float32)
    return 0.5 * (plain + tf.cast(logits_of(tf.image.flip_left_right(images)), tf.float32))


def tta_logits(logits_of: Callable[[tf.Tensor], tf.Tensor], images: tf.Tensor, views: str) -> tf.Tensor:
    """The logits of a batch of NHWC `images` under the test-time augmentation `views` (float32)."""
    if views not in TTA_VIEWS:
        raise ValueError(f"eval_tta: unknown {views!r}; known: {list(TTA_VIEWS)}")
    if views == "none":
        return tf.cast(logits_of(images), tf.float32)
    mirrored = _mirrored_mean(logits_of, images)
    if views == "flip":
        return mirrored
    height, width = tf.shape(images)[1], tf.shape(images)[2]
    padded = tf.pad(images, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
    up_left = _mirrored_mean(logits_of, padded[:, :height, :width, :])
    down_right = _mirrored_mean(logits_of, padded[:, 2:height + 2, 2:width + 2, :])
    return 0.5 * mirrored + 0.25 * up_left + 0.25 * down_right


def _averaging_optimizer(optimizer: keras.optimizers.Optimizer) -> keras.optimizers.Optimizer | None:
    """The optimizer that keeps the moving average (inside a LossScaleOptimizer), or None."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    return inner if getattr(inner, "use_ema", False) else None


@contextlib.contextmanager
def averaged_weights(optimizer: keras.optimizers.Optimizer, variables: Sequence[keras.Variable]) -> Iterator[None]:
    """Inside, `variables` (those the optimizer was built with, in its order) hold the optimizer's
    moving averages; after, their raw values again. Without an average, or before the first step
    (Keras's averages are zeros until then): nothing changes."""
    averaging = _averaging_optimizer(optimizer)
    if averaging is None or int(averaging.iterations) == 0:
        yield
        return
    raw = [v.numpy() for v in variables]
    averaging.finalize_variable_values(variables)
    try:
        yield
    finally:
        for variable, value in zip(variables, raw):
            variable.assign(value)
