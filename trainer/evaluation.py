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
their probabilities).

Per-image correctness: each evaluation step also gives, per row, whether its top-1 was right (-1
for the zero-weight padding rows; `per_image_correct`), gathered across replicas in the batch's
order; `score` sums a split's batches and keeps the real images' right and wrong in the split's
fixed order, which the final evaluation writes to `model_dir/eval_correct.json`
(core/correct_images.py) for a paired test between models. This module must not train.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterable, Iterator, Sequence

import keras
import numpy as np
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


def top1_right(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """bool per row: the argmax of `logits` is `labels`, ties going to the first class, as an
    exported file's prediction and the search's evaluation count it (tf.math.in_top_k counts a tie
    as right for every tied class: a net with equal logits scored above what its export serves)."""
    return tf.equal(tf.argmax(tf.cast(logits, tf.float32), -1, output_type=tf.int32), tf.cast(labels, tf.int32))


def per_image_correct(labels: tf.Tensor, logits: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    """int32 per row of a batch (a type every strategy's gather takes): 1 where the top-1 is
    `labels`, 0 where not, -1 for a padding row (weight 0), dropped once the batches are joined."""
    right = tf.cast(top1_right(labels, logits), tf.int32)
    return tf.where(weights > 0, right, tf.constant(-1, tf.int32))


def score(batches: Iterable, eval_batch: Callable) -> tuple[tuple[float, ...], np.ndarray]:
    """((loss, top-1, top-5, images) summed over a split's `batches`, each image right or wrong in
    their order): `eval_batch` gives each batch's sums and its per_image_correct. The flags stay on
    the device until the end: one transfer a split, not one a batch."""
    totals, flags = tf.zeros(4), []
    for batch in batches:
        sums, correct = eval_batch(batch)
        totals += sums
        flags.append(correct)
    rows = tf.concat(flags, 0).numpy() if flags else np.zeros(0, np.int32)
    return tuple(float(t) for t in totals), rows[rows >= 0].astype(bool)


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
