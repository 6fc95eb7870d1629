"""A small fake ImageNet in the trainer/records.py format, for tests and for trying ImageNet recipes.

Each image is noise over a class-dependent colour (so a tiny model can learn something), a JPEG
whose height and width vary around `image_size` (so the crops have work to do). Stored labels are
class id + label_offset (1 by default, like ImageNet TFRecords where 0 is background);
metadata.json records the offset. This module must not build models or train.
"""

from __future__ import annotations

import colorsys
from typing import Iterator

import numpy as np
import tensorflow as tf

from core import storage
from trainer import records
from trainer.prepare import check_output_dir, default_num_shards, write_shard


def _class_colour(class_id: int, num_classes: int) -> np.ndarray:
    hue = class_id / num_classes
    value = 0.95 if class_id % 2 == 0 else 0.6  # neighbours in hue also differ in brightness
    return np.array(colorsys.hsv_to_rgb(hue, 0.9, value), dtype=np.float32) * 255.0


def _records(split: str, class_ids: np.ndarray, start: int, stop: int, image_size: int, label_offset: int,
             labels: list[str], rng: np.random.Generator) -> Iterator[bytes]:
    """Serialized records of images start..stop-1 of a split, made one at a time."""
    low, high = max(1, image_size * 3 // 4), image_size * 5 // 4 + 1
    for index in range(start, stop):
        class_id = int(class_ids[index])
        height, width = (int(v) for v in rng.integers(low, high, size=2))
        noise = rng.uniform(0.0, 255.0, size=(height, width, 3)).astype(np.float32)
        pixels = 0.6 * _class_colour(class_id, len(labels)) + 0.4 * noise
        encoded = tf.io.encode_jpeg(tf.constant(pixels.round().clip(0, 255).astype(np.uint8)), quality=90)
        example = records.make_example(encoded.numpy(), class_id + label_offset, labels[class_id],
                                       height, width, f"fake/{split}/{index:06d}.jpg")
        yield example.SerializeToString()


def write_fake_imagenet(output_dir: str, num_train: int = 1024, num_eval: int = 256, num_classes: int = 10,
                        image_size: int = 64, label_offset: int = 1, seed: int = 0,
                        num_shards_train: int = 0, num_shards_eval: int = 0) -> records.DataInfo:
    """Write the shards, labels.txt and metadata.json into a new or empty `output_dir`."""
    if num_classes < 1 or num_train < num_classes or num_eval < 1:
        raise ValueError(f"need num_classes >= 1, num_train >= num_classes and num_eval >= 1; got "
                         f"num_classes={num_classes}, num_train={num_train}, num_eval={num_eval}")
    if image_size < 8 or label_offset < 0:
        raise ValueError(f"need image_size >= 8 and label_offset >= 0; got {image_size}, {label_offset}")
    check_output_dir(output_dir)
    tf.io.gfile.makedirs(output_dir)
    rng = np.random.default_rng(seed)
    labels = [f"fake_class_{i:04d}" for i in range(num_classes)]
    shards = {}
    for prefix, count, wanted in ((records.TRAIN_PREFIX, num_train, num_shards_train),
                                  (records.EVAL_PREFIX, num_eval, num_shards_eval)):
        class_ids = rng.permutation(np.arange(count) % num_classes)
        num_shards = min(wanted or default_num_shards(count), count)
        bounds = [i * count // num_shards for i in range(num_shards + 1)]
        shards[prefix] = [
            write_shard(storage.join(output_dir, records.shard_name(prefix, i, num_shards)),
                        _records(prefix, class_ids, bounds[i], bounds[i + 1], image_size, label_offset,
                                 labels, rng))
            for i in range(num_shards)
        ]
    storage.write_text(storage.join(output_dir, records.LABELS_FILE), "\n".join(labels) + "\n")
    source = {"fake_imagenet": {"seed": seed, "image_size": image_size}}
    storage.write_json(storage.join(output_dir, records.METADATA_FILE),
                       records.build_metadata(labels, shards, label_offset, source))
    return records.DataInfo(num_train, num_eval, num_classes, tuple(labels), label_offset)
