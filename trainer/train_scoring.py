"""How a full training run's model is scored and exported: the evaluation split, the validation
images held out of the training split, each evaluation's row in `model_dir/eval_history.jsonl`, the
final evaluation's right and wrong images (core/correct_images.py), and the export with each file's
own top-1. `Scoring` is a part of trainer/train.py's Trainer, whose model, optimizer, strategy,
config and compiled steps it uses. Must not train.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Sequence

import numpy as np

from core import storage
from core.correct_images import write_correct
from core.export_formats import check_precision
from core.train_config import EVAL_HISTORY
from trainer.evaluation import averaged_weights, score
from trainer.export import export_model
from trainer.export_accuracy import exported_top1, with_top1
from trainer.records import eval_dataset, validation_dataset

PARITY_IMAGES = 256  # evaluation images each exported file is checked on


class Scoring:
    """Trainer's evaluation and export (trainer/train.py): the model's scores, each with the averaged
    weights (ema_decay) and eval_tta's views."""

    def averaged_weights(self) -> contextlib.AbstractContextManager:
        """Inside, the model holds the moving average of its weights (with ema_decay; else as it is)."""
        return averaged_weights(self.optimizer, self.model.trainable_variables)

    def export(self, export_dir: str, formats: Sequence[str] = ("saved_model",)) -> dict[str, dict]:
        """The model (its averaged weights with ema_decay) in `formats` for serving (trainer/export.py),
        each checked against it on the first PARITY_IMAGES evaluation images, and each file's own top-1
        on the whole evaluation split (one view: trainer/export_accuracy.py); their parity.json."""
        check_precision(formats, self.config.precision)  # evaluate's model dir, or any caller
        with self.averaged_weights():
            checks = export_model(self.model, export_dir, self.config.image_size, self.info.labels,
                                  self.config.center_crop, images=self.evaluation_images(PARITY_IMAGES),
                                  formats=formats)
        accuracies = exported_top1(export_dir, list(checks), self.config.data, self.config.image_size,
                                   self.config.center_crop, self.label_offset, self.config.eval_batch_size)
        return with_top1(export_dir, checks, {fmt: {**found, "eval_tta": self.config.eval_tta}
                                              for fmt, found in accuracies.items()})

    def evaluation_images(self, count: int) -> np.ndarray:
        """The first `count` images of the evaluation split, preprocessed as evaluation does."""
        data = eval_dataset(self.config.data, self.config.eval_batch_size, self.config.image_size,
                            center_crop=self.config.center_crop).unbatch()
        real = [image.numpy() for image, _, _ in data.filter(lambda image, label, weight: weight > 0).take(count)]
        if not real:
            raise ValueError(f"{self.config.data}: no evaluation images to check an export against")
        return np.stack(real)

    def evaluate(self, eval_batch=None) -> dict[str, float]:
        """Loss, top-1 and top-5 on the evaluation split, with the averaged weights and eval_tta's views."""
        with self.averaged_weights():
            return self._evaluate(eval_batch)

    def _eval_dataset(self):
        if self._eval_data is None:  # built once, so --cache keeps the images
            data = eval_dataset(self.config.data, self.config.eval_batch_size, self.config.image_size,
                                label_offset=self.label_offset, cache=self.config.cache,
                                center_crop=self.config.center_crop)
            self._eval_data = self.strategy.experimental_distribute_dataset(data)
        return self._eval_data

    def _evaluate(self, eval_batch=None) -> dict[str, float]:
        self._eval_dataset()
        (loss, top1, top5, n), self.correct["eval"] = score(self._eval_data, eval_batch or self._compile()[1])
        return {"step": int(self.optimizer.iterations), "loss": loss / n, "top1": top1 / n,
                "top5": top5 / n, "num_examples": int(n)}

    def validate(self, eval_batch=None) -> dict[str, float]:
        """`val_loss`, `val_top1`, `val_top5` and `val_examples` on the validation images held out of the
        training split (validation_images), as evaluate scores the evaluation split; {} without them."""
        if not self.config.validation_images:
            return {}
        if self._validation_data is None:
            data = validation_dataset(self.config.data, self.config.validation_images, self.config.eval_batch_size,
                                      self.config.image_size, label_offset=self.label_offset,
                                      cache=self.config.cache, center_crop=self.config.center_crop)
            self._validation_data = self.strategy.experimental_distribute_dataset(data)
        with self.averaged_weights():
            (loss, top1, top5, n), self.correct["val"] = score(self._validation_data, eval_batch or self._compile()[1])
        return {"val_loss": loss / n, "val_top1": top1 / n, "val_top5": top5 / n, "val_examples": int(n)}

    def evaluate_as_is(self) -> dict[str, Any]:
        """The model dir's latest checkpoint scored without training (an inherited net at step 0): the
        evaluation and validation splits, recorded as an evaluation, and the images each got right kept."""
        self.restore()
        self.write_config()  # what `amoeba evaluate` and export read
        eval_batch = self._compile()[1]
        result = {**self.evaluate(eval_batch), **self.validate(eval_batch)}
        self._record_evaluation(result)
        write_correct(self.config.model_dir, result["step"], self.correct)
        return result

    def _record_evaluation(self, result: dict[str, Any]) -> None:
        result["wall_seconds"] = float(self.wall_seconds.numpy())
        result["epoch"] = result["step"] * self.config.train_batch_size / self.info.num_train_images
        storage.append_line(storage.join(self.config.model_dir, EVAL_HISTORY), json.dumps(result))

    def _keep_correct(self, result: dict[str, Any]) -> None:
        """At the final evaluation (only: none before costs a write), which images it got right."""
        if result.get("step") == self.total_steps and "eval" in self.correct:
            write_correct(self.config.model_dir, result["step"], self.correct)

    def evaluations(self) -> list[dict[str, Any]]:
        """The evaluations of model_dir so far, by step (a step evaluated twice: the last row)."""
        rows = storage.read_lines_json(storage.join(self.config.model_dir, EVAL_HISTORY))
        return sorted({row["step"]: row for row in rows}.values(), key=lambda row: row["step"])
