"""What a search candidate keeps in its trial's state dir while it trains, for a re-issued trial and
the search's progress line: the step count a --train_seconds candidate calibrated (`fixed_steps`,
`record_steps`) and its progress file (`StepProgress`), written by trainer/candidate_loop.py. No
TensorFlow here. This module must not train.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from core.train_config import PROGRESS

STEPS_FILE = "train_steps.json"  # in a trial's state dir: the step count it calibrated


def fixed_steps(state_dir: str | None) -> tuple[int | None, float | None]:
    """The step count (and step time) a --train_seconds trial calibrated before: a re-issued trial
    trains to it."""
    path = state_dir and os.path.join(state_dir, STEPS_FILE)
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            recorded = json.load(f)
        return int(recorded["train_steps"]), recorded.get("calibration_step_ms")
    return None, None


def record_steps(state_dir: str | None, steps: int, step_ms: float) -> None:
    """Write the calibrated step count to the trial's state dir (atomically), if it has one."""
    if state_dir:
        os.makedirs(state_dir, exist_ok=True)
        temp = os.path.join(state_dir, STEPS_FILE + ".tmp")
        with open(temp, "w", encoding="utf-8") as f:
            json.dump({"train_steps": steps, "calibration_step_ms": step_ms}, f)
        os.replace(temp, os.path.join(state_dir, STEPS_FILE))


class StepProgress:
    """The trial's progress file in its state dir (core.train_config.PROGRESS, the fields `amoeba
    promote`'s models write), what the search's progress line shows of a running trial: tracing,
    then the step of all the trial's steps and the images per second since the last write, rewritten
    at most every EVERY_S (and when asked). Without a state dir it writes nothing."""

    EVERY_S = 2.0

    def __init__(self, state_dir: str | None, batch_size: int) -> None:
        self.path = state_dir and os.path.join(state_dir, PROGRESS)
        self.batch_size = batch_size
        self.last: tuple[int, float] | None = None  # the step and time of the last write
        self._write({"phase": "tracing", "step": 0})

    def update(self, step: int, total_steps: int | None, now: bool = False) -> None:
        """After `step` (of `total_steps`, None while unknown)."""
        t = time.perf_counter()
        if self.last is not None and not now and t - self.last[1] < self.EVERY_S:
            return
        rate = self.batch_size * (step - self.last[0]) / (t - self.last[1]) if self.last and t > self.last[1] else None
        self.last = (step, t)  # the first write's rate would be the trace's: none
        self._write({"phase": "training", "step": step, "total_steps": total_steps, "images_per_sec": rate})

    def _write(self, fields: dict[str, Any]) -> None:
        if self.path:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(self.path + ".tmp", "w", encoding="utf-8") as f:
                json.dump({k: v for k, v in fields.items() if v is not None}, f)
            os.replace(self.path + ".tmp", self.path)
