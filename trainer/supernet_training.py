"""Training a supernet (trainer/supernet.py) once, on the search's training split with the search
proxy's recipe (its optimizer, schedule, weight decay, label smoothing, BN offsets' rate, lookahead,
whitening bias's freeze, augmentation), for the proxy's epochs.

Each step follows BigNAS's sandwich rule with inplace distillation: the largest subnet learns from
the labels, the smallest and `sandwich - 2` random subnets (drawn from the space, seeded by the
epoch) from the largest's predictions (their cross-entropy against its softmax, no gradient into
it); one update of the summed gradients. The state (weights, optimizer, lookahead, the step) is
written atomically to DIR/checkpoint.npz after each epoch, and each epoch's shuffle, augmentation
and subnets are drawn from the seed and the epoch alone, so a run killed anywhere resumes from its
last epoch to the same weights. DIR/supernet.json marks it done. This module must not import Ray.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from core.proxy_config import ProxyConfig
from searchspace.convnet import ConvNetSpace
from searchspace.supernet import frame_of, smallest_subnet
from trainer.airbench import whiten_from_images
from trainer.batch_norm import set_batch_norm
from trainer.fast_recipe import Lookahead, ParameterGroups, freeze_step, per_example_loss
from trainer.fused_optimizer import MomentumSGD, RestartingCosine, RestartingTriangle
from trainer.proxy_data import ArrayDataset, train_pipeline
from trainer.supernet import ARCH_KEYS, Supernet, arch_signature, stacked_archs, subnet_arch

CHECKPOINT, DONE = "checkpoint.npz", "supernet.json"
SANDWICH = 4  # subnets a step: the largest, the smallest and two random (BigNAS)


def build_supernet(space: ConvNetSpace, proxy: ProxyConfig, data: ArrayDataset) -> Supernet:
    """The supernet of `space` with the proxy's BN settings, its whitening set from the training images."""
    model = Supernet(frame_of(space), data.input_shape, data.num_classes)
    set_batch_norm(model, proxy.bn_momentum, proxy.bn_epsilon)
    whiten_from_images(model, data.x_train)
    return model


class SupernetTraining:
    """The supernet, its optimizer and recipe, and the traced sandwich step."""

    def __init__(self, space: ConvNetSpace, proxy: ProxyConfig, data: ArrayDataset, sandwich: int = SANDWICH) -> None:
        if sandwich < 2:
            raise ValueError(f"sandwich: at least 2 subnets a step (the largest and the smallest), got {sandwich}")
        self.space, self.proxy, self.data, self.sandwich = space, proxy, data, sandwich
        self.model = build_supernet(space, proxy, data)
        self.steps_per_epoch = len(data.x_train) // proxy.train_batch_size
        steps = self.steps_per_epoch * proxy.epochs
        self.schedule = (RestartingTriangle(proxy.learning_rate, steps, proxy.lr_start_factor, proxy.lr_peak_at,
                                            proxy.lr_end_factor) if proxy.lr_schedule == "triangular" else
                         RestartingCosine(proxy.learning_rate, steps, warmup=proxy.lr_warmup_epochs * self.steps_per_epoch))
        self.optimizer = MomentumSGD(self.model.trainable_variables, self.schedule, proxy.momentum, proxy.nesterov)
        self.groups = ParameterGroups(self.model, proxy.bn_lr_factor, proxy.bn_weight_decay,
                                      freeze_step(proxy.whiten_bias_epochs, self.steps_per_epoch),
                                      whitening_required=False)
        self.lookahead = (Lookahead(self.model, proxy.lookahead_every, proxy.lookahead_decay, self.schedule.steps)
                          if proxy.lookahead_every else None)
        self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.groups.start()
        if self.lookahead:
            self.lookahead.start()
        self.step = self._step_function()

    def _step_function(self) -> Any:
        model, optimizer, proxy, groups = self.model, self.optimizer, self.proxy, self.groups
        kernels = [v for v in optimizer.variables if len(v.shape) > 1]
        image = tf.TensorSpec([None, *self.data.input_shape], tf.float32)

        @tf.function(autograph=False, input_signature=[image, tf.TensorSpec([None], tf.int32),
                                                       arch_signature(len(model.frame.stages), (self.sandwich,))])
        def step(x: tf.Tensor, y: tf.Tensor, archs: dict[str, tf.Tensor]) -> tf.Tensor:
            with tf.GradientTape() as tape:
                teacher = model.forward(x, {key: archs[key][0] for key in ARCH_KEYS}, training=True)
                loss = tf.reduce_mean(per_example_loss(y, teacher, self.data.num_classes, proxy.label_smoothing))
                soft = tf.stop_gradient(tf.nn.softmax(teacher))
                total = loss
                for k in range(1, self.sandwich):
                    student = model.forward(x, {key: archs[key][k] for key in ARCH_KEYS}, training=True)
                    total += tf.reduce_mean(keras.losses.categorical_crossentropy(soft, student, from_logits=True))
                if proxy.weight_decay:
                    total += proxy.weight_decay * tf.add_n([tf.nn.l2_loss(v) for v in kernels])
                total += groups.decay_loss()
            optimizer.apply(groups.scale_gradients(tape.gradient(total, optimizer.variables)))
            self.global_step.assign_add(1)
            groups.after_step(self.global_step)
            if self.lookahead is not None:
                self.lookahead.after_step(optimizer.iterations)
            groups.after_sync()
            return loss

        return step

    def archs(self, rng: random.Random) -> dict[str, np.ndarray]:
        """One step's subnets: the largest, the smallest, then random ones."""
        frame = self.model.frame
        nets = [frame, smallest_subnet(self.space)] + [self.space.sample(rng) for _ in range(self.sandwich - 2)]
        return stacked_archs([subnet_arch(net, frame) for net in nets])

    def train_epoch(self, epoch: int) -> float:
        """One epoch's steps; its mean loss (the largest subnet's)."""
        proxy = self.proxy
        rng = random.Random(f"{proxy.seed}/{epoch}")
        data = train_pipeline(self.data.x_train, self.data.y_train, proxy.train_batch_size, proxy.seed + epoch,
                              proxy.spec.augment and proxy.augmentation, epoch=epoch, flip_key=proxy.seed)
        losses = [self.step(x, y, self.archs(rng)) for x, y in data]
        return float(tf.reduce_mean(losses))

    def state(self) -> dict[str, list[tf.Variable]]:
        """Everything a resumed run needs, by part: the model's weights first (what scoring loads)."""
        extra = [self.optimizer.iterations, self.global_step] + (
            [self.groups.frozen_bias] if self.groups.whiten_bias is not None else [])
        return {"model": [v.value for v in self.model.variables], "optimizer": self.optimizer.accumulators + extra,
                "lookahead": self.lookahead.average if self.lookahead else []}


def save_state(parts: dict[str, list[tf.Variable]], path: str, **facts: float) -> None:
    """The variables' values (and `facts`) to `path`, atomically (temp + os.replace)."""
    arrays = {f"{part}/{i}": v.numpy() for part, variables in parts.items() for i, v in enumerate(variables)}
    temp = f"{path}.tmp.npz"
    np.savez(temp, **arrays, **{f"fact/{k}": np.float64(v) for k, v in facts.items()})
    os.replace(temp, path)


def load_state(parts: dict[str, list[tf.Variable]], path: str, only: tuple[str, ...] = ()) -> dict[str, float]:
    """Assign the values saved at `path` to the variables of `parts` (of `only` those, when given);
    its facts. ValueError naming the file when it does not fit (another supernet's)."""
    with np.load(path, allow_pickle=False) as saved:
        for part, variables in parts.items():
            if only and part not in only:
                continue
            keys = [k for k in saved.files if k.startswith(f"{part}/")]
            if len(keys) != len(variables):
                raise ValueError(f"{path}: {len(keys)} {part} arrays, this supernet has {len(variables)}")
            for i, variable in enumerate(variables):
                value = saved[f"{part}/{i}"]
                if tuple(value.shape) != tuple(variable.shape):
                    raise ValueError(f"{path}: {part}/{i} of shape {value.shape}, this supernet's {variable.shape}")
                variable.assign(value)
        return {k[len("fact/"):]: float(saved[k]) for k in saved.files if k.startswith("fact/")}


def train_supernet(space: ConvNetSpace, proxy: ProxyConfig, data: ArrayDataset, directory: str,
                   sandwich: int = SANDWICH) -> dict[str, Any]:
    """Train the supernet of `space` into `directory` (resuming from its checkpoint) and return what
    DIR/supernet.json records: epochs, seconds of the training loops, images a second, last loss."""
    done_path = os.path.join(directory, DONE)
    if os.path.exists(done_path):
        with open(done_path) as f:
            return json.load(f)
    os.makedirs(directory, exist_ok=True)
    keras.utils.set_random_seed(proxy.seed)
    training = SupernetTraining(space, proxy, data, sandwich)
    checkpoint = os.path.join(directory, CHECKPOINT)
    facts = load_state(training.state(), checkpoint) if os.path.exists(checkpoint) else {}
    done, seconds, loss = int(facts.get("epochs", 0)), facts.get("seconds", 0.0), facts.get("loss", math.nan)
    for epoch in range(done, proxy.epochs):
        start = time.perf_counter()
        loss = training.train_epoch(epoch)
        seconds += time.perf_counter() - start
        if not math.isfinite(loss):
            raise ValueError(f"supernet: NaN loss in epoch {epoch} (lower --learning_rate)")
        save_state(training.state(), checkpoint, epochs=epoch + 1, seconds=seconds, loss=loss)
        print(f"supernet: epoch {epoch + 1}/{proxy.epochs}, loss {loss:.4f}, {seconds:.0f} s", flush=True)
    images = training.steps_per_epoch * proxy.train_batch_size * proxy.epochs
    result = {"epochs": proxy.epochs, "train_seconds": seconds, "images_per_sec": images / max(seconds, 1e-9),
              "train_loss": loss, "sandwich": sandwich, "frame": training.model.frame.to_json(),
              "space": space.to_config(), "train_images": len(data.x_train)}
    temp = done_path + ".tmp"
    with open(temp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(temp, done_path)
    return result
