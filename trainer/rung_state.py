"""A multi-fidelity trial's state between rungs: where it reports (`RungPlan`), and its checkpoint
after each rung (weights, batch-norm statistics and momentum in TensorFlow's checkpoint format, with
the metrics of every rung so far in rung.json), written beside and renamed into place, the older
rung's removed. JSON and TensorFlow checkpoints only: nothing here unpickles. Must not build or
train models, nor import Ray.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import keras
import tensorflow as tf


@dataclass(frozen=True)
class RungPlan:
    """Where a multi-fidelity trial reports: after `epochs[i]` epochs in all, for each rung i from
    `start_rung` (the rungs its search already has are re-reported from `checkpoint_dir` when it
    holds them, else trained again), through `report(metrics)`."""

    epochs: Sequence[int]
    report: Callable[[dict[str, Any]], None]
    start_rung: int = 0
    checkpoint_dir: str | None = None


RUNG_FILE = "rung.json"


def save_rung(checkpoint: tf.train.Checkpoint, directory: str, rung: int, epochs: int,
              reported: list[dict[str, Any]]) -> None:
    """The trial's state after `rung` in `directory`/rung_R (written beside, then renamed), the older
    rungs' removed; rung.json holds every rung's metrics so far."""
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, f"rung_{rung}")
    temp = final + ".tmp"
    shutil.rmtree(temp, ignore_errors=True)
    checkpoint.write(os.path.join(temp, "state"))
    with open(os.path.join(temp, RUNG_FILE), "w", encoding="utf-8") as f:
        json.dump({"rung": rung, "epochs": epochs, "reported": reported}, f)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(temp, final)
    for name in os.listdir(directory):
        if name.startswith("rung_") and name != f"rung_{rung}":
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


def restore_rung(checkpoint: tf.train.Checkpoint, directory: str) -> tuple[int, list[dict[str, Any]]]:
    """(epochs trained, metrics of each rung finished) from the latest rung in `directory`; (0, [])
    when it holds none (the trial then trains from scratch)."""
    saved = sorted((int(n.split("_")[1]) for n in os.listdir(directory) if n.startswith("rung_")
                    and n.split("_")[1].isdigit()), reverse=True) if os.path.isdir(directory) else []
    if not saved:
        return 0, []
    path = os.path.join(directory, f"rung_{saved[0]}")
    with open(os.path.join(path, RUNG_FILE), encoding="utf-8") as f:
        state = json.load(f)
    checkpoint.read(os.path.join(path, "state")).assert_consumed()
    return int(state["epochs"]), list(state["reported"])


def rung_checkpoint(model: keras.Model, optimizer: Any, average: Any) -> tf.train.Checkpoint:
    """What a rung's checkpoint keeps: the weights (BN's statistics among them), the optimizer's
    momentum and, with --ema_decay, the weight average."""
    return tf.train.Checkpoint(weights=[w.value for w in model.weights], momentum=optimizer.accumulators,
                               **(average.trackable() if average else {}))
