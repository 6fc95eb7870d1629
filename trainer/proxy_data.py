"""Proxy datasets in memory, and their tf.data pipelines with fixed batch shapes.

The loaders that core/proxy_config.py's registry (PROXY_DATASETS) names: `load_<name>(proxy)` returns
an ArrayDataset of the training images and the validation images held out of the TRAINING split (a prepared dir's
evaluation split is never read here). Images are decoded once per worker process and kept (one
data set at a time), so a warm worker's next trial starts without decoding. This module must not
build models or know about search.

The pipelines run without tf.data's autotuner (fixed parallelism and prefetch instead): its model
thread, once started, makes an iterator's deletion wait for the thread's next wake-up, on a period
that doubles from 10 ms, so an evaluation of 11.5 s took 20.5 s and an epoch of 48 s up to 82 s
(benchmarks/README.md, "The 9 s in a proxy evaluation"). A candidate makes an iterator per
evaluation and, with airbench's flips, per epoch.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from core.proxy_config import ProxyConfig, SplitPlan, check_data_dir, plan_split
from trainer import records

log = logging.getLogger(__name__)
SPLIT_SEED = 0
PARALLEL_CALLS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
PREFETCH_BATCHES = 2


def without_autotune(data: tf.data.Dataset) -> tf.data.Dataset:
    """`data` with tf.data's autotuner off: its iterators are deleted without waiting (module docstring)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return data.with_options(options)


@dataclass(frozen=True)
class ArrayDataset:
    """Images as float32 (any range) or uint8 (0..255, scaled to [-1, 1] by the pipelines)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


def hold_out(labels: np.ndarray, plan: SplitPlan) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, validation indices) of `plan.pool` labels: a stratified, seeded hold-out
    (plain seeded when a class is too small to stratify); plan_split sizes both."""
    from sklearn.model_selection import train_test_split

    index = np.arange(len(labels))
    try:
        train, val = train_test_split(index, test_size=plan.num_validation, stratify=labels,
                                      random_state=SPLIT_SEED)
    except ValueError as err:  # a class with one image, or fewer held out than classes
        log.warning("validation hold-out not stratified (%s)", err)
        train, val = train_test_split(index, test_size=plan.num_validation, random_state=SPLIT_SEED)
    return train, val


def load_digits(proxy: ProxyConfig) -> ArrayDataset:
    """Digits as float32 images in [0, 1], (8, 8, 1) or resized to proxy.image_size; the split
    plan's pool is the first images, as for a data dir (so --train_images is honoured)."""
    from sklearn.datasets import load_digits as sklearn_digits

    data = sklearn_digits()
    x = (data.images / 16.0).astype("float32")[..., None]
    y = data.target.astype("int32")
    if proxy.input_size != x.shape[1]:
        x = tf.image.resize(x, [proxy.input_size] * 2).numpy()
    plan = plan_split(proxy, len(y))
    x, y = x[:plan.pool], y[:plan.pool]  # as a data dir: the first images, then the hold-out
    train, val = hold_out(y, plan)
    return ArrayDataset(x[train], y[train], x[val], y[val], num_classes=10)


def load_prepared(proxy: ProxyConfig) -> ArrayDataset:
    """The first plan.pool records of a prepared dir's training split (file order), as uint8 pixels
    preprocessed as every other path to a model does (records.eval_pixels with center_crop=False:
    the centred square, resized with antialiasing, so the promoted and deployed model sees the same)."""
    info = records.read_metadata(proxy.data)
    plan = check_data_dir(proxy)
    files = records.shard_files(proxy.data, records.TRAIN_PREFIX)
    parse = records.parser(info.label_offset)
    size = proxy.input_size
    data = (tf.data.TFRecordDataset(files).take(plan.pool).map(parse)
            .map(lambda encoded, y: (records.eval_pixels(encoded, size, center_crop=False), y),
                 num_parallel_calls=tf.data.AUTOTUNE)
            .batch(1024).prefetch(2))
    xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in data])
    x, y = np.concatenate(xs), np.concatenate(ys)
    del xs  # the batches: the pool is held once, then split
    if y.min() < 0 or y.max() >= info.num_classes:
        raise ValueError(f"{proxy.data}: labels outside 0..{info.num_classes - 1} after label_offset "
                         f"{info.label_offset}")
    train, val = hold_out(y, plan)
    log.info("%s: %d training and %d validation images at %d px", proxy.data, len(train), len(val), size)
    x_train, x_val = x[train], x[val]
    del x
    return ArrayDataset(x_train, y[train], x_val, y[val], num_classes=info.num_classes)


_CACHE: dict[tuple, ArrayDataset] = {}


def load_proxy_data(proxy: ProxyConfig) -> ArrayDataset:
    """The proxy's data, decoded once per process: the last data set loaded is kept."""
    key = proxy.data_key()
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = proxy.spec.load(proxy)
    return _CACHE[key]


def proxy_shape(proxy: ProxyConfig) -> tuple[tuple[int, int, int], int]:
    """(image shape, number of classes) a candidate is built for, without reading any images (a data
    dir's class count is in its metadata.json)."""
    num_classes = proxy.spec.num_classes
    if proxy.spec.needs_data_dir:
        num_classes = records.read_metadata(proxy.data).num_classes
    return (proxy.input_size, proxy.input_size, proxy.spec.channels), num_classes


def model_input(x: tf.Tensor) -> tf.Tensor:
    """uint8 pixels to [-1, 1] (records.to_float, the records pipeline's own); float images as they are."""
    return records.to_float(x) if x.dtype == tf.uint8 else x


def _pad_crop_flip(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """CIFAR-style: zero-pad by size/8 on each side, random crop back to size, random flip."""
    size = image.shape[0]
    pad = max(1, size // 8)
    crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    padded = tf.pad(image, [[pad, pad], [pad, pad], [0, 0]])
    cropped = tf.image.stateless_random_crop(padded, image.shape, crop_seed)
    return tf.image.stateless_random_flip_left_right(cropped, flip_seed)


def train_pipeline(x: np.ndarray, y: np.ndarray, batch_size: int, seed: int, augment: bool | str = False,
                   epoch: int = 0, flip_key: int = 0) -> tf.data.Dataset:
    """One epoch, shuffled with `seed` (reshuffled each epoch), last partial batch dropped so every
    step has the same shape. `augment` True or "cifar": pad-crop-flip seeded per example;
    "airbench": a translation of up to 2 pixels (reflect padding) and the alternating flip, each
    image's flip bit drawn from its index with `flip_key`, flipped over in odd `epoch`s (one
    dataset per epoch)."""
    if len(x) < batch_size:
        raise ValueError(f"batch_size {batch_size} is larger than the {len(x)} training images")
    data = tf.data.Dataset.from_tensor_slices((x, y, tf.range(len(x), dtype=tf.int64)))
    data = data.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    seeds = tf.data.Dataset.random(seed=seed).batch(2)
    if augment == "airbench":
        def airbench(xyi: tuple, s: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            bit = tf.cast(tf.random.stateless_uniform([], tf.stack([tf.constant(flip_key, tf.int64), xyi[2]])) < 0.5,
                          tf.int64)
            return records.airbench_augment(xyi[0], s, bit, tf.constant(epoch, tf.int64)), xyi[1]

        data = tf.data.Dataset.zip((data, seeds)).map(airbench, num_parallel_calls=PARALLEL_CALLS)
    elif augment:
        data = tf.data.Dataset.zip((data, seeds)).map(
            lambda xyi, s: (_pad_crop_flip(xyi[0], s), xyi[1]), num_parallel_calls=PARALLEL_CALLS)
    else:
        data = data.map(lambda image, label, index: (image, label))
    return without_autotune(data.batch(batch_size, drop_remainder=True)
                            .map(lambda images, labels: (model_input(images), labels))
                            .prefetch(PREFETCH_BATCHES))


def eval_pipeline(x: np.ndarray, y: np.ndarray, batch_size: int) -> tf.data.Dataset:
    """Every example exactly once, padded to whole batches; padding carries sample weight 0."""
    pad = -len(x) % batch_size
    weights = np.concatenate([np.ones(len(x), "float32"), np.zeros(pad, "float32")])
    x = np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)])
    y = np.concatenate([y, np.zeros(pad, y.dtype)])
    return without_autotune(tf.data.Dataset.from_tensor_slices((x, y, weights)).batch(batch_size)
                            .map(lambda images, labels, w: (model_input(images), labels, w)).prefetch(PREFETCH_BATCHES))
