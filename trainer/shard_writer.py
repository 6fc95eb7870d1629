"""Writing sharded TFRecord files: each shard under a hidden temp name renamed when complete, an
output dir that must be new or empty, shard counts, and the thread-pool helpers that keep memory
flat (at most a window of rows in flight) with a progress bar. Used by `amoeba prepare`
(trainer/prepare.py) and the fake ImageNet maker (trainer/fake_imagenet.py).

This module must not read CSVs, decode images or build models.
"""

from __future__ import annotations

import collections
import concurrent.futures
import math
import os
import sys
import threading
import time
from typing import Callable, Iterable, Iterator, TypeVar

import tensorflow as tf

IMAGES_PER_SHARD = 1000

T = TypeVar("T")
R = TypeVar("R")


def ordered_map(pool: concurrent.futures.Executor, fn: Callable[[T], R], items: Iterable[T],
                 window: int) -> Iterator[R]:
    """pool.map with at most `window` items in flight (pool.map submits everything at once)."""
    pending: collections.deque[concurrent.futures.Future] = collections.deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


class Progress:
    """A thread-safe count of items done (`unit`: images checked, records written): keras's Progbar on a terminal; elsewhere (a log file, a
    pipe) a plain line every PLAIN_EVERY_S seconds and at the end, with no escape codes or
    backspaces (Progbar writes them whatever stdout is). Silent when disabled."""

    PLAIN_EVERY_S = 10.0

    def __init__(self, total: int, title: str, enabled: bool, unit: str = "row") -> None:
        self._lock = threading.Lock()
        self._done = 0
        self._total = total
        self._bar = None
        self._plain = enabled and bool(total) and not sys.stdout.isatty()
        self._shown_at = time.monotonic()
        self._unit = unit
        if enabled and total:
            print(title, flush=True)
            if not self._plain:
                self._bar = tf.keras.utils.Progbar(total, unit_name=unit, interval=0.05)

    def add(self, count: int = 1) -> None:
        with self._lock:
            self._done += count
            if self._bar is not None:
                self._bar.update(self._done)
            elif self._plain and (self._done >= self._total or
                                  time.monotonic() - self._shown_at >= self.PLAIN_EVERY_S):
                self._shown_at = time.monotonic()
                print(f"  {self._done:,}/{self._total:,} {self._unit}s ({100 * self._done / self._total:.0f}%)", flush=True)


def write_shard(path: str, serialized: Iterable[bytes]) -> int:
    """Write records to a hidden temp file beside `path`, renamed to `path` once complete."""
    folder, name = path.rsplit("/", 1) if "://" in path else os.path.split(path)
    temp = f"{folder}/.{name}.incomplete" if "://" in path else os.path.join(folder, f".{name}.incomplete")
    count = 0
    try:
        with tf.io.TFRecordWriter(temp) as writer:
            for record in serialized:
                writer.write(record)
                count += 1
        tf.io.gfile.rename(temp, path, overwrite=False)
    except BaseException:
        if tf.io.gfile.exists(temp):
            tf.io.gfile.remove(temp)
        raise
    return count


def check_output_dir(output_dir: str) -> None:
    """ValueError unless `output_dir` is absent or empty."""
    if not tf.io.gfile.exists(output_dir):
        return
    if not tf.io.gfile.isdir(output_dir):
        raise ValueError(f"output_dir {output_dir}: exists and is not a folder")
    entries = tf.io.gfile.listdir(output_dir)
    if entries:
        shown = ", ".join(sorted(entries)[:5]) + (", ..." if len(entries) > 5 else "")
        raise ValueError(f"output_dir {output_dir}: not empty ({shown}); give a new or empty folder")


def default_num_shards(num_images: int) -> int:
    """About IMAGES_PER_SHARD images per shard, at least one shard."""
    return max(1, math.ceil(num_images / IMAGES_PER_SHARD))


def split_evenly(rows: list[T], num_shards: int) -> list[list[T]]:
    """`rows` in `num_shards` consecutive parts whose sizes differ by at most one."""
    return [rows[i * len(rows) // num_shards:(i + 1) * len(rows) // num_shards] for i in range(num_shards)]
