"""Which images a model got right at the end of its training: one bit an image, in the fixed order
of the split it was scored on, kept in `model_dir/eval_correct.json` (trainer/train.py writes it
at the final evaluation) and carried into a promote's result.json and comparison (experiments/
promote/driver.py), so two models scored on the same images can be judged by a paired test
(experiments/promote/noise.py `paired`) rather than by overlapping intervals.

The text form is `N:BASE64`: N images, then numpy's packbits of their 0/1 (big-endian bits, the
last byte padded with zeros) in base64; 10,000 images take 1,250 bytes. No pickles. This module
must not import TensorFlow.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Mapping, Sequence

import numpy as np

from core import storage

CORRECT_FILE = "eval_correct.json"  # a model_dir's per-image correctness at the end of its training
SPLITS = ("eval", "val")  # the evaluation split, and the validation images held out of the training split


def encode(correct: Sequence[bool] | np.ndarray) -> str:
    """`N:BASE64` of a sequence of right (True, 1) and wrong (False, 0), one an image."""
    bits = np.asarray(correct).astype(bool).ravel()
    return f"{bits.size}:{base64.b64encode(np.packbits(bits)).decode('ascii')}"


def decode(text: str) -> np.ndarray:
    """The bool array `encode` wrote; ValueError for anything else (a truncated or foreign string)."""
    count, sep, packed = str(text).partition(":")
    try:
        n, raw = int(count), base64.b64decode(packed, validate=True)
    except (ValueError, binascii.Error):
        raise ValueError(f"not a per-image correctness (N:BASE64): {str(text)[:40]!r}") from None
    if not sep or n < 0 or len(raw) != (n + 7) // 8:
        raise ValueError(f"not a per-image correctness (N:BASE64): {str(text)[:40]!r}")
    return np.unpackbits(np.frombuffer(raw, np.uint8), count=n).astype(bool)


def decoded(value: Any) -> np.ndarray | None:
    """`decode(value)` for a string it can read; None for anything else (NaN: a row without one)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return decode(value)
    except ValueError:
        return None


def write_correct(model_dir: str, step: int, splits: Mapping[str, np.ndarray | None]) -> dict[str, Any]:
    """Write `model_dir/eval_correct.json` (atomically): the training step and, for each split of
    SPLITS scored, `{split}_correct` in encode's form. Returns what it wrote."""
    record: dict[str, Any] = {"step": int(step)}
    record.update({f"{split}_correct": encode(splits[split]) for split in SPLITS if splits.get(split) is not None})
    storage.write_json(storage.join(model_dir, CORRECT_FILE), record)
    return record


def read_correct(model_dir: str) -> dict[str, Any]:
    """`model_dir/eval_correct.json` as write_correct wrote it; {} where there is none (a model
    trained before it was kept)."""
    path = storage.join(model_dir, CORRECT_FILE)
    return storage.read_json(path) if storage.exists(path) else {}
