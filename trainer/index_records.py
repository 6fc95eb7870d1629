"""Write metadata.json for TFRecords made elsewhere (e.g. tensorflow/tpu's imagenet_to_gcs).

Scans the train-* and validation-* shards once: images per shard, and each class id's text.
Class ids are the stored labels minus `label_offset` (1 for ImageNet, whose 0 is background) and
must run 0..K-1. Must not convert images or build models.
"""

from __future__ import annotations

import os

import tensorflow as tf

from core import storage
from trainer.records import (EVAL_PREFIX, LABELS_FILE, METADATA_FILE, TRAIN_PREFIX, DataInfo, build_metadata,
                             read_metadata)

_FEATURES = {
    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    "image/class/text": tf.io.FixedLenFeature([], tf.string, default_value=""),
}


def _scan(path: str, label_offset: int, texts: dict[int, str]) -> int:
    """Images in one shard; records each class id's text in `texts`."""
    count = 0
    parsed = tf.data.TFRecordDataset(path).map(lambda r: tf.io.parse_single_example(r, _FEATURES),
                                               num_parallel_calls=tf.data.AUTOTUNE)
    for batch in parsed.batch(4096):
        ids = batch["image/class/label"].numpy() - label_offset
        if ids.size and ids.min() < 0:
            raise ValueError(f"{path}: stored label {ids.min() + label_offset} is below label_offset {label_offset}")
        for class_id, text in set(zip(ids.tolist(), batch["image/class/text"].numpy().tolist())):
            texts.setdefault(class_id, text.decode("utf-8"))
        count += len(ids)
    return count


def index_tfrecords(data_dir: str, label_offset: int) -> DataInfo:
    """Count the shards of `data_dir` and write its metadata.json and labels.txt."""
    metadata = storage.join(data_dir, METADATA_FILE)
    if storage.exists(metadata):
        raise ValueError(f"{metadata} exists already: the data is indexed")
    shards, files, texts = {}, {}, {}
    for prefix in (TRAIN_PREFIX, EVAL_PREFIX):
        paths = sorted(tf.io.gfile.glob(f"{data_dir.rstrip('/')}/{prefix}-*"))
        if not paths:
            raise FileNotFoundError(f"{data_dir}: no {prefix}-* TFRecord shards")
        shards[prefix] = [_scan(p, label_offset, texts) for p in paths]
        files[prefix] = [os.path.basename(p) for p in paths]
    if not texts:
        raise ValueError(f"{data_dir}: the shards hold no images")
    num_classes = max(texts) + 1
    missing = sorted(set(range(num_classes)) - set(texts))
    if missing:
        raise ValueError(f"{data_dir}: class ids {missing[:10]} have no image (label_offset {label_offset}?)")
    labels = [texts[i] or f"class_{i}" for i in range(num_classes)]
    content = build_metadata(labels, shards, label_offset, {"indexed": data_dir})
    for prefix in files:
        content["splits"][prefix]["files"] = files[prefix]
    storage.write_text(storage.join(data_dir, LABELS_FILE), "\n".join(labels) + "\n")
    storage.write_json(metadata, content)
    return read_metadata(data_dir)
