"""Learning-rate schedules and optimizers of the training recipes (AmoebaNet and ResNet seeds).

A linear warm-up, then one of: exponential staircase decay (AmoebaNet: lr * decay_value ^
floor(epochs / decay_epochs)), piecewise-constant decay at given epochs (ResNet: x0.1 at 30, 60,
80), cosine, or constant. Or triangular, its own warm-up: linear from start_factor x lr to lr at
peak_at of the steps, then linear down to end_factor x lr at the last (airbench's 0.2, 0.23, 0.07).
Steps are optimizer steps. This module must not build models or data.
"""

from __future__ import annotations

import math
from typing import Sequence

import keras
import tensorflow as tf

from core.train_config import OPTIMIZERS, SCHEDULES  # the names live with the config (no TensorFlow)


class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to `base_lr` over `warmup_steps`, then the chosen decay."""

    def __init__(
        self,
        base_lr: float,
        steps_per_epoch: float,
        total_steps: int,
        kind: str = "exponential",
        decay_value: float = 0.97,
        decay_epochs: Sequence[float] = (2.4,),
        warmup_epochs: float = 0.0,
        start_factor: float = 0.2,
        peak_at: float = 0.23,
        end_factor: float = 0.07,
    ) -> None:
        if kind not in SCHEDULES:
            raise ValueError(f"lr_schedule: unknown {kind!r}; known: {list(SCHEDULES)}")
        if kind == "exponential" and (len(decay_epochs) != 1 or decay_epochs[0] <= 0):
            raise ValueError(f"lr_decay_epochs: exponential decay needs one positive value, got {list(decay_epochs)}")
        if kind == "piecewise" and list(decay_epochs) != sorted(decay_epochs):
            raise ValueError(f"lr_decay_epochs: piecewise boundaries must increase, got {list(decay_epochs)}")
        self.base_lr = float(base_lr)
        self.steps_per_epoch = float(steps_per_epoch)
        self.total_steps = int(total_steps)
        self.kind = kind
        self.decay_value = float(decay_value)
        self.decay_epochs = [float(e) for e in decay_epochs]
        self.warmup_steps = float(warmup_epochs) * self.steps_per_epoch
        self.start_factor, self.peak_at, self.end_factor = float(start_factor), float(peak_at), float(end_factor)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        epoch = step / self.steps_per_epoch
        if self.kind == "exponential":
            decayed = self.base_lr * tf.pow(self.decay_value, tf.floor(epoch / self.decay_epochs[0]))
        elif self.kind == "piecewise":
            passed = tf.add_n([tf.cast(epoch >= b, tf.float32) for b in self.decay_epochs] or [0.0])
            decayed = self.base_lr * tf.pow(self.decay_value, passed)
        elif self.kind == "cosine":  # from the end of the warm-up to the last step
            span = max(self.total_steps - self.warmup_steps, 1.0)
            progress = tf.clip_by_value((step - self.warmup_steps) / span, 0.0, 1.0)
            decayed = self.base_lr * 0.5 * (1.0 + tf.cos(math.pi * progress))
        elif self.kind == "triangular":
            decayed = self._triangular(step)
        else:
            decayed = tf.constant(self.base_lr)
        if self.warmup_steps > 0:
            warm = self.base_lr * step / self.warmup_steps
            return tf.where(step < self.warmup_steps, warm, decayed)
        return decayed

    def _triangular(self, step):
        """np.interp(step, [0, peak, total], [start, 1, end]) x base_lr, flat after the last step."""
        peak = self.peak_at * self.total_steps
        up = self.start_factor + (1.0 - self.start_factor) * step / max(peak, 1e-9)
        down_span = max(self.total_steps - peak, 1e-9)
        down = 1.0 + (self.end_factor - 1.0) * tf.minimum((step - peak) / down_span, 1.0)
        return self.base_lr * tf.where(step < peak, up, down)

    def get_config(self) -> dict:
        return {
            "base_lr": self.base_lr, "steps_per_epoch": self.steps_per_epoch,
            "total_steps": self.total_steps, "kind": self.kind, "decay_value": self.decay_value,
            "decay_epochs": self.decay_epochs, "warmup_epochs": self.warmup_steps / self.steps_per_epoch,
            "start_factor": self.start_factor, "peak_at": self.peak_at, "end_factor": self.end_factor,
        }


def make_optimizer(name: str, schedule: WarmupDecay, momentum: float = 0.9, nesterov: bool = False,
                   ema_decay: float = 0.0) -> keras.optimizers.Optimizer:
    """rmsprop: AmoebaNet's (decay 0.9, momentum 0.9, epsilon 1.0); momentum: ResNet's, Nesterov's
    with `nesterov`. `ema_decay` > 0: Keras's moving average of the weights (use_ema), updated after
    each step from the first (no warm-up of the decay); trainer/evaluation.py swaps it in."""
    ema = {"use_ema": True, "ema_momentum": ema_decay} if ema_decay > 0 else {}
    if name == "rmsprop":
        return keras.optimizers.RMSprop(schedule, rho=0.9, momentum=momentum, epsilon=1.0, **ema)
    if name == "momentum":
        return keras.optimizers.SGD(schedule, momentum=momentum, nesterov=nesterov, **ema)
    if name == "sgd":
        return keras.optimizers.SGD(schedule, **ema)
    raise ValueError(f"optimizer: unknown {name!r}; known: {list(OPTIMIZERS)}")
