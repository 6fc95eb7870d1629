"""Train one search candidate on a proxy task and measure it.

A plain tf.function training step instead of `model.fit`, with the cheapest first step measured
(benchmarks/first_step.py; tables in benchmarks/README.md): the optimizer's variables exist before
tracing (a step that creates variables is traced twice), the update is one fused TensorFlow op per
variable (`MomentumSGD`), batch norm is one fused op (trainer/nasnet.py FusedBatchNormalization),
Grappler's graph optimisation is off (0.5 s of the first step; with fused batch norm it gained
nothing per step at 8 or 32 px). Each call starts from a cleared Keras session, so a
warm worker process trains trial after trial with results identical to a fresh process's, and its
memory stays flat (benchmarks/trial_memory.py). Precision follows `amoeba train`'s (mixed_float16
with dynamic loss scaling). TPU trials train through Keras's fit under a TPUStrategy instead
(`train_with_strategy`), since the loop here is written for one device. Evaluation and the
batch-1 latency share one traced inference function (any batch size, one trace). Candidate failures (NaN
loss, out of memory, timeout) raise `CandidateFailed` with the reason; anything else propagates.

Costs, measured where the candidate trains: trainable parameters and multiply-adds (as papers
count them), inference latency at batch 1 (graph calls of the traced inference pass on the trial's
device, median of `LATENCY_REPEATS` after a warm-up, before training; a candidate over
`max_latency_ms` is reported with its figures, untrained), latency at the evaluation batch (median
over the full validation batches, the accuracy and loss ops included), and the steady-state
training step time (median, each call's first step excluded). With `proxy.train_seconds` a
candidate trains for that long by its own step time: the step count is fixed from the median of
its first `CALIBRATION_STEPS` steps after the first, recorded in the metrics and, with a
`state_dir`, in a file there that a re-issued trial trains to again; the learning rate holds at
its peak through those steps and then follows a cosine over the rest, so both train alike.

With rungs (a multi-fidelity search) one call trains through them: at each rung it evaluates,
writes a checkpoint (weights, batch-norm statistics, momentum; TensorFlow's checkpoint format,
written to a temp dir and renamed) and hands the rung's metrics to `report`, which returns when
the trial may go on (the search driver stops it there otherwise). Each rung's extra epochs run
their own cosine schedule from the peak learning rate (a warm restart), so every rung's result is
measured at the end of a schedule. A trial resumed after its driver died starts from its last
checkpoint and re-reports the rungs it finished, without training them again. This module must not
import Ray.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import math
import os
import statistics
import time
from typing import Iterator

import keras
import tensorflow as tf

from searchspace.nasnet import NasNetGenotype
from trainer.models import model_report
from trainer.nasnet import NasNetConfig, build_nasnet
from trainer.proxy import PRECISIONS, ProxyConfig, proxy_shape
from trainer.proxy_data import eval_pipeline, load_proxy_data, train_pipeline
from trainer.rung_state import RungPlan, restore_rung, save_rung

GRAPPLER_OFF = {"disable_meta_optimizer": True}
EVAL_BATCH = 512  # validation images per evaluation call, at most
LATENCY_REPEATS = 10  # timed batch-1 calls (after one warm-up) whose median is latency_ms
CALIBRATION_STEPS = 5  # steady steps whose median fixes a --train_seconds candidate's step count
STEPS_FILE = "train_steps.json"  # in a trial's state dir: the step count it calibrated


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
        self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False)  # steps of this schedule
        self.schedule = schedule
        self.momentum = tf.constant(momentum, tf.float32)

    def apply(self, grads: list) -> None:
        """Inside the training step: one update of every variable, then the step count."""
        lr = tf.cast(self.schedule(self.iterations), tf.float32)
        for var, accumulator, grad in zip(self.variables, self.accumulators, grads):
            tf.raw_ops.ResourceApplyKerasMomentum(var=var.handle, accum=accumulator.handle, lr=lr, grad=grad,
                                                  momentum=self.momentum, use_nesterov=True)
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


def use_gpu_memory_growth() -> None:
    """Let each trial take only the GPU memory it uses, so trials with a fraction of a GPU share it
    (before TensorFlow initialises its devices; later calls change nothing)."""
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # devices already initialised in this worker: growth was set then
            pass


def set_threads(threads: int) -> None:
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
    keras.backend.clear_session(free_memory=False)
    gc.collect()
    _release_free_memory()


def _freeze_long_lived_objects() -> None:
    """Once per process, before its first model: move what lives for the whole process (TensorFlow's
    and Keras's modules, the cached data; about 400,000 objects) out of the garbage collector's scans
    (gc.freeze). A full collection then walks only the trial's own objects: 0.2 s less for each of the
    collections between trials and during a model's build and trace (benchmarks/README.md)."""
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()


class RestartingCosine:
    """`peak` for the first `hold` steps, then cosine decay to 0 at `steps`; both changeable between
    rungs (and after a --train_seconds calibration) without a retrace."""

    def __init__(self, peak: float, steps: int, hold: int = 0) -> None:
        self.peak = peak
        self.steps = tf.Variable(float(steps), trainable=False)
        self.hold = float(hold)

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        decayed = tf.maximum(tf.cast(step, tf.float32) - self.hold, 0.0)
        progress = tf.minimum(decayed, self.steps - self.hold) / tf.maximum(self.steps - self.hold, 1.0)
        return self.peak * 0.5 * (1.0 + tf.cos(math.pi * progress))


def train_candidate(genotype: NasNetGenotype, proxy: ProxyConfig, rungs: RungPlan | None = None, *,
                    max_latency_ms: float = 0.0, state_dir: str | None = None) -> dict[str, float]:
    """Train `genotype` on the proxy task; return validation accuracy, size, costs and timings (with
    `rungs`: those of the last rung reached, each rung's also passed to `rungs.report`). Over
    `max_latency_ms` at batch 1: its size and latency only, untrained (the search records it
    infeasible)."""
    set_threads(proxy.threads)
    reset_keras()
    t_start = time.perf_counter()
    data = load_proxy_data(proxy)
    _freeze_long_lived_objects()
    load_seconds = time.perf_counter() - t_start
    keras.utils.set_random_seed(proxy.seed)
    keras.mixed_precision.set_global_policy(PRECISIONS[proxy.precision])
    try:
        if proxy.tpu:
            if rungs is not None:
                raise ValueError("rungs: a TPU trial trains through Keras's fit and has no rungs yet")
            return train_with_strategy(genotype, proxy, data, tpu_strategy(proxy.tpu))
        return _train(genotype, proxy, data, t_start, load_seconds, rungs, max_latency_ms, state_dir)
    finally:
        keras.mixed_precision.set_global_policy("float32")
        reset_keras()


def _proxy_network(genotype: NasNetGenotype, proxy: ProxyConfig, input_shape: tuple[int, ...], num_classes: int,
                   fused_batch_norm: bool) -> tuple[keras.Model, dict[str, int]]:
    """The candidate's proxy network (N cells per stack, F filters, CIFAR stem) and its size
    (trainable params, multiply_adds per image)."""
    config = NasNetConfig(num_cells=3 * proxy.num_cells, filters=proxy.filters, stem="cifar",
                          fused_batch_norm=fused_batch_norm)
    model = build_nasnet(genotype, input_shape, num_classes, config)
    return model, model_report(model)


def candidate_size(genotype: NasNetGenotype, proxy: ProxyConfig) -> dict[str, int]:
    """The proxy network's trainable parameters and multiply-adds, built without reading its data
    (a search's size limits judge a child by this before it is trained)."""
    reset_keras()
    try:
        return _proxy_network(genotype, proxy, *proxy_shape(proxy), fused_batch_norm=True)[1]
    finally:
        reset_keras()


def _median_ms(seconds: list[float]) -> float | None:
    return 1000.0 * statistics.median(seconds) if seconds else None


def inference_function(model: keras.Model, input_shape: tuple[int, ...]):
    """The model's inference pass traced once for any batch size: batch-1 latency and evaluation
    share the trace (an eager call costs 20x the graph's at batch 1 on CPU: Python per op)."""
    with graph_options(GRAPPLER_OFF):
        return tf.function(lambda x: model(x, training=False), autograph=False,
                           input_signature=[tf.TensorSpec([None, *input_shape], tf.float32)])


def batch1_latency_ms(infer, image: tf.Tensor) -> float:
    """Median of LATENCY_REPEATS inference calls at batch 1, after one warm-up (the trace)."""
    with graph_options(GRAPPLER_OFF):
        infer(image).numpy()
        times = []
        for _ in range(LATENCY_REPEATS):
            t = time.perf_counter()
            infer(image).numpy()
            times.append(time.perf_counter() - t)
    return _median_ms(times)


def _fixed_steps(state_dir: str | None) -> tuple[int | None, float | None]:
    """The step count (and step time) a --train_seconds trial calibrated before: a re-issued trial
    trains to it."""
    path = state_dir and os.path.join(state_dir, STEPS_FILE)
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            recorded = json.load(f)
        return int(recorded["train_steps"]), recorded.get("calibration_step_ms")
    return None, None


def _record_steps(state_dir: str | None, steps: int, step_ms: float) -> None:
    if state_dir:
        os.makedirs(state_dir, exist_ok=True)
        temp = os.path.join(state_dir, STEPS_FILE + ".tmp")
        with open(temp, "w", encoding="utf-8") as f:
            json.dump({"train_steps": steps, "calibration_step_ms": step_ms}, f)
        os.replace(temp, os.path.join(state_dir, STEPS_FILE))


def _train(genotype: NasNetGenotype, proxy: ProxyConfig, data, t_start: float, load_seconds: float,
           rungs: RungPlan | None = None, max_latency_ms: float = 0.0, state_dir: str | None = None
           ) -> dict[str, float]:
    # Keras's own batch norm in 16-bit compute: the fused layer is written for float32
    model, size = _proxy_network(genotype, proxy, data.input_shape, data.num_classes,
                                 fused_batch_norm=proxy.precision == "float32")
    infer = inference_function(model, data.input_shape)
    first_image = next(iter(eval_pipeline(data.x_val[:1], data.y_val[:1], 1)))[0]
    t_latency = time.perf_counter()
    size["latency_ms"] = batch1_latency_ms(infer, first_image)
    size["latency_seconds"] = time.perf_counter() - t_latency  # the inference trace (evaluation reuses it) and calls
    if max_latency_ms and size["latency_ms"] > max_latency_ms:
        return {"val_accuracy": math.nan, **size, "load_seconds": load_seconds,
                "setup_seconds": time.perf_counter() - t_start}
    steps_per_epoch = len(data.x_train) // proxy.batch_size
    timed = proxy.train_seconds > 0 and rungs is None
    total_steps, calibration_ms = _fixed_steps(state_dir) if timed else (None, None)
    ends = list(rungs.epochs) if rungs else [proxy.epochs if not timed else 1 << 30]
    schedule = RestartingCosine(proxy.learning_rate, total_steps or steps_per_epoch * min(ends[0], 1 << 20),
                                hold=CALIBRATION_STEPS + 1 if timed else 0)
    optimizer = MomentumSGD(model.trainable_variables, schedule, proxy.momentum)  # before the trace
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    loss_scale = DynamicLossScale() if proxy.precision == "mixed_float16" else None

    @tf.function(autograph=False)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, tf.cast(model(x, training=True), tf.float32))
            scaled = loss * loss_scale.scale if loss_scale else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        if loss_scale:
            loss_scale.apply(grads, optimizer.apply)
        else:
            optimizer.apply(grads)
        return loss

    def eval_step(x, y, w):
        logits = tf.cast(infer(x), tf.float32)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), y), tf.float32)
        losses = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
        return tf.reduce_sum(correct * w), tf.reduce_sum(losses * w)

    eval_batch = min(EVAL_BATCH, len(data.x_val))
    checkpoint = tf.train.Checkpoint(weights=[w.value for w in model.weights],
                                     momentum=optimizer.accumulators) if rungs and rungs.checkpoint_dir else None

    setup_seconds = time.perf_counter() - t_start
    first_step_seconds = 0.0
    step_seconds: list[float] = []  # steady steps (the first, traced one excluded)
    done_epochs, first_rung, reported = 0, 0, []
    if checkpoint is not None and rungs.start_rung:
        done_epochs, reported = restore_rung(checkpoint, rungs.checkpoint_dir)
        first_rung = len(reported)
        for metrics in reported[rungs.start_rung:]:  # finished, but the driver ended before it heard
            rungs.report({**metrics, "from_checkpoint": True})  # reported again, not trained again
    restored_epochs = done_epochs  # from a checkpoint: not trained again
    metrics: dict[str, float] = reported[-1] if reported else {}
    try:
        with graph_options(GRAPPLER_OFF):
            for rung in range(first_rung, len(ends)):
                epochs = ends[rung] - done_epochs
                schedule.steps.assign(float(total_steps or steps_per_epoch * min(epochs, 1 << 20)))
                optimizer.iterations.assign(0)
                # the time limit starts after the data is in memory, and again at each rung
                t_train = time.perf_counter()
                deadline = t_train + proxy.timeout_s if proxy.timeout_s else math.inf
                train_ds = train_pipeline(data.x_train, data.y_train, proxy.batch_size, proxy.seed + done_epochs,
                                          proxy.spec.augment)
                rung_steps = 0
                for epoch in range(done_epochs, ends[rung]):
                    loss_sum, epoch_steps = tf.zeros(()), 0
                    for step, (x, y) in enumerate(train_ds):
                        t_step = time.perf_counter()
                        loss_sum += train_step(x, y)
                        if not first_step_seconds:  # this process's first step of the model: its trace
                            first_step_seconds = time.perf_counter() - t_step
                        else:
                            step_seconds.append(time.perf_counter() - t_step)
                        rung_steps, epoch_steps = rung_steps + 1, epoch_steps + 1
                        if time.perf_counter() > deadline:
                            raise CandidateFailed(f"timeout: over {proxy.timeout_s:g} s in epoch {epoch}")
                        if timed and total_steps is None and len(step_seconds) == CALIBRATION_STEPS:
                            calibration_ms = _median_ms(step_seconds)
                            total_steps = max(rung_steps + 1, round(1000 * proxy.train_seconds / calibration_ms))
                            # the hold covers the calibration: a trial that reads this count trains alike
                            schedule.steps.assign(float(total_steps))
                            _record_steps(state_dir, total_steps, calibration_ms)
                        if timed and total_steps is not None and rung_steps >= total_steps:
                            break
                    train_loss = float(loss_sum) / max(epoch_steps, 1)
                    if not math.isfinite(train_loss):
                        raise CandidateFailed(f"NaN loss: mean training loss {train_loss} in epoch {epoch}")
                    if timed and total_steps is not None and rung_steps >= total_steps:
                        ends[rung] = epoch + 1
                        break
                train_seconds = time.perf_counter() - t_train
                t_eval = time.perf_counter()
                correct = loss = 0.0
                batch_seconds = []  # of full batches
                for x, y, w in eval_pipeline(data.x_val, data.y_val, eval_batch):
                    t_batch = time.perf_counter()
                    c, l = eval_step(x, y, w)
                    correct, loss = correct + float(c), loss + float(l)
                    if x.shape[0] == eval_batch:
                        batch_seconds.append(time.perf_counter() - t_batch)
                n_val = len(data.x_val)
                traced_here = rung == first_rung  # this call's first step (the trace) fell in this rung
                first = first_step_seconds if traced_here else 0.0
                steady_images = (rung_steps - (1 if traced_here else 0)) * proxy.batch_size
                metrics = {
                    "val_accuracy": correct / n_val,
                    "validation_images": n_val,
                    "train_images": len(data.x_train),
                    "val_loss": loss / n_val,
                    "train_loss": train_loss,
                    **size,
                    "load_seconds": load_seconds,
                    "setup_seconds": setup_seconds,
                    "first_step_seconds": first_step_seconds,
                    "train_seconds": train_seconds,
                    "eval_seconds": time.perf_counter() - t_eval,
                    "images_per_sec": steady_images / max(train_seconds - first, 1e-9),
                    "step_ms": _median_ms(step_seconds),
                    "latency_ms_batch": _median_ms(batch_seconds),
                    "eval_batch": eval_batch,
                }
                if timed:
                    metrics.update(train_steps=rung_steps, calibration_step_ms=calibration_ms,
                                   epochs=rung_steps / steps_per_epoch)
                metrics = {k: v for k, v in metrics.items() if v is not None}
                done_epochs = ends[rung]
                if rungs is not None:
                    metrics.update(rung=rung, epochs=done_epochs, seconds_per_epoch=train_seconds / epochs,
                                   restored_epochs=restored_epochs)
                    if checkpoint is not None:
                        save_rung(checkpoint, rungs.checkpoint_dir, rung, done_epochs, reported + [metrics])
                    reported.append(metrics)
                    rungs.report(metrics)  # returns when the trial goes on
    except tf.errors.ResourceExhaustedError as err:
        raise CandidateFailed(f"out of memory: {err.message.splitlines()[0]}") from None
    del model, optimizer, train_step, eval_step, infer, checkpoint
    return metrics


_TPU_STRATEGIES: dict[str, tf.distribute.Strategy] = {}


def tpu_strategy(tpu: str) -> tf.distribute.Strategy:
    """A TPUStrategy over `tpu` ("local": this worker's own chips), connected once per process."""
    from trainer.train import make_strategy  # only TPU trials need full training's module

    if tpu not in _TPU_STRATEGIES:
        _TPU_STRATEGIES[tpu] = make_strategy(tpu)
    return _TPU_STRATEGIES[tpu]


def train_with_strategy(genotype: NasNetGenotype, proxy: ProxyConfig, data, strategy: tf.distribute.Strategy
                        ) -> dict[str, float]:
    """The proxy recipe through Keras's fit under `strategy` (TPU trials: Keras does the
    cross-replica work that the one-device loop above leaves out): SGD with Nesterov momentum and
    cosine decay, one compiled call per epoch. Its first-step figure is the first epoch's."""
    if proxy.batch_size % strategy.num_replicas_in_sync:
        raise ValueError(f"proxy batch_size {proxy.batch_size}: must be a multiple of the "
                         f"{strategy.num_replicas_in_sync} replicas")
    t_start = time.perf_counter()
    steps_per_epoch = len(data.x_train) // proxy.batch_size
    with strategy.scope():
        model, size = _proxy_network(genotype, proxy, data.input_shape, data.num_classes, fused_batch_norm=False)
        schedule = keras.optimizers.schedules.CosineDecay(proxy.learning_rate, steps_per_epoch * proxy.epochs)
        optimizer = keras.optimizers.SGD(schedule, momentum=proxy.momentum, nesterov=True)
        if proxy.precision == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      weighted_metrics=["accuracy"], steps_per_execution=steps_per_epoch)
    train_ds = train_pipeline(data.x_train, data.y_train, proxy.batch_size, proxy.seed, proxy.spec.augment)
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
    val = model.evaluate(eval_pipeline(data.x_val, data.y_val, proxy.batch_size), verbose=0, return_dict=True)
    steady_images = (steps_per_epoch * (proxy.epochs - 1)) * proxy.batch_size
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
