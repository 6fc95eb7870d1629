"""The search proxy's training update, one fused TensorFlow op per variable: SGD with Nesterov
momentum (`MomentumSGD`), mixed_float16's dynamic loss scaling (`DynamicLossScale`) and a cosine
learning rate that restarts at each rung (`RestartingCosine`, or airbench's triangle,
`RestartingTriangle`). The optimizer's variables exist
before the step is traced (a step that creates variables is traced twice; benchmarks/first_step.py).

This module must not build models, read data or run a training loop.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf


class MomentumSGD:
    """SGD with Nesterov momentum (or plain, nesterov=False) and a learning-rate schedule, Keras's
    update rule (m = momentum * m - lr * g; w += momentum * m - lr * g), one ResourceApplyKerasMomentum op per
    variable. Keras's own optimizer, applied inside a tf.function, kept each trial's whole step graph
    alive after the model was gone (about 130 MB per trial in a warm worker) and traces slower."""

    def __init__(self, variables: list, schedule, momentum: float, nesterov: bool = True) -> None:
        self.variables = [v.value if isinstance(v, keras.Variable) else v for v in variables]
        self.nesterov = bool(nesterov)
        self.accumulators = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.variables]
        self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False)  # steps of this schedule
        self.schedule = schedule
        self.momentum = tf.constant(momentum, tf.float32)

    def apply(self, grads: list) -> None:
        """Inside the training step: one update of every variable, then the step count."""
        lr = tf.cast(self.schedule(self.iterations), tf.float32)
        for var, accumulator, grad in zip(self.variables, self.accumulators, grads):
            tf.raw_ops.ResourceApplyKerasMomentum(var=var.handle, accum=accumulator.handle, lr=lr, grad=grad,
                                                  momentum=self.momentum, use_nesterov=self.nesterov)
        self.iterations.assign_add(1)


class DynamicLossScale:
    """mixed_float16's loss scaling, Keras's LossScaleOptimizer rule for the fused update: the loss
    is multiplied by `scale` before the gradient and the gradients divided after; a step with a
    non-finite gradient is skipped and halves the scale, 2,000 good steps in a row double it."""

    def __init__(self) -> None:
        self.scale = tf.Variable(2.0**15, trainable=False)
        self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False)

    def apply(self, scaled_grads: list, update) -> None:
        """Inside the training step: `update(grads)` with the unscaled gradients, if all finite."""
        grads = [g / self.scale for g in scaled_grads]
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])

        def good() -> tf.Tensor:
            update(grads)
            grow = self.good_steps >= 1999
            self.scale.assign(tf.where(grow, self.scale * 2.0, self.scale))
            self.good_steps.assign(tf.where(grow, tf.constant(0, tf.int64), self.good_steps + 1))
            return tf.constant(True)

        def skip() -> tf.Tensor:
            self.scale.assign(tf.maximum(self.scale / 2.0, 1.0))
            self.good_steps.assign(0)
            return tf.constant(False)

        tf.cond(finite, good, skip)


class RestartingCosine:
    """A linear warm-up from 0 over `warmup` steps (with `hold`, `peak` for the first `hold` steps),
    then cosine decay to 0 at `steps`; `steps` changeable between rungs (and after a --train_seconds
    calibration) without a retrace."""

    def __init__(self, peak: float, steps: int, hold: int = 0, warmup: float = 0.0) -> None:
        self.peak = peak
        self.steps = tf.Variable(float(steps), trainable=False)
        self.warmup = float(warmup)
        self.hold = max(float(hold), self.warmup)

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        step = tf.cast(step, tf.float32)
        decayed = tf.maximum(step - self.hold, 0.0)
        progress = tf.minimum(decayed, self.steps - self.hold) / tf.maximum(self.steps - self.hold, 1.0)
        cosine = self.peak * 0.5 * (1.0 + tf.cos(math.pi * progress))
        if not self.warmup:
            return cosine
        return tf.where(step < self.warmup, self.peak * step / self.warmup, cosine)


class RestartingTriangle:
    """airbench's triangle (trainer/schedules.py's "triangular"): linear from `start` x `peak` at
    step 0 up to `peak` at `peak_at` of `steps`, then down to `end` x `peak` at `steps`, flat after;
    `steps` changeable between rungs without a retrace (each rung its own triangle)."""

    def __init__(self, peak: float, steps: int, start: float, peak_at: float, end: float) -> None:
        self.peak, self.start, self.peak_at, self.end = float(peak), float(start), float(peak_at), float(end)
        self.steps = tf.Variable(float(steps), trainable=False)

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        step = tf.cast(step, tf.float32)
        top = self.peak_at * self.steps
        up = self.start + (1.0 - self.start) * step / tf.maximum(top, 1e-9)
        down = 1.0 + (self.end - 1.0) * tf.minimum((step - top) / tf.maximum(self.steps - top, 1e-9), 1.0)
        return self.peak * tf.where(step < top, up, down)
