"""TensorFlow's and Keras's process-wide state in a trial worker: GPU memory growth, thread pools,
Grappler's options, and the reset between trials that lets a warm worker train trial after trial
with results identical to a fresh process's and flat memory (benchmarks/trial_memory.py).

This module must not build models or train.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
from typing import Iterator

import keras
import tensorflow as tf

# Grappler's graph optimisation off: 0.5 s of a candidate's first step, and with fused batch norm
# it gained nothing per step at 8 or 32 px (benchmarks/first_step.py)
GRAPPLER_OFF = {"disable_meta_optimizer": True}


def use_gpu_memory_growth() -> None:
    """Let each trial take only the GPU memory it uses, so trials with a fraction of a GPU share it
    (before TensorFlow initialises its devices; later calls change nothing)."""
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # devices already initialised in this worker: growth was set then
            pass


def set_threads(threads: int) -> None:
    """TensorFlow's intra- and inter-op thread pools (0: TensorFlow's default); a no-op once
    TensorFlow has started in this process."""
    if threads <= 0:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:  # TensorFlow already initialised in this process: keep its pools
        pass


@contextlib.contextmanager
def graph_options(options: dict[str, bool]) -> Iterator[None]:
    """Grappler options for the functions first run inside; the process's own restored after."""
    before = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options(options)
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({**{k: None for k in options}, **before})


def release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc's malloc_trim), so a warm worker's resident memory
    is what it holds, not what its allocator kept from the last trial; a no-op without glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def reset_keras() -> None:
    """Forget the previous trial's models, graphs and name counters (a warm worker's next trial)."""
    keras.backend.clear_session(free_memory=False)
    gc.collect()
    release_free_memory()


def freeze_long_lived_objects() -> None:
    """Once per process, before its first model: move what lives for the whole process (TensorFlow's
    and Keras's modules, the cached data; about 400,000 objects) out of the garbage collector's scans
    (gc.freeze). A full collection then walks only the trial's own objects: 0.2 s less for each of the
    collections between trials and during a model's build and trace (benchmarks/README.md)."""
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
