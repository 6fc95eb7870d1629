"""A candidate's training on one device: a plain tf.function step instead of `model.fit`, with
the cheapest first step measured (benchmarks/first_step.py; tables in benchmarks/README.md), then
evaluation and the metrics a trial reports, rung by rung.

Costs measured here: latency at batch 1 (before training; a candidate over `max_latency_ms` is
reported with its figures, untrained), latency at the evaluation batch (median over the full
validation batches, the accuracy and loss ops included) and the steady-state training step time
(median, each call's first step excluded). With `proxy.train_seconds` a candidate trains for that
long by its own step time: the step count is fixed from the median of its first
`CALIBRATION_STEPS` steps after the first, recorded in the metrics and, with a `state_dir`, in a
file there that a re-issued trial trains to again; the learning rate holds at its peak through
those steps and then follows a cosine over the rest, so both train alike.

With rungs, each rung's extra epochs run their own cosine from the peak learning rate (a warm
restart); at each rung the loop evaluates, checkpoints (trainer/rung_state.py) and hands the
metrics to `rungs.report`, which returns when the trial may go on. A trial resumed from its
checkpoint re-reports the rungs it finished without training them again. Candidate failures (NaN
loss, out of memory, timeout) raise `CandidateFailed`. This module must not import Ray.

With `proxy.target_accuracy` the clock is `amoeba promote`'s (DAWNBench's): training and its
evaluations, to the end of the first evaluation at or over the target (`target_clock` steady: at
the median step and evaluation); a hit is one under `target_seconds` on that clock, which stops the
candidate once past it (core/proxy_config.py scores hits and misses), as the search's own stops do:
past its incumbent's time (`stop_after_s`; no hit after it) or under its curve bound (`stop_below`;
`stop_reason` says which). `proxy.calibration` runs alike with no target and no stop. With a `state_dir` the loop keeps a progress file there
(`StepProgress`), which the search's progress line reads.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import statistics
import time
from typing import Any, Callable

import keras
import tensorflow as tf

from core.proxy_config import ProxyConfig
from trainer.candidate_network import batch1_latency, inference_function, median_ms, proxy_network
from core.trial_state import StepProgress, fixed_steps, record_steps
from trainer.candidate_step import StepRecipe, eval_step_function, train_step_function
from trainer.fast_recipe import Lookahead, ParameterGroups, WeightAverage, freeze_step
from trainer.fused_optimizer import MomentumSGD, RestartingCosine, RestartingTriangle
from trainer.proxy_data import eval_pipeline, train_pipeline
from trainer.rung_state import RungPlan, restore_rung, rung_checkpoint, save_rung
from trainer.worker_setup import GRAPPLER_OFF, graph_options

EVAL_BATCH = 512  # validation images per evaluation call, at most
CALIBRATION_STEPS = 5  # steady steps whose median fixes a --train_seconds candidate's step count
ALL_EPOCHS = 1 << 30  # a --train_seconds candidate's epochs: it stops at its step count


class CandidateFailed(Exception):
    """The candidate could not be evaluated: the search records the reason and goes on."""


class ProxyTraining:
    """The training state of one candidate in one call: its step, schedule, optimizer, the epochs
    each rung ends at (`ends`; one entry without rungs), and the step timings so far."""

    def __init__(self, model: keras.Model, infer: Callable, data: Any, proxy: ProxyConfig,
                 rungs: RungPlan | None, state_dir: str | None) -> None:
        self.data, self.proxy, self.state_dir = data, proxy, state_dir
        self.timed = proxy.train_seconds > 0 and rungs is None
        self.targeted = (proxy.target_accuracy > 0 or proxy.calibration) and rungs is None
        self.total_steps, self.calibration_ms = fixed_steps(state_dir) if self.timed else (None, None)
        self.ends = list(rungs.epochs) if rungs else [ALL_EPOCHS if self.timed else proxy.epochs]
        self.steps_per_epoch = len(data.x_train) // proxy.train_batch_size
        self.schedule = self._schedule()
        self.optimizer = MomentumSGD(model.trainable_variables, self.schedule, proxy.momentum,  # before the trace
                                     proxy.nesterov)
        self.recipe = self._recipe(model)
        self.train_step = train_step_function(model, self.optimizer, proxy.precision, proxy.weight_decay, self.recipe)
        self.eval_step = eval_step_function(infer, proxy.eval_tta)
        self.eval_batch = min(EVAL_BATCH, len(data.x_val))
        self.progress = StepProgress(state_dir, proxy.train_batch_size)
        self.first_step_seconds = 0.0  # this call's first step: its trace
        self.step_seconds: list[float] = []  # steady steps (the first, traced one excluded)
        self.sorted_steps: list[float] = []  # the same, sorted: the steady clock's median at each step
        # --target_accuracy: evaluated every eval_steps; the curve is (seconds, evaluations included; accuracy)
        self.eval_steps = max(1, round(proxy.epochs_per_eval * self.steps_per_epoch))
        self.t_train, self.stopped = 0.0, False
        self.eval_times: list[float] = []  # each --target_accuracy evaluation's seconds in this rung
        self.curve: list[tuple[float, float]] = []
        self.reached_s: float | None = None
        self.stop_reason = ""  # why a --target_accuracy candidate stopped before its epochs' end
        self.last_evaluation: dict[str, Any] | None = None
        self.evaluated_steps = -1

    def _schedule(self) -> RestartingCosine | RestartingTriangle:
        """The rung's learning rate: the warm-up and cosine, or airbench's triangle."""
        proxy, steps = self.proxy, self._schedule_steps(self.ends[0])
        if proxy.lr_schedule == "triangular":
            return RestartingTriangle(proxy.learning_rate, steps, proxy.lr_start_factor, proxy.lr_peak_at,
                                      proxy.lr_end_factor)
        return RestartingCosine(proxy.learning_rate, steps, hold=CALIBRATION_STEPS + 1 if self.timed else 0,
                                warmup=proxy.lr_warmup_epochs * self.steps_per_epoch)

    def _recipe(self, model: keras.Model) -> StepRecipe | None:
        """The fast recipe's parts of the step, or None for the plain recipe (its step as it was)."""
        proxy = self.proxy
        if not (proxy.label_smoothing or proxy.bn_lr_factor != 1 or proxy.bn_weight_decay or proxy.lookahead_every
                or proxy.whiten_bias_epochs or proxy.ema_decay):
            return None
        groups = ParameterGroups(model, proxy.bn_lr_factor, proxy.bn_weight_decay,  # a stem without whitening:
                                 freeze_step(proxy.whiten_bias_epochs, self.steps_per_epoch),  # no bias to freeze
                                 whitening_required=False)
        lookahead = (Lookahead(model, proxy.lookahead_every, proxy.lookahead_decay, self.schedule.steps)
                     if proxy.lookahead_every else None)
        return StepRecipe(self.data.num_classes, proxy.label_smoothing, groups, lookahead,
                          tf.Variable(0, dtype=tf.int64, trainable=False),
                          WeightAverage(model, proxy.ema_decay) if proxy.ema_decay else None)

    def _schedule_steps(self, epochs: int) -> int:
        return self.total_steps or self.steps_per_epoch * min(epochs, 1 << 20)

    def _steps_done(self, rung_steps: int) -> bool:
        return self.timed and self.total_steps is not None and rung_steps >= self.total_steps

    def train_rung(self, rung: int, done_epochs: int) -> tuple[int, float, float]:
        """Train from `done_epochs` to the rung's end: (steps, last epoch's mean loss, seconds). The
        clock and the time limit start once the training pipeline is built (as `amoeba promote`'s
        clock starts once its iterator is), and again at each rung."""
        self.schedule.steps.assign(float(self._schedule_steps(self.ends[rung] - done_epochs)))
        self.optimizer.iterations.assign(0)
        if self.recipe:  # the step count the whitening bias's freeze counts, and a fresh lookahead average
            self.recipe.global_step.assign(done_epochs * self.steps_per_epoch)
            self.recipe.groups.start()
            if self.recipe.lookahead:
                self.recipe.lookahead.start()
        train_ds = self._pipeline(done_epochs, done_epochs)
        t_train = self.t_train = time.perf_counter()
        self.eval_times = []
        deadline = t_train + self.proxy.timeout_s if self.proxy.timeout_s else math.inf
        rung_steps, train_loss = 0, math.nan
        for epoch in range(done_epochs, self.ends[rung]):
            if self.proxy.augmentation == "airbench" and epoch > done_epochs:  # its flips follow the epoch
                train_ds = self._pipeline(done_epochs, epoch)
            train_loss, rung_steps = self._train_epoch(train_ds, epoch, rung_steps, deadline)
            if self._steps_done(rung_steps) or self.stopped:
                self.ends[rung] = epoch + 1
                break
        self.progress.update(done_epochs * self.steps_per_epoch + rung_steps, self._all_steps(), now=True)
        return rung_steps, train_loss, self._trained_seconds()

    def _pipeline(self, done_epochs: int, epoch: int) -> tf.data.Dataset:
        """The training images of the rung (reshuffled each epoch), or of one epoch with airbench's
        augmentation, whose flips follow the epoch (a dataset each, shuffled by its epoch)."""
        proxy = self.proxy
        airbench = proxy.augmentation == "airbench"
        return train_pipeline(self.data.x_train, self.data.y_train, proxy.train_batch_size,
                              proxy.seed + (epoch if airbench else done_epochs),
                              proxy.spec.augment and proxy.augmentation, epoch=epoch, flip_key=proxy.seed)

    def _all_steps(self) -> int | None:
        """The steps the trial trains at most: to its last rung's end, or a --train_seconds count (None
        until it is calibrated)."""
        return self.total_steps if self.timed else self.steps_per_epoch * self.ends[-1]

    def _trained_seconds(self) -> float:
        """Seconds since the rung's training began, the evaluations of --target_accuracy excluded."""
        return time.perf_counter() - self.t_train - sum(self.eval_times)

    def _train_epoch(self, train_ds: tf.data.Dataset, epoch: int, rung_steps: int, deadline: float
                     ) -> tuple[float, int]:
        """One epoch (or up to a --train_seconds step count): (its mean loss, the rung's steps)."""
        loss_sum, epoch_steps = tf.zeros(()), 0
        for x, y in train_ds:
            t_step = time.perf_counter()
            loss_sum += self.train_step(x, y)
            if not self.first_step_seconds:  # this process's first step of the model: its trace
                self.first_step_seconds = time.perf_counter() - t_step
            else:
                self.step_seconds.append(time.perf_counter() - t_step)
            rung_steps, epoch_steps = rung_steps + 1, epoch_steps + 1
            self.progress.update(epoch * self.steps_per_epoch + epoch_steps, self._all_steps())
            if time.perf_counter() > deadline:
                raise CandidateFailed(f"timeout: over {self.proxy.timeout_s:g} s in epoch {epoch}")
            if self.timed and self.total_steps is None and len(self.step_seconds) == CALIBRATION_STEPS:
                self._calibrate(rung_steps)
            if self._steps_done(rung_steps):
                break
            if self.targeted and self._target_check(rung_steps):
                self.stopped = True
                break
        train_loss = float(loss_sum) / max(epoch_steps, 1)
        if not math.isfinite(train_loss):
            raise CandidateFailed(f"NaN loss: mean training loss {train_loss} in epoch {epoch}")
        return train_loss, rung_steps

    def _calibrate(self, rung_steps: int) -> None:
        """Fix a --train_seconds candidate's step count from its steady steps so far."""
        self.calibration_ms = median_ms(self.step_seconds)
        self.total_steps = max(rung_steps + 1, round(1000 * self.proxy.train_seconds / self.calibration_ms))
        # the hold covers the calibration: a trial that reads this count trains alike
        self.schedule.steps.assign(float(self.total_steps))
        record_steps(self.state_dir, self.total_steps, self.calibration_ms)

    def _seconds_with_evaluations(self) -> float:
        """--target_accuracy's clock: seconds since training began, its evaluations included (the time
        to target `amoeba promote` measures, DAWNBench's)."""
        return time.perf_counter() - self.t_train

    def _target_check(self, rung_steps: int) -> bool:
        """--target_accuracy: evaluate when one is due (or the time is up); whether to stop (at a hit,
        or once the time is up: an evaluation that ends after it is no hit). The calibration's run
        evaluates alike and never stops."""
        if rung_steps % self.eval_steps == 0 or self._time_is_up(rung_steps):
            self._evaluate_on_the_way(rung_steps)
        if self.reached_s is not None:
            self.stop_reason = "target"
        elif self._predicted_miss():
            self.stop_reason = "predicted miss"
        elif self._time_is_up(rung_steps):
            self.stop_reason = ("past the incumbent" if self._limit() < self.proxy.target_seconds
                                else "time limit")
        return bool(self.stop_reason)

    def _predicted_miss(self) -> bool:
        """The search's curve rule (ProxyConfig.stop_below): the latest evaluation's accuracy is under
        its bound, so the candidate is predicted to miss (evolution/target_race.py)."""
        i, bounds = len(self.curve) - 1, self.proxy.stop_below
        return 0 <= i < len(bounds) and self.curve[i][1] < bounds[i]

    def _limit(self) -> float:
        """The candidate's time limit on its clock: target_seconds, or the search's earlier stop past
        its incumbent (ProxyConfig.stop_after_s); 0: none (the calibration's run)."""
        limits = [s for s in (self.proxy.target_seconds, self.proxy.stop_after_s) if s]
        return min(limits) if limits else 0.0

    def _clock(self, rung_steps: int) -> float:
        """--target_accuracy's time after `rung_steps` steps and the evaluations so far: the wall
        seconds, or with target_clock steady, the steps x their median and the evaluations x theirs."""
        if self.proxy.target_clock != "steady":
            return self._seconds_with_evaluations()
        evaluations = len(self.eval_times) * statistics.median(self.eval_times) if self.eval_times else 0.0
        return rung_steps * self._step_median() + evaluations

    def _step_median(self) -> float:
        """The median steady step so far (before one: the first step's), from the steps kept sorted."""
        done = self.sorted_steps
        for seconds in self.step_seconds[len(done):]:
            bisect.insort(done, seconds)
        if not done:
            return self.first_step_seconds
        middle = len(done) // 2
        return done[middle] if len(done) % 2 else (done[middle - 1] + done[middle]) / 2

    def _time_is_up(self, rung_steps: int) -> bool:
        """Whether the candidate's budget, target_seconds, is spent on the clock its hit is judged on
        (with target_clock steady: once a steady step has set the pace, not on the trace); never for
        the calibration's run, which has none."""
        if not self._limit():
            return False
        if self.proxy.target_clock == "steady" and not self.step_seconds:
            return False
        return self._clock(rung_steps) >= self._limit()

    def _evaluate_on_the_way(self, rung_steps: int) -> None:
        evaluation = self.evaluate()
        self.eval_times.append(evaluation["eval_seconds"])
        self.last_evaluation, self.evaluated_steps = evaluation, rung_steps
        at = self._clock(rung_steps)  # at the end of the evaluation
        self.curve.append((at, evaluation["val_accuracy"]))
        within = not self.proxy.stop_after_s or at < self.proxy.stop_after_s  # past it: cannot win, no hit
        if self.reached_s is None and within and self.proxy.reached_target(at, evaluation["val_accuracy"]):
            self.reached_s = at

    def final_evaluation(self, rung_steps: int) -> dict[str, Any]:
        """The evaluation a rung's metrics report: with --target_accuracy the last one on the way
        (a fresh one, on the curve, if training ended between two)."""
        if not self.targeted:
            return self.evaluate()
        if self.evaluated_steps != rung_steps:
            self._evaluate_on_the_way(rung_steps)
        return self.last_evaluation

    def target_metrics(self) -> dict[str, Any]:
        """seconds_to_target, the objective (ProxyConfig.seconds_to_target): the time to the target
        accuracy (time_to_target_s), or for a candidate that missed it, at least target_seconds; and
        target_curve (evolution/objectives.py's CURVE_KEY), each evaluation's [seconds, accuracy],
        which `amoeba results --at_target` scores again at a lower target without training."""
        best = max(accuracy for _, accuracy in self.curve)
        curve = {"best_val_accuracy": best, "evaluations": len(self.curve),
                 "target_curve": [list(point) for point in self.curve]}
        if self.proxy.calibration:  # no target: its curve is scored by the search it calibrates
            return curve
        return {"seconds_to_target": self.proxy.seconds_to_target(self.reached_s, best),
                "time_to_target_s": self.reached_s, "stop_reason": self.stop_reason or "epochs", **curve}

    def evaluate(self) -> dict[str, float | None]:
        """Accuracy and mean loss on the validation images (of the averaged weights with
        --ema_decay), the latency at the evaluation batch (median over the full batches) and the time
        it all took."""
        t_eval = time.perf_counter()
        correct = loss = 0.0
        batch_seconds = []  # of full batches
        average = self.recipe.average if self.recipe else None
        with average.in_place() if average else contextlib.nullcontext():
            for x, y, w in eval_pipeline(self.data.x_val, self.data.y_val, self.eval_batch):
                t_batch = time.perf_counter()
                c, l = self.eval_step(x, y, w)
                correct, loss = correct + float(c), loss + float(l)
                if x.shape[0] == self.eval_batch:
                    batch_seconds.append(time.perf_counter() - t_batch)
        n_val = len(self.data.x_val)
        return {"val_accuracy": correct / n_val, "val_loss": loss / n_val,
                "latency_ms_batch": median_ms(batch_seconds), "eval_seconds": time.perf_counter() - t_eval}

    def rung_metrics(self, traced_here: bool, rung_steps: int, train_loss: float, train_seconds: float,
                     evaluation: dict[str, Any], before: dict[str, Any]) -> dict[str, float]:
        """What the trial reports after a rung (or its one training): `before` holds the size, the
        batch-1 latency and the load and setup times; `traced_here`: this rung took the first step."""
        first = self.first_step_seconds if traced_here else 0.0
        steady_images = (rung_steps - (1 if traced_here else 0)) * self.proxy.train_batch_size
        metrics = {
            "val_accuracy": evaluation["val_accuracy"],
            "validation_images": len(self.data.x_val),
            "train_images": len(self.data.x_train),
            "val_loss": evaluation["val_loss"],
            "train_loss": train_loss,
            **before,
            "first_step_seconds": self.first_step_seconds,
            "train_seconds": train_seconds,
            "eval_seconds": evaluation["eval_seconds"],
            "images_per_sec": steady_images / max(train_seconds - first, 1e-9),
            "step_ms": median_ms(self.step_seconds),
            "latency_ms_batch": evaluation["latency_ms_batch"],
            "eval_batch": self.eval_batch,
        }
        if self.timed:
            metrics.update(train_steps=rung_steps, calibration_step_ms=self.calibration_ms,
                           epochs=rung_steps / self.steps_per_epoch)
        if self.targeted:
            metrics.update(self.target_metrics(), train_steps=rung_steps, epochs=rung_steps / self.steps_per_epoch)
        return {k: v for k, v in metrics.items() if v is not None}


def train_through_rungs(run: ProxyTraining, rungs: RungPlan | None, checkpoint: tf.train.Checkpoint | None,
                        before: dict[str, Any]) -> dict[str, float]:
    """Train rung by rung (one stretch without rungs): with rungs, from the last checkpoint, each
    rung checkpointed and reported. Returns the last rung's metrics."""
    done_epochs, first_rung, reported = 0, 0, []
    if checkpoint is not None and rungs.start_rung:
        done_epochs, reported = restore_rung(checkpoint, rungs.checkpoint_dir)
        first_rung = len(reported)
        for metrics in reported[rungs.start_rung:]:  # finished, but the driver ended before it heard
            rungs.report({**metrics, "from_checkpoint": True})  # reported again, not trained again
    restored_epochs = done_epochs  # from a checkpoint: not trained again
    metrics: dict[str, float] = reported[-1] if reported else {}
    for rung in range(first_rung, len(run.ends)):
        epochs = run.ends[rung] - done_epochs
        rung_steps, train_loss, train_seconds = run.train_rung(rung, done_epochs)
        metrics = run.rung_metrics(rung == first_rung, rung_steps, train_loss, train_seconds,
                                   run.final_evaluation(rung_steps), before)
        done_epochs = run.ends[rung]
        if rungs is not None:
            metrics.update(rung=rung, epochs=done_epochs, seconds_per_epoch=train_seconds / epochs,
                           restored_epochs=restored_epochs)
            if checkpoint is not None:
                save_rung(checkpoint, rungs.checkpoint_dir, rung, done_epochs, reported + [metrics])
            reported.append(metrics)
            rungs.report(metrics)  # returns when the trial goes on
    return metrics


def train_on_one_device(genotype: Any, proxy: ProxyConfig, data: Any, t_start: float, load_seconds: float,
                        rungs: RungPlan | None = None, max_latency_ms: float = 0.0, state_dir: str | None = None,
                        space: str = "nasnet") -> dict[str, float]:
    """Build the candidate, measure it, train and evaluate it (rung by rung with `rungs`); over
    `max_latency_ms` at batch 1 its size and latency only, untrained."""
    # Keras's own batch norm in 16-bit compute: the fused layer is written for float32
    model, size = proxy_network(genotype, proxy, data.input_shape, data.num_classes,
                                fused_batch_norm=proxy.precision == "float32", space=space,
                                train_images=data.x_train)
    infer = inference_function(model, data.input_shape)
    size.update(batch1_latency(infer, data, model, proxy.latency_runtime))
    if max_latency_ms and size["latency_ms"] > max_latency_ms:
        return {"val_accuracy": math.nan, **size, "load_seconds": load_seconds,
                "setup_seconds": time.perf_counter() - t_start}
    run = ProxyTraining(model, infer, data, proxy, rungs, state_dir)
    checkpoint = (rung_checkpoint(model, run.optimizer, run.recipe.average if run.recipe else None)
                  if rungs and rungs.checkpoint_dir else None)
    before = {**size, "load_seconds": load_seconds, "setup_seconds": time.perf_counter() - t_start}
    try:
        with graph_options(GRAPPLER_OFF):
            return train_through_rungs(run, rungs, checkpoint, before)
    except tf.errors.ResourceExhaustedError as err:
        raise CandidateFailed(f"out of memory: {err.message.splitlines()[0]}") from None
