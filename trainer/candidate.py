"""Train one search candidate on a proxy task and measure it.

A plain tf.function training step instead of `model.fit`, with the cheapest first step measured
(benchmarks/first_step.py; tables in benchmarks/README.md): the optimizer's variables exist before
tracing (a step that creates variables is traced twice), the update is one fused TensorFlow op per
variable (`MomentumSGD`), batch norm is one fused op (trainer/nasnet.py FusedBatchNormalization),
Grappler's graph optimisation is off (0.5 s of the first step; with fused batch norm it gained
nothing per step at 8 or 32 px), and a validation set of up to 1,024 images is evaluated eagerly
(cheaper than tracing an evaluation step). Each call starts from a cleared Keras session, so a
warm worker process trains trial after trial with results identical to a fresh process's, and its
memory stays flat (benchmarks/trial_memory.py). Candidate failures (NaN loss, out of memory,
timeout) raise `CandidateFailed` with the reason; anything else is a bug or a config error and
propagates. This module must not import Ray.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import time
from typing import Iterator

import keras
import tensorflow as tf

from searchspace.nasnet import NasNetGenotype
from trainer.nasnet import NasNetConfig, build_nasnet
from trainer.proxy import ProxyConfig
from trainer.proxy_data import eval_pipeline, load_proxy_data, train_pipeline

GRAPPLER_OFF = {"disable_meta_optimizer": True}
EAGER_EVAL_IMAGES = 1024  # up to this many validation images: eager evaluation in batches of
EAGER_EVAL_BATCH = 512  # this size (benchmarks/README.md: 0.3 s against 0.6-1.3 s traced on digits)


class CandidateFailed(Exception):
    """The candidate could not be evaluated: the search records the reason and goes on."""


class MomentumSGD:
    """SGD with Nesterov momentum and a learning-rate schedule, Keras's update rule
    (m = momentum * m - lr * g; w += momentum * m - lr * g), one ResourceApplyKerasMomentum op per
    variable. Keras's own optimizer, applied inside a tf.function, kept each trial's whole step graph
    alive after the model was gone (about 130 MB per trial in a warm worker) and traces slower."""

    def __init__(self, variables: list, schedule, momentum: float) -> None:
        self.variables = [v.value if isinstance(v, keras.Variable) else v for v in variables]
        self.accumulators = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.variables]
        self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.schedule = schedule
        self.momentum = tf.constant(momentum, tf.float32)

    def apply(self, grads: list) -> None:
        """Inside the training step: one update of every variable, then the step count."""
        lr = tf.cast(self.schedule(self.iterations), tf.float32)
        for var, accumulator, grad in zip(self.variables, self.accumulators, grads):
            tf.raw_ops.ResourceApplyKerasMomentum(var=var.handle, accum=accumulator.handle, lr=lr, grad=grad,
                                                  momentum=self.momentum, use_nesterov=True)
        self.iterations.assign_add(1)


def _set_threads(threads: int) -> None:
    if threads <= 0:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:  # TensorFlow already initialised in this process: keep its pools
        pass


@contextlib.contextmanager
def graph_options(options: dict[str, bool]) -> Iterator[None]:
    """Grappler options for the functions first run inside; the process's own restored after."""
    before = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options(options)
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({**{k: None for k in options}, **before})


def _release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc's malloc_trim), so a warm worker's resident memory
    is what it holds, not what its allocator kept from the last trial; a no-op without glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def reset_keras() -> None:
    """Forget the previous trial's models, graphs and name counters (a warm worker's next trial)."""
    keras.backend.clear_session(free_memory=True)
    gc.collect()
    _release_free_memory()


def train_candidate(genotype: NasNetGenotype, proxy: ProxyConfig) -> dict[str, float]:
    """Train `genotype` on the proxy task; return validation accuracy, size and timings."""
    _set_threads(proxy.threads)
    reset_keras()
    t_start = time.perf_counter()
    data = load_proxy_data(proxy)
    load_seconds = time.perf_counter() - t_start
    keras.utils.set_random_seed(proxy.seed)
    config = NasNetConfig(num_cells=3 * proxy.num_cells, filters=proxy.filters, stem="cifar", fused_batch_norm=True)
    model = build_nasnet(genotype, data.input_shape, data.num_classes, config)
    train_ds = train_pipeline(data.x_train, data.y_train, proxy.batch_size, proxy.seed, proxy.spec.augment)
    steps_per_epoch = len(data.x_train) // proxy.batch_size
    total_steps = steps_per_epoch * proxy.epochs
    schedule = keras.optimizers.schedules.CosineDecay(proxy.learning_rate, total_steps)
    optimizer = MomentumSGD(model.trainable_variables, schedule, proxy.momentum)  # before the trace
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(autograph=False)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply(tape.gradient(loss, model.trainable_variables))
        return loss

    def count_correct(x, y, w):
        logits = model(x, training=False)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), y), tf.float32)
        losses = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
        return tf.reduce_sum(correct * w), tf.reduce_sum(losses * w)

    eager_eval = len(data.x_val) <= EAGER_EVAL_IMAGES
    eval_step = count_correct if eager_eval else tf.function(count_correct, autograph=False)
    eval_batch = EAGER_EVAL_BATCH if eager_eval else proxy.batch_size

    setup_seconds = time.perf_counter() - t_start
    # the time limit starts after the data is in memory: a fresh worker's decoding is not the candidate's
    deadline = t_start + load_seconds + proxy.timeout_s if proxy.timeout_s else math.inf
    first_step_seconds = 0.0
    t_train = time.perf_counter()
    try:
        with graph_options(GRAPPLER_OFF):
            for epoch in range(proxy.epochs):
                loss_sum = tf.zeros(())
                for step, (x, y) in enumerate(train_ds):
                    t_step = time.perf_counter()
                    loss_sum += train_step(x, y)
                    if epoch == 0 and step == 0:
                        first_step_seconds = time.perf_counter() - t_step
                    if time.perf_counter() > deadline:
                        raise CandidateFailed(f"timeout: over {proxy.timeout_s:g} s in epoch {epoch}")
                train_loss = float(loss_sum) / steps_per_epoch
                if not math.isfinite(train_loss):
                    raise CandidateFailed(f"NaN loss: mean training loss {train_loss} in epoch {epoch}")
            train_seconds = time.perf_counter() - t_train
            t_eval = time.perf_counter()
            correct = loss = 0.0
            for x, y, w in eval_pipeline(data.x_val, data.y_val, eval_batch):
                c, l = eval_step(x, y, w)
                correct, loss = correct + float(c), loss + float(l)
    except tf.errors.ResourceExhaustedError as err:
        raise CandidateFailed(f"out of memory: {err.message.splitlines()[0]}") from None
    n_val = len(data.x_val)
    steady_images = (total_steps - 1) * proxy.batch_size
    params = int(model.count_params())
    del model, optimizer, train_step, eval_step
    reset_keras()
    return {
        "val_accuracy": correct / n_val,
        "validation_images": n_val,
        "train_images": len(data.x_train),
        "val_loss": loss / n_val,
        "train_loss": train_loss,
        "params": params,
        "load_seconds": load_seconds,
        "setup_seconds": setup_seconds,
        "first_step_seconds": first_step_seconds,
        "train_seconds": train_seconds,
        "eval_seconds": time.perf_counter() - t_eval,
        "images_per_sec": steady_images / max(train_seconds - first_step_seconds, 1e-9),
    }
