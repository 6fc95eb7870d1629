"""Training steps timed before or after training. A search child's proxy step before it is trained
(`candidate_step_ms`: the race's screen). And each network's training step timed interleaved with
the others' in rounds, on one machine at one time: the steady pace a race's figure multiplies its steps to the target by (issue 55,
experiments/promote/seed_race.py), so that the host's drift between runs hits every net alike.

A round builds each network in turn (the order reversed every other round), traces its step (SGD
with momentum on the recipe's cross-entropy, the network's forward and backward pass at the recipe's
batch, image size and precision, on random images held in memory) and times `steps` steps after one untimed
one; a net's figure for the round is its median step. The input pipeline and the recipe's extras
(lookahead, label smoothing) are left out: they cost every net alike. It runs where it is called (the
`amoeba promote` command's machine, which with --ray_address may not be where the nets trained).
Nothing is written here.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Mapping

import keras
import numpy as np
import tensorflow as tf

from core.proxy_config import PRECISIONS, ProxyConfig
from core.train_config import TrainConfig
from trainer.candidate_network import proxy_network
from trainer.models import build_model, model_spec, split_outputs
from trainer.proxy_data import proxy_shape
from trainer.worker_setup import reset_keras


def median_step_seconds(config: TrainConfig, num_classes: int, steps: int) -> float:
    """The median of `steps` training steps of `config`'s network after one untimed (traced) step."""
    reset_keras()
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy(PRECISIONS[config.precision])  # as the Trainer computes
    try:
        return _median_step(config, num_classes, steps)
    finally:
        keras.mixed_precision.set_global_policy("float32")
        reset_keras()


def _median_step(config: TrainConfig, num_classes: int, steps: int) -> float:
    model = build_model(model_spec(config, num_classes))
    return time_steps(model, (config.image_size, config.image_size, 3), num_classes, config.train_batch_size, steps)


def time_steps(model: keras.Model, input_shape: tuple[int, ...], num_classes: int, batch: int, steps: int) -> float:
    """The median of `steps` SGD steps of `model` at `batch` random images, after one untimed (traced) step."""
    optimizer = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9, nesterov=True)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((batch, *input_shape), dtype=np.float32))
    y = tf.constant(rng.integers(0, num_classes, batch))

    @tf.function(jit_compile=False)
    def step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits, _ = split_outputs(model(x, training=True))
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    step().numpy()  # the trace
    seconds = []
    for _ in range(steps):
        t_step = time.perf_counter()
        step().numpy()
        seconds.append(time.perf_counter() - t_step)
    return statistics.median(seconds)


def candidate_step_ms(genotype: Any, proxy: ProxyConfig, space: str, steps: int) -> float:
    """A search child's proxy network's training step (ms) at the proxy's batch, before it is trained:
    the race's screen (evolution/target_race.py, --screen_score=step_ms)."""
    input_shape, num_classes = proxy_shape(proxy)
    reset_keras()
    try:
        model = proxy_network(genotype, proxy, input_shape, num_classes, fused_batch_norm=True, space=space)[0]
        return 1000.0 * time_steps(model, input_shape, num_classes, proxy.train_batch_size, steps)
    finally:
        reset_keras()


def interleaved_step_seconds(configs: Mapping[str, TrainConfig], num_classes: int, rounds: int, steps: int
                             ) -> dict[str, list[float]]:
    """Each net's median step in each round ({name: [seconds in round 1, 2, ...]}), the nets timed in
    turn within a round, every other round in the reverse order."""
    names = list(configs)
    out: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            out[name].append(median_step_seconds(configs[name], num_classes, steps))
    return out
