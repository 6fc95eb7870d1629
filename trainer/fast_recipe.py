"""The parts of a fast recipe (airbench94's) that act on the training step itself, for
trainer/train.py's Trainer and the search proxy's loop (trainer/candidate_loop.py) alike:

- `ParameterGroups`: the batch-norm offsets (the beta of every BatchNormalization layer, airbench's
  "BN biases"; a BN scale, which airbench's BN lacks, keeps the base rate) at `bn_lr_factor` x the
  learning rate, by scaling their gradients (the same thing for SGD with or
  without momentum, Nesterov's too, which is why the config allows it with those only), and an L2
  weight decay of their own, `bn_weight_decay` (the weights' `weight_decay` skips them). airbench
  trains its BN biases at 64x the rate and decays them at 1/64 of the weights' decay, the same
  shrink per step. And the whitening conv's bias (trainer/airbench.py) trained for the first
  `whiten_bias_epochs` epochs only: after each later step, what the step did to it is undone (as
  airbench's `requires_grad = False`; lookahead's syncs still move it, as they move airbench's).
- `per_example_loss`: softmax cross-entropy with Keras's label smoothing;
- `Lookahead`: every `lookahead_every` steps, the average `avg += (1 - d) (w - avg)` of every float
  weight of the model (BN's moving statistics too, as airbench's state_dict) with a decay d =
  `lookahead_decay` x (step / total_steps)^3, copied back into the model (w = avg); at the last step
  the model takes the average as it is (d = 1). airbench: every 5 steps, 0.95^5.
- `WeightAverage`: the search proxy's `ema_decay`, a moving average of the trainable weights
  (TensorFlow's ExponentialMovingAverage, from the weights at its start), swapped in for an
  evaluation as amoeba train swaps in Keras's `use_ema` average (trainer/evaluation.py).

Both run inside a compiled loop as graph ops (with or without autograph): the Trainer's, in the
strategy's cross-replica context (they assign mirrored variables as a whole), and the proxy's.
This module must not build data, evaluate or checkpoint.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import keras
import tensorflow as tf

from trainer.airbench import whitening_layer


def per_example_loss(labels: tf.Tensor, logits: tf.Tensor, num_classes: int, label_smoothing: float) -> tf.Tensor:
    """Softmax cross-entropy of integer `labels` against `logits` (float32), with Keras's label
    smoothing: each one-hot target becomes (1 - s) x target + s / num_classes."""
    return keras.losses.categorical_crossentropy(tf.one_hot(labels, num_classes), tf.cast(logits, tf.float32),
                                                 from_logits=True, label_smoothing=label_smoothing)


def batch_norm_offsets(model: keras.Model) -> list[Any]:
    """The offset (beta) of every BatchNormalization layer of `model` that has one, nested ones too."""
    # Keras has no public walk over nested layers; _flatten_layers is what Keras's own tracking uses
    norms = [layer for layer in model._flatten_layers(include_self=False)
             if isinstance(layer, keras.layers.BatchNormalization)]
    return [layer.beta for layer in norms if layer.center and layer.trainable]


def freeze_step(epochs: float, steps_per_epoch: float) -> int:
    """The last step at which a bias frozen after `epochs` trains: at least 1 for any epochs > 0 (a
    share of a step does not round to 0, which means "trains throughout"); 0 for 0."""
    return max(1, round(epochs * steps_per_epoch)) if epochs > 0 else 0


class ParameterGroups:
    """BN offsets' learning-rate factor and weight decay; the whitening bias's freeze."""

    def __init__(self, model: keras.Model, bn_lr_factor: float, bn_weight_decay: float,
                 freeze_whiten_bias_at: int, whitening_required: bool = True) -> None:
        """`freeze_whiten_bias_at`: the last step (1-based count) at which the whitening bias trains;
        0: it trains throughout. When given for a model without a whitening conv: a ValueError, or
        with `whitening_required` False (a search's candidates, some with that stem, some without)
        nothing to freeze."""
        self.bn_lr_factor, self.bn_weight_decay = float(bn_lr_factor), float(bn_weight_decay)
        norm_ids = {id(v) for v in batch_norm_offsets(model)}
        self.bn_indices = [i for i, v in enumerate(model.trainable_variables) if id(v) in norm_ids]
        self.bn_variables = [model.trainable_variables[i] for i in self.bn_indices]
        self.freeze_at = int(freeze_whiten_bias_at)
        self.whiten_bias = None
        if self.freeze_at > 0:
            layer = whitening_layer(model)
            if (layer is None or layer.bias is None) and not whitening_required:
                self.freeze_at = 0
                return
            if layer is None or layer.bias is None:
                raise ValueError(f"whiten_bias_epochs: model {model.name!r} has no whitening conv bias to freeze")
            self.whiten_bias = layer.bias
            self.frozen_bias = tf.Variable(tf.zeros_like(layer.bias), trainable=False, name="frozen_whiten_bias")

    def decay_loss(self) -> tf.Tensor | float:
        """bn_weight_decay x the L2 (sum of squares / 2) of the BN offsets; 0 when off."""
        if self.bn_weight_decay <= 0 or not self.bn_variables:
            return 0.0
        return self.bn_weight_decay * tf.add_n([tf.nn.l2_loss(tf.cast(v, tf.float32)) for v in self.bn_variables])

    def scale_gradients(self, gradients: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        """The gradients of the model's trainable variables (in their order), BN's times bn_lr_factor."""
        gradients = list(gradients)
        if self.bn_lr_factor != 1.0:
            for i in self.bn_indices:
                if gradients[i] is not None:
                    gradients[i] = gradients[i] * tf.cast(self.bn_lr_factor, gradients[i].dtype)
        return gradients

    def start(self) -> None:
        """Before training (also a resumed one): the bias as it is now is its frozen value."""
        if self.whiten_bias is not None:
            self.frozen_bias.assign(self.whiten_bias)

    def after_step(self, step: tf.Tensor) -> None:
        """After the optimizer's step `step` (its 1-based count), before lookahead's sync: past
        freeze_at, undo what the step did to the whitening bias (airbench's requires_grad = False:
        no gradient step, lookahead's syncs still move it). Graph ops only (with or without autograph)."""
        if self.whiten_bias is None:
            return
        bias, frozen = self.whiten_bias, self.frozen_bias

        def put_back() -> tf.Tensor:
            bias.assign(frozen)
            return tf.constant(True)

        tf.cond(tf.cast(step, tf.int64) > self.freeze_at, put_back, lambda: tf.constant(False))

    def after_sync(self) -> None:
        """After lookahead's sync (or after the step, without lookahead): the bias as it is now is
        the value the next step's undo puts back."""
        if self.whiten_bias is not None:
            self.frozen_bias.assign(self.whiten_bias)


class Lookahead:
    """airbench's lookahead: an average of the model's float weights, synced every `every` steps.
    `total_steps`: an int, or a tf.Variable changed between calls (the proxy's rungs)."""

    def __init__(self, model: keras.Model, every: int, decay: float, total_steps: Any) -> None:
        self.every, self.decay, self.total_steps = int(every), float(decay), total_steps
        self.weights = [w for w in model.weights if w.dtype in ("float32", "float16", "bfloat16")]
        self.average = [tf.Variable(tf.convert_to_tensor(w), trainable=False, name="lookahead")
                        for w in self.weights]

    def trackable(self) -> dict[str, list[tf.Variable]]:
        """What a checkpoint keeps of it."""
        return {"average": self.average}

    def start(self) -> None:
        """The average restarts from the weights as they are (a proxy rung starts where the last ended:
        the model was its average then)."""
        for average, weight in zip(self.average, self.weights):
            average.assign(tf.cast(weight, average.dtype))

    def _sync(self, decay: tf.Tensor) -> tf.Tensor:
        for average, weight in zip(self.average, self.weights):
            average.assign_add((1.0 - tf.cast(decay, average.dtype)) * (tf.cast(weight, average.dtype) - average))
            weight.assign(tf.cast(average, weight.dtype))
        return tf.constant(True)

    def after_step(self, step: tf.Tensor) -> None:
        """After the optimizer's step `step` (its 1-based count): a sync when step is a multiple of
        `every` (decay x (step / total)^3); from the last step on the model is the average (airbench's
        final decay of 1). Graph ops only (traced with or without autograph)."""
        step = tf.cast(step, tf.float32)
        total = tf.cast(self.total_steps, tf.float32)
        due = tf.equal(tf.math.floormod(step, float(self.every)), 0.0)
        tf.cond(due, lambda: self._sync(self.decay * (step / total) ** 3), lambda: tf.constant(False))
        tf.cond(step >= total, lambda: self._sync(tf.constant(1.0)), lambda: tf.constant(False))


class WeightAverage:
    """A moving average of a model's trainable weights: after each step `average -= (1 - decay) x
    (average - weight)` (tf.train.ExponentialMovingAverage, without its debiasing), starting from the
    weights as they are when it is made; BN's moving statistics are averages already and stay as
    they are. Keras's `use_ema` (amoeba train's) follows the same rule."""

    def __init__(self, model: keras.Model, decay: float) -> None:
        self.variables = [v.value for v in model.trainable_variables]  # the tf.Variables under Keras's
        self.ema = tf.train.ExponentialMovingAverage(decay)
        self.ema.apply(self.variables)  # makes the averages, equal to the weights: nothing moves yet
        self.average = [self.ema.average(v) for v in self.variables]

    def trackable(self) -> dict[str, list[tf.Variable]]:
        """What a checkpoint keeps of it."""
        return {"weight_average": self.average}

    def after_step(self) -> None:
        """After the optimizer's step (and lookahead's sync): the averages move. Graph ops only."""
        self.ema.apply(self.variables)

    @contextlib.contextmanager
    def in_place(self) -> Iterator[None]:
        """Inside, the model's trainable weights are their averages; after, their raw values again."""
        raw = [v.numpy() for v in self.variables]
        for variable, average in zip(self.variables, self.average):
            variable.assign(average)
        try:
            yield
        finally:
            for variable, value in zip(self.variables, raw):
                variable.assign(value)
