"""Full training: one recipe for every model, from a laptop CPU to a TPU.

A distribution strategy (TPUStrategy for --tpu, MirroredStrategy over visible GPUs, else the
default CPU strategy), `iterations_per_loop` steps per tf.function call, checkpoints in
`model_dir/checkpoints` (training resumes from the latest one, losing at most the steps since it),
evaluation every `steps_per_eval` steps (or `epochs_per_eval` epochs), each appended to
`model_dir/eval_history.jsonl` with the training wall time to it (kept in the checkpoint, so it
adds up over resumed runs), TensorBoard summaries in `model_dir/train` and `model_dir/eval`. An
evaluation (and an export) uses the moving average of the weights when `ema_decay` keeps one, and
averages the logits of the `eval_tta` views (trainer/evaluation.py); the final evaluation keeps
which images it got right in `model_dir/eval_correct.json` (core/correct_images.py). The scoring
and the export are trainer/train_scoring.py's, the run's length and strategy trainer/train_plan.py's.
This module must not parse flags or know about search.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from core import storage
from core.proxy_config import PRECISIONS
from core.train_config import PROGRESS, TrainConfig, config_from_saved
from trainer.batch_norm import set_batch_norm
from trainer.evaluation import per_image_correct, top1_right, tta_logits
from trainer.fast_recipe import Lookahead, ParameterGroups, freeze_step, per_example_loss
from trainer.models import build_model, init_from_data, model_report, model_spec, split_outputs
from trainer.nasnet import set_training_progress
from trainer.progress_file import ProgressFile
from trainer.records import read_metadata, train_dataset
from trainer.schedules import WarmupDecay, make_optimizer
from trainer.train_scoring import Scoring
from trainer.train_plan import (check_checkpoint_state, make_strategy, next_multiple as _next_multiple,
                                steps_per_eval, total_steps, trained_split)

__all__ = ["TrainConfig", "Trainer", "load_trainer", "make_strategy", "steps_per_eval", "total_steps"]

log = logging.getLogger(__name__)


class Trainer(Scoring):
    """Builds the model, optimizer and checkpoint under the strategy; runs training (evaluation and
    export: Scoring, trainer/train_scoring.py)."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self.info = trained_split(read_metadata(config.data), config)  # less the validation_images held out
        if config.label_offset is not None and config.label_offset != self.info.label_offset:
            raise ValueError(
                f"--label_offset={config.label_offset}, but {config.data} records label_offset "
                f"{self.info.label_offset}: it would shift every label (re-index the data with "
                "`amoeba prepare --index_tfrecords`)")
        self.label_offset = self.info.label_offset
        self.total_steps = total_steps(config, self.info)
        self.steps_per_eval = steps_per_eval(config, self.info)
        self.strategy = make_strategy(config.tpu)
        replicas = self.strategy.num_replicas_in_sync
        if config.train_batch_size % replicas or config.eval_batch_size % replicas:
            raise ValueError(f"batch sizes must be multiples of the {replicas} replicas")
        keras.utils.set_random_seed(config.seed)
        steps_per_epoch = self.info.num_train_images / config.train_batch_size
        self.schedule = WarmupDecay(
            config.learning_rate, steps_per_epoch, self.total_steps, config.lr_schedule, config.lr_decay_value,
            config.lr_decay_epochs, config.lr_warmup_epochs, config.lr_start_factor, config.lr_peak_at,
            config.lr_end_factor,
        )
        self.model, self.optimizer = self._build(config)
        with self.strategy.scope():
            self.groups = ParameterGroups(self.model, config.bn_lr_factor, config.bn_weight_decay,
                                          freeze_step(config.whiten_bias_epochs, steps_per_epoch),
                                          whitening_required=False)  # one recipe for all: a net without one trains as is
            self.lookahead = (Lookahead(self.model, config.lookahead_every, config.lookahead_decay, self.total_steps)
                              if config.lookahead_every else None)
        # training wall time so far (seconds), saved with the weights: it adds up over resumed runs (a
        # host variable, outside the strategy: float64 need not exist on the accelerator)
        self.wall_seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False)
        extra = {"lookahead": self.lookahead.trackable()} if self.lookahead else {}
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                              wall_seconds=self.wall_seconds, **extra)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, storage.join(config.model_dir, "checkpoints"), max_to_keep=3
        )
        self.decayed = [v for v in self.model.trainable_variables if len(v.shape) > 1]
        self._eval_data = self._validation_data = None
        self.correct: dict[str, np.ndarray] = {}  # the last evaluation's right and wrong, per split
        self.loops: list[tuple[float, float]] = []  # this run's training loops: (images, seconds)
        self._restored: str | None = None

    def _build(self, config: TrainConfig) -> tuple[keras.Model, keras.optimizers.Optimizer]:
        """The model and its optimizer under the strategy, in the precision's Keras dtype policy (a
        global setting, restored after: the process may build other models later)."""
        before = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_global_policy(PRECISIONS[config.precision])
        try:
            with self.strategy.scope():
                model = build_model(model_spec(config, self.info.num_classes))
                if tf.train.latest_checkpoint(storage.join(config.model_dir, "checkpoints")) is None:
                    init_from_data(model, config)  # weights a family computes from the training images (airbench94)
                set_batch_norm(model, config.bn_momentum, config.bn_epsilon)
                optimizer = make_optimizer(config.optimizer, self.schedule, config.momentum, config.nesterov,
                                           config.ema_decay)
                if config.precision == "mixed_float16":
                    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
                optimizer.build(model.trainable_variables)
            return model, optimizer
        finally:
            keras.mixed_precision.set_global_policy(before)

    # --- steps ---------------------------------------------------------------------------------

    def _per_example_loss(self, labels, logits):
        return per_example_loss(labels, logits, self.info.num_classes, self.config.label_smoothing)

    def _train_step(self, images, labels):
        replicas = self.strategy.num_replicas_in_sync
        with tf.GradientTape() as tape:
            logits, aux_logits = split_outputs(self.model(images, training=True))
            per_example = self._per_example_loss(labels, logits)
            total = per_example
            if aux_logits is not None:
                total = per_example + self.config.aux_weight * self._per_example_loss(labels, aux_logits)
            loss = tf.nn.compute_average_loss(total, global_batch_size=self.config.train_batch_size)
            if self.config.weight_decay > 0:
                l2 = tf.add_n([tf.nn.l2_loss(tf.cast(v, tf.float32)) for v in self.decayed])
                loss += self.config.weight_decay * l2 / replicas
            loss += self.groups.decay_loss() / replicas
            scaled = self.optimizer.scale_loss(loss)  # the loss scale of mixed_float16, else 1
        variables = self.model.trainable_variables
        gradients = self.groups.scale_gradients(tape.gradient(scaled, variables))
        self.optimizer.apply_gradients(zip(gradients, variables))
        return self._sums(labels, logits, per_example, tf.ones_like(per_example))

    def _sums(self, labels, logits, per_example, weights):
        logits = tf.cast(logits, tf.float32)
        top1 = tf.cast(top1_right(labels, logits), tf.float32)  # ties: the first class, as an export serves
        top5 = tf.cast(tf.math.in_top_k(labels, logits, min(5, self.info.num_classes)), tf.float32)
        return tf.stack([tf.reduce_sum(per_example * weights), tf.reduce_sum(top1 * weights),
                         tf.reduce_sum(top5 * weights), tf.reduce_sum(weights)])

    def _eval_step(self, images, labels, weights):
        logits = tta_logits(lambda views: split_outputs(self.model(views, training=False))[0], images,
                            self.config.eval_tta)
        # plain cross-entropy, as the search's (trainer/candidate_step.py): label smoothing regularises training
        loss = per_example_loss(labels, logits, self.info.num_classes, 0.0)
        return self._sums(labels, logits, loss, weights), per_image_correct(labels, logits, weights)

    def _compile(self):
        strategy = self.strategy

        @tf.function
        def train_loop(iterator, steps):
            totals = tf.zeros(4)
            for _ in tf.range(steps):
                per_replica = strategy.run(self._train_step, args=next(iterator))
                totals += strategy.reduce("SUM", per_replica, axis=None)
                self.groups.after_step(self.optimizer.iterations)
                if self.lookahead is not None:
                    self.lookahead.after_step(self.optimizer.iterations)
                self.groups.after_sync()
            return totals

        @tf.function
        def eval_batch(batch):  # the batch's sums, and each row right or wrong in the batch's order
            sums, correct = strategy.run(self._eval_step, args=batch)
            return strategy.reduce("SUM", sums, axis=None), strategy.gather(correct, axis=0)

        return train_loop, eval_batch

    # --- the run -------------------------------------------------------------------------------

    def restore(self) -> str | None:
        """Load the latest checkpoint of model_dir, if any; returns its path.

        Raises ValueError when the checkpoint is of another model, or was trained with other labels.
        """
        latest = self.manager.latest_checkpoint
        if not latest or latest == self._restored:
            return latest
        saved_path = storage.join(self.config.model_dir, "train_config.json")
        if storage.exists(saved_path):
            saved = storage.read_json(saved_path).get("labels")
            if saved is not None and list(saved) != list(self.info.labels):
                raise ValueError(
                    f"{self.config.data} has labels {list(self.info.labels)[:5]}..., but {self.config.model_dir} "
                    f"was trained with {saved[:5]}...: prepare the new data with "
                    f"--labels={storage.join(self.config.model_dir, 'labels.txt')}, or use a new --model_dir")
        saved_names = {name for name, _ in tf.train.list_variables(latest)}
        checkpoint = self.checkpoint
        if not any(name.startswith("wall_seconds/") for name in saved_names):  # written before it was kept
            checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
        try:
            checkpoint.restore(latest).assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.InvalidArgumentError) as err:
            raise ValueError(f"{latest} does not fit this model and optimizer (another --model, size, precision "
                             f"or --ema_decay?); use a new --model_dir ({str(err).splitlines()[0]})") from None
        self._restored = latest
        return latest

    def write_config(self) -> None:
        """train_config.json and labels.txt in the model dir: what `amoeba evaluate` and a resumed run read."""
        config = self.config
        storage.write_json(storage.join(config.model_dir, "train_config.json"),
                           {**config.to_json(), "total_steps": self.total_steps,
                            "labels": list(self.info.labels), **model_report(self.model)})
        storage.write_text(storage.join(config.model_dir, "labels.txt"), "\n".join(self.info.labels) + "\n")

    def train(self) -> dict[str, Any]:
        """Train to `total_steps` (resuming from the latest checkpoint); return the last eval."""
        config = self.config
        saved_path = storage.join(config.model_dir, "train_config.json")
        if self.manager.latest_checkpoint and storage.exists(saved_path):
            check_checkpoint_state(config, storage.read_json(saved_path))
        latest = self.restore()
        if latest:
            print(f"resuming from {latest} at step {int(self.optimizer.iterations)}", flush=True)
        self.write_config()
        train_loop, eval_batch = self._compile()
        eval_batch.get_concrete_function(self._eval_dataset().element_spec)  # traced off the clock, as the search's
        step = int(self.optimizer.iterations)
        # A resumed run draws new batches: the data order is seeded by the step it resumes at.
        data = train_dataset(config.data, config.train_batch_size, config.image_size,
                             label_offset=self.label_offset, seed=config.seed + step, cache=config.cache,
                             augmentation=config.augmentation, cutout=config.cutout, flip_key=config.seed,
                             first_example=step * config.train_batch_size, held_out=config.validation_images)
        self.groups.start()
        iterator = iter(self.strategy.experimental_distribute_dataset(data))
        progress = ProgressFile(storage.join(config.model_dir, PROGRESS), self.optimizer.iterations, self.total_steps)
        try:
            return self._train_loop(train_loop, eval_batch, iterator, step, progress)
        finally:
            progress.close()

    def _train_loop(self, train_loop, eval_batch, iterator, step: int, progress: "ProgressFile") -> dict[str, Any]:
        config = self.config
        train_writer = tf.summary.create_file_writer(storage.join(config.model_dir, "train"))
        eval_writer = tf.summary.create_file_writer(storage.join(config.model_dir, "eval"))
        every_steps, every_eval = config.save_checkpoints_steps, self.steps_per_eval
        last_save = time.monotonic()
        result: dict[str, Any] = {}
        while step < self.total_steps:
            boundaries = [self.total_steps, _next_multiple(step, config.iterations_per_loop)]
            boundaries += [_next_multiple(step, n) for n in (every_steps, every_eval) if n]
            steps = min(boundaries) - step
            set_training_progress(self.model, step / self.total_steps)
            t0 = time.perf_counter()
            loss, top1, top5, n = (float(t) for t in train_loop(iterator, tf.constant(steps)))
            seconds = time.perf_counter() - t0
            self.loops.append((n, seconds))
            step = int(self.optimizer.iterations)  # a skipped mixed_float16 step is not a step
            with train_writer.as_default(step=step):
                for name, value in (("loss", loss / n), ("top1", top1 / n), ("top5", top5 / n),
                                    ("learning_rate", float(self.schedule(step))), ("images_per_sec", n / seconds)):
                    tf.summary.scalar(name, value)
            print(f"step {step}/{self.total_steps}: loss {loss / n:.4f} top1 {top1 / n:.4f} "
                  f"({n / seconds:.1f} images/s)", flush=True)
            at_eval = bool(every_eval and step % every_eval == 0) or step == self.total_steps
            due = step % every_steps == 0 if every_steps else time.monotonic() - last_save >= config.save_checkpoints_secs
            # the clock: training loops and evaluations (DAWNBench's, and the search's); not the validation
            # (what promote chooses by, not part of the race), checkpoints, summaries or records
            self.wall_seconds.assign_add(seconds)
            if at_eval:
                t_eval = time.perf_counter()
                result = self.evaluate(eval_batch)
                self.wall_seconds.assign_add(time.perf_counter() - t_eval)
                result.update(self.validate(eval_batch))
                self._record_evaluation(result)  # before the checkpoint: a crash between repeats a row, never loses one
                self._keep_correct(result)
            if due or at_eval:  # a checkpoint costs real time (resnet18: 0.23 s), so not every loop
                self.manager.save(checkpoint_number=step)
                last_save = time.monotonic()
            if at_eval:
                with eval_writer.as_default(step=step):
                    for name in ("loss", "top1", "top5"):
                        tf.summary.scalar(name, result[name])
                storage.write_json(storage.join(config.model_dir, "eval_results.json"), result)
                print(f"eval at step {step}: top1 {result['top1']:.4f} top5 {result['top5']:.4f} "
                      f"loss {result['loss']:.4f}", flush=True)
            # what a watcher reads (amoeba promote's progress lines): one small file, replaced at most
            # every PROGRESS_EVERY_S (a gs:// object takes about one write a second)
            progress.update(at_eval or step == self.total_steps, phase="training", step=step, loss=loss / n,
                            top1=top1 / n, images_per_sec=n / seconds, eval_top1=result.get("top1"),
                            wall_seconds=float(self.wall_seconds.numpy()))
        train_writer.flush()
        eval_writer.flush()
        if not result:  # already trained to total_steps: report the last evaluation again
            progress.update(True, phase="training", step=step)  # not tracing: nothing was left to run
            result = {**self.evaluate(eval_batch), **self.validate(eval_batch)}
            self._keep_correct(result)
            if not any(row["step"] == result["step"] for row in self.evaluations()):
                self._record_evaluation(result)  # lost to a crash before this run: recorded now
        return result

    def images_per_sec(self) -> float | None:
        """Training images a second of this run's training loops, the first (its trace) left out where
        there are others, as the search's (trainer/candidate_loop.py): no evaluation, checkpoint or record."""
        loops = self.loops[1:] or self.loops
        seconds = sum(s for _, s in loops)
        if not seconds:  # nothing trained in this run (already trained): steps over the clock, as before
            wall = float(self.wall_seconds.numpy())
            return int(self.optimizer.iterations) * self.config.train_batch_size / wall if wall else None
        return sum(n for n, _ in loops) / seconds


def load_trainer(model_dir: str, data: str | None = None) -> Trainer:
    """The trainer of an earlier `amoeba train` run, restored from its latest checkpoint.

    `data` replaces the prepared data dir it was trained on (e.g. to evaluate on other data).
    """
    path = storage.join(model_dir, "train_config.json")
    if not storage.exists(path):
        raise FileNotFoundError(f"{model_dir}: no train_config.json; is it an `amoeba train` model_dir?")
    saved = storage.read_json(path)
    other = {"data": data, "validation_images": 0} if data and data != saved.get("data") else {}  # nothing held out of it
    config = config_from_saved(saved, model_dir=model_dir, **other)
    trainer = Trainer(config)
    if not trainer.restore():
        raise FileNotFoundError(f"{model_dir}: no checkpoint to load")
    return trainer
