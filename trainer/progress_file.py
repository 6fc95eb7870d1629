"""A model_dir's progress.json while it trains: what watchers (amoeba promote's progress lines) read,
written by trainer/train.py's Trainer. This module must not train or read data.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import tensorflow as tf

from core import storage

PROGRESS_EVERY_S = 30.0


class ProgressFile:
    """A model_dir's progress.json, what watchers read (amoeba promote's progress lines): the phase
    (tracing until the first steps are done, then training), the step of total_steps, and the last
    loop's figures. It is rewritten at most every PROGRESS_EVERY_S (or when `now` is asked), and a
    heartbeat thread rewrites it as often during a long loop, the step read from `step_variable`."""

    def __init__(self, path: str, step_variable: tf.Variable, total_steps: int) -> None:
        self.path, self.step_variable = path, step_variable
        self.start = int(step_variable)
        self.fields: dict[str, Any] = {"phase": "tracing", "step": self.start, "total_steps": total_steps}
        self.lock = threading.Lock()
        self.written = 0.0
        self.stop = threading.Event()
        self.update(True)
        self.thread = threading.Thread(target=self._beat, name="amoeba-progress", daemon=True)
        self.thread.start()

    def update(self, now: bool = False, **fields: Any) -> None:
        with self.lock:
            self.fields.update(fields)
            if now or time.monotonic() - self.written >= PROGRESS_EVERY_S:
                storage.write_json(self.path, self.fields)
                self.written = time.monotonic()

    def _beat(self) -> None:
        while not self.stop.wait(PROGRESS_EVERY_S / 2):
            try:
                step = int(self.step_variable)  # the optimizer's step, also inside one long loop
            except Exception:  # noqa: BLE001 - a variable on a device another thread cannot read
                step = self.fields["step"]
            self.update(step=step, **({"phase": "training"} if step > self.start else {}))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
