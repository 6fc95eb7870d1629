"""A candidate's training through Keras's fit under a tf.distribute strategy: the path of TPU
trials, since the one-device loop (trainer/candidate_loop.py) leaves the cross-replica work out.
This module must not import Ray.
"""

from __future__ import annotations

import math
import time
from typing import Any

import keras
import tensorflow as tf

from core.proxy_config import ProxyConfig
from trainer.candidate_loop import CandidateFailed
from trainer.candidate_network import proxy_network
from trainer.proxy_data import eval_pipeline, train_pipeline

_TPU_STRATEGIES: dict[str, tf.distribute.Strategy] = {}


def tpu_strategy(tpu: str) -> tf.distribute.Strategy:
    """A TPUStrategy over `tpu` ("local": this worker's own chips), connected once per process."""
    from trainer.train_plan import make_strategy  # only TPU trials need it

    if tpu not in _TPU_STRATEGIES:
        _TPU_STRATEGIES[tpu] = make_strategy(tpu)
    return _TPU_STRATEGIES[tpu]


def proxy_schedule(proxy: ProxyConfig, steps_per_epoch: int) -> keras.optimizers.schedules.LearningRateSchedule:
    """The one-device loop's learning rate (trainer/fused_optimizer.py's RestartingCosine without
    rungs) as a Keras schedule: a linear warm-up from 0 over --lr_warmup_epochs, then a cosine from the
    peak to 0 at the last step."""
    total = steps_per_epoch * proxy.epochs
    warmup = proxy.lr_warmup_epochs * steps_per_epoch
    if not warmup:
        return keras.optimizers.schedules.CosineDecay(proxy.learning_rate, total)
    return keras.optimizers.schedules.CosineDecay(0.0, max(total - warmup, 1.0), warmup_target=proxy.learning_rate,
                                                  warmup_steps=warmup)


def decay_kernels(model: keras.Model, weight_decay: float) -> None:
    """--weight_decay as the one-device loop has it: weight_decay x sum(w^2)/2 over the kernels
    (every trainable variable of more than one dimension) in the loss, through Keras's regularizers."""
    if weight_decay:
        for variable in model.trainable_variables:
            if len(variable.shape) > 1:
                variable.regularizer = keras.regularizers.L2(weight_decay / 2)


def _compiled_network(genotype: Any, proxy: ProxyConfig, data: Any, strategy: tf.distribute.Strategy,
                      space: str) -> tuple[keras.Model, dict[str, int]]:
    """The proxy network under `strategy`, compiled with the proxy recipe: SGD with Nesterov
    momentum, the warm-up and cosine, L2 weight decay (loss scaling under mixed_float16), one
    compiled call per epoch."""
    steps_per_epoch = len(data.x_train) // proxy.train_batch_size
    with strategy.scope():
        model, size = proxy_network(genotype, proxy, data.input_shape, data.num_classes, fused_batch_norm=False,
                                    space=space, train_images=data.x_train)
        decay_kernels(model, proxy.weight_decay)
        optimizer = keras.optimizers.SGD(proxy_schedule(proxy, steps_per_epoch), momentum=proxy.momentum,
                                         nesterov=True)
        if proxy.precision == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      weighted_metrics=["accuracy"], steps_per_execution=steps_per_epoch)
    return model, size


def train_with_strategy(genotype: Any, proxy: ProxyConfig, data: Any, strategy: tf.distribute.Strategy,
                        space: str = "nasnet") -> dict[str, float]:
    """The proxy recipe through Keras's fit under `strategy` (TPU trials: Keras does the
    cross-replica work that the one-device loop leaves out). Its first-step figure is the first
    epoch's."""
    if proxy.train_batch_size % strategy.num_replicas_in_sync:
        raise ValueError(f"proxy train_batch_size {proxy.train_batch_size}: must be a multiple of the "
                         f"{strategy.num_replicas_in_sync} replicas")
    t_start = time.perf_counter()
    steps_per_epoch = len(data.x_train) // proxy.train_batch_size
    model, size = _compiled_network(genotype, proxy, data, strategy, space)
    train_ds = train_pipeline(data.x_train, data.y_train, proxy.train_batch_size, proxy.seed, proxy.spec.augment)
    epoch_ends: list[float] = []
    deadline = t_start + proxy.timeout_s if proxy.timeout_s else math.inf

    def end_of_epoch(epoch: int, logs: dict) -> None:
        epoch_ends.append(time.perf_counter())
        if not math.isfinite(logs["loss"]):
            raise CandidateFailed(f"NaN loss: mean training loss {logs['loss']} in epoch {epoch}")
        if epoch_ends[-1] > deadline:
            raise CandidateFailed(f"timeout: over {proxy.timeout_s:g} s in epoch {epoch}")

    setup_seconds = time.perf_counter() - t_start
    t_train = time.perf_counter()
    history = model.fit(train_ds, epochs=proxy.epochs, verbose=0, shuffle=False,
                        callbacks=[keras.callbacks.LambdaCallback(on_epoch_end=end_of_epoch)])
    train_seconds = time.perf_counter() - t_train
    t_eval = time.perf_counter()
    val = model.evaluate(eval_pipeline(data.x_val, data.y_val, proxy.train_batch_size), verbose=0, return_dict=True)
    steady_images = (steps_per_epoch * (proxy.epochs - 1)) * proxy.train_batch_size
    return {
        "val_accuracy": float(val["accuracy"]),
        "validation_images": len(data.x_val),
        "train_images": len(data.x_train),
        "val_loss": float(val["loss"]),
        "train_loss": float(history.history["loss"][-1]),
        **size,
        "load_seconds": 0.0,
        "setup_seconds": setup_seconds,
        "first_step_seconds": epoch_ends[0] - t_train,
        "train_seconds": train_seconds,
        "eval_seconds": time.perf_counter() - t_eval,
        "images_per_sec": steady_images / max(epoch_ends[-1] - epoch_ends[0], 1e-9),
    }
