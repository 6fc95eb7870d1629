"""Built-in datasets and tf.data pipelines with fixed batch shapes.

`digits` is scikit-learn's 1,797 8x8 handwritten digits, read from files scikit-learn ships (no
download). This module must not build models or know about search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

SPLIT_SEED = 0


@dataclass(frozen=True)
class ArrayDataset:
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


def load_digits(validation_fraction: float = 0.2) -> ArrayDataset:
    """Digits as float32 images in [0, 1], shape (8, 8, 1), with a fixed stratified split."""
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    data = sklearn_digits()
    x = (data.images / 16.0).astype("float32")[..., None]
    y = data.target.astype("int32")
    x_train, x_val, y_train, y_val = train_test_split(
        x, y, test_size=validation_fraction, stratify=y, random_state=SPLIT_SEED
    )
    return ArrayDataset(x_train, y_train, x_val, y_val, num_classes=10)


BUILTIN_DATASETS = {"digits": load_digits}


def load_builtin(name: str) -> ArrayDataset:
    if name not in BUILTIN_DATASETS:
        raise ValueError(f"dataset: unknown built-in {name!r}; known: {sorted(BUILTIN_DATASETS)}")
    return BUILTIN_DATASETS[name]()


def train_pipeline(x: np.ndarray, y: np.ndarray, batch_size: int, seed: int) -> tf.data.Dataset:
    """Shuffled each epoch, last partial batch dropped so every step has the same shape."""
    if len(x) < batch_size:
        raise ValueError(f"batch_size {batch_size} is larger than the {len(x)} training images")
    return (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
        .batch(batch_size, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )


def eval_pipeline(x: np.ndarray, y: np.ndarray, batch_size: int) -> tf.data.Dataset:
    """Every example exactly once, padded to whole batches; padding carries sample weight 0."""
    pad = -len(x) % batch_size
    weights = np.concatenate([np.ones(len(x), "float32"), np.zeros(pad, "float32")])
    x = np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)])
    y = np.concatenate([y, np.zeros(pad, y.dtype)])
    return tf.data.Dataset.from_tensor_slices((x, y, weights)).batch(batch_size).prefetch(tf.data.AUTOTUNE)
