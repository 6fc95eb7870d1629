"""The top-1 of each exported file on a data dir's evaluation split: the accuracy printed beside an
export is that file's own (one view, as the file serves), not the Keras model's, whose evaluation
may average test-time augmentation views (--eval_tta) the files do not run.

The SavedModel runs from the JPEG bytes through its `serving_default` signature (its own
preprocessing: the serving path a client takes); TFLite and ONNX take float images, so they run on
the evaluation pipeline's, which is the same preprocessing function (trainer/records.py). At most
MAX_IMAGES images, the split's first (ImageNet's 50,000 at 224 pixels would take a CPU tens of
minutes a format); the count is printed with the figure. Must not train; writes only parity.json.
"""

from __future__ import annotations

import itertools
from typing import Iterable, Sequence

import numpy as np
import tensorflow as tf

from core import storage
from core.export_formats import format_path
from trainer import records
from trainer.export_formats import runner


MAX_IMAGES = 10_000


def exported_top1(export_dir: str, formats: Sequence[str], data_dir: str, image_size: int, center_crop: bool,
                  label_offset: int, batch_size: int) -> dict[str, dict]:
    """{format: {"top1": its top-1, "eval_images": the images}} over the evaluation split's first
    MAX_IMAGES images (all of CIFAR-10's 10,000)."""
    found = {}
    batches_wanted = -(-MAX_IMAGES // batch_size)
    for fmt in formats:
        if fmt == "saved_model":
            batches = _bytes_batches(data_dir, label_offset, batch_size)
            serve = tf.saved_model.load(format_path(export_dir, fmt)).signatures["serving_default"]
            correct, total = _count(itertools.islice(batches, batches_wanted),
                                    lambda encoded: serve(image_bytes=encoded)["logits"].numpy())
        else:
            data = records.eval_dataset(data_dir, batch_size, image_size, label_offset=label_offset,
                                        center_crop=center_crop).take(batches_wanted)
            run = runner(export_dir, fmt)
            batches = ((images.numpy(), labels.numpy(), weights.numpy()) for images, labels, weights in data)
            correct, total = _count(batches, run)
        found[fmt] = {"top1": correct / total if total else None, "eval_images": total}
    return found


def _bytes_batches(data_dir: str, label_offset: int, batch_size: int) -> Iterable[tuple]:
    """(encoded JPEGs, labels, weights of 1) batches of the evaluation split's records, in file order."""
    files = records.shard_files(data_dir, records.EVAL_PREFIX)
    data = tf.data.TFRecordDataset(files).map(records.parser(label_offset)).batch(batch_size)
    for encoded, labels in data:
        yield encoded, labels.numpy(), np.ones(len(labels), np.float32)


def _count(batches: Iterable[tuple], logits_of) -> tuple[int, int]:
    """(correct, images) over `batches` of (inputs, labels, weights): zero-weight padding not counted."""
    correct = total = 0
    for inputs, labels, weights in batches:
        predicted = np.argmax(np.asarray(logits_of(inputs)), axis=-1)
        real = np.asarray(weights) > 0
        correct += int(np.sum((predicted == np.asarray(labels))[real]))
        total += int(np.sum(real))
    return correct, total


def with_top1(export_dir: str, checks: dict[str, dict], accuracies: dict[str, dict]) -> dict[str, dict]:
    """`checks` (parity.json's) with each file's top-1 added, written back to parity.json."""
    from core.export_formats import PARITY_FILE

    merged = {fmt: {**check, **accuracies.get(fmt, {})} for fmt, check in checks.items()}
    storage.write_json(storage.join(export_dir, PARITY_FILE), merged)
    return merged
