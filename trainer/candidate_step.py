"""The search proxy's traced steps (trainer/candidate_loop.py runs them): the training step, on the
fused optimizer (trainer/fused_optimizer.py) with the fast recipe's parts (trainer/fast_recipe.py),
and the evaluation step with its test-time augmentation (trainer/evaluation.py). This module must
not loop, read data or import Ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import keras
import tensorflow as tf

from trainer.evaluation import tta_logits
from trainer.fast_recipe import Lookahead, ParameterGroups, WeightAverage, per_example_loss
from trainer.fused_optimizer import DynamicLossScale, MomentumSGD


@dataclass
class StepRecipe:
    """The fast-recipe parts of the proxy's step (trainer/fast_recipe.py): label smoothing over
    `num_classes`, the BN offsets' rate and decay and the whitening bias's freeze (`groups`, at
    the candidate's step count `global_step`), lookahead (at the optimizer's step of the rung) and
    the moving average of the weights (`average`, after everything else)."""

    num_classes: int
    label_smoothing: float
    groups: ParameterGroups
    lookahead: Lookahead | None
    global_step: tf.Variable
    average: WeightAverage | None = None


def train_step_function(model: keras.Model, optimizer: MomentumSGD, precision: str, weight_decay: float = 0.0,
                        recipe: StepRecipe | None = None) -> Callable:
    """One traced training step (loss scaling under mixed_float16; with `weight_decay`, L2 on the
    kernels as `amoeba train` has it; the `recipe`'s parts); it returns the batch's loss (smoothed
    with label smoothing), the decay excluded."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    loss_scale = DynamicLossScale() if precision == "mixed_float16" else None
    kernels = [v for v in model.trainable_variables if len(v.shape) > 1]
    smoothing = recipe.label_smoothing if recipe else 0.0

    @tf.function(autograph=False)
    def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(x, training=True), tf.float32)
            if smoothing:
                loss = tf.reduce_mean(per_example_loss(y, logits, recipe.num_classes, smoothing))
            else:
                loss = loss_fn(y, logits)
            total = loss
            if weight_decay:
                total = loss + weight_decay * tf.add_n([tf.nn.l2_loss(tf.cast(v, tf.float32)) for v in kernels])
            if recipe:
                total += recipe.groups.decay_loss()
            scaled = total * loss_scale.scale if loss_scale else total
        grads = tape.gradient(scaled, model.trainable_variables)
        if recipe:
            grads = recipe.groups.scale_gradients(grads)
        if loss_scale:
            loss_scale.apply(grads, optimizer.apply)
        else:
            optimizer.apply(grads)
        if recipe:
            recipe.global_step.assign_add(1)
            recipe.groups.after_step(recipe.global_step)
            if recipe.lookahead is not None:
                recipe.lookahead.after_step(optimizer.iterations)
            recipe.groups.after_sync()
            if recipe.average is not None:
                recipe.average.after_step()
        return loss

    return train_step


def eval_step_function(infer: Callable[[tf.Tensor], tf.Tensor], views: str = "none") -> Callable:
    """(correct, summed loss) of a weighted evaluation batch, through the shared inference trace; the
    logits averaged over the test-time augmentation `views` (trainer/evaluation.py)."""
    def eval_step(x: tf.Tensor, y: tf.Tensor, w: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        logits = tta_logits(infer, x, views)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), y), tf.float32)
        losses = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
        return tf.reduce_sum(correct * w), tf.reduce_sum(losses * w)

    return eval_step
