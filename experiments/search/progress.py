"""What a person watching a search or a promote reads: a summary line every minute and at the end.

`progress_line` is a function of the algorithm's records (and of the progress files its running
trials write, when it is given their dirs); `ProgressCallback` prints it from
inside Tune's driver loop; `PromoteProgress` does the same from the models' own progress files.
Must not train anything.
"""

from __future__ import annotations

import json
import os
import time
from typing import Callable

from ray.tune import Callback

from evolution import SearchAlgorithm
from experiments.search import ranking
from experiments.layout import RESULT
from core import storage
from core.train_config import PROGRESS

SUMMARY_EVERY_S = 60.0


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def status_line(algorithm: SearchAlgorithm, max_trials: int, stopped: bool = False) -> str:
    """done / failed / running / left, and the best so far (with the validation images it is over,
    where the trial reported them). `stopped`: no driver runs now, so the trials in flight are the
    ones the next run re-issues."""
    done = algorithm.completed()
    running = len(algorithm.pending())
    failed = sum(o.status == "failed" for o in algorithm.outcomes.values())
    infeasible = sum(o.status == "infeasible" for o in algorithm.outcomes.values())
    left = max(0, max_trials - done - running)
    best = ranking.best(algorithm)
    best_text = "no best yet"
    if best:
        images = best[1].metrics.get("validation_images")
        on = f", {int(images):,} validation images" if images else ""
        best_text = f"best {algorithm.score(best[1].metrics):.4f} (trial {best[0].trial_id}{on})"
    over = f", {infeasible} infeasible" if infeasible else ""
    over += f", {algorithm.reused()} reused" if algorithm.reused() else ""
    early = sum(o.metrics.get("stop_reason") in ("past the incumbent", "predicted miss")
                for o in algorithm.outcomes.values() if o.reused_from is None)
    over += f", {early} stopped early" if early else ""
    over += f", {algorithm.screened_out} screened out" if algorithm.screened_out else ""
    flight = (f"{running} in flight when it stopped (re-issued on resume)" if stopped and running
              else f"{running} running")
    return f"{done}/{max_trials} done ({failed} failed{over}), {flight}, {left} left; {best_text}"


def pace(finished: int, elapsed_s: float, left: int, stopped: bool = False) -> str:
    """Trials per hour over `elapsed_s`, and the ETA of `left` more trials at that pace (none when
    `stopped`: nothing runs)."""
    if finished <= 0 or elapsed_s <= 0:
        return "-- trials/h; " + ("stopped" if stopped and left > 0 else "ETA --")
    rate = finished / elapsed_s * 3600
    if left <= 0:
        return f"{rate:.1f} trials/h; finished"
    return f"{rate:.1f} trials/h; " + ("stopped" if stopped else f"ETA {_duration(left / rate * 3600)}")


def progress_line(algorithm: SearchAlgorithm, max_trials: int, done_at_start: int, elapsed_s: float,
                  trial_dir: Callable[[int], str] | None = None) -> str:
    """`status_line`, then trials per hour and the ETA at this run's pace; with `trial_dir` (a
    trial id's state dir), each running trial's step and rate from the progress file there."""
    done = algorithm.completed()
    running = running_trials(algorithm, trial_dir) if trial_dir is not None else ""
    return (f"[progress {_duration(elapsed_s)}] {status_line(algorithm, max_trials)}; "
            f"{pace(done - done_at_start, elapsed_s, max_trials - done)}"
            + (f"; running: {running}" if running else ""))


def running_trials(algorithm: SearchAlgorithm, trial_dir: Callable[[int], str]) -> str:
    """The trials in flight that have written their progress file (the proxy trainer writes one in
    its trial's state dir: trainer/candidate_loop.py): `trial 3 step 120/264 (310 images/s)`, ..."""
    parts = []
    for trial_id in algorithm.pending():
        try:  # a line is not worth the search: a file that cannot be read is left out
            with open(os.path.join(trial_dir(trial_id), PROGRESS), encoding="utf-8") as f:
                parts.append(f"trial {trial_id} {_model_state(json.load(f))}")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):  # not started, on another node, ...
            continue
    return ", ".join(parts)


def journal_pace(algorithm: SearchAlgorithm, max_trials: int, run_started: float | None = None,
                 stopped: bool = False) -> str:
    """The pace of the last run (from `run_started`, when its lock file says; to now while it
    runs, to its last result once `stopped`), else between the first and the last result the
    journal times; the idle time between runs is not in it."""
    times = sorted(o.told_at for o in algorithm.outcomes.values() if o.told_at is not None)
    left = max_trials - algorithm.completed()
    if run_started is not None:
        mine = [t for t in times if t >= run_started]
        if mine:
            return pace(len(mine), (mine[-1] if stopped else time.time()) - run_started, left, stopped)
    if len(times) < 2:
        return pace(0, 0, left if stopped else 0, stopped)
    return pace(len(times) - 1, times[-1] - times[0], left, stopped)


class ProgressCallback(Callback):
    """Prints `progress_line` every `every_s` seconds of the driver loop, and once at the end."""

    def __init__(self, algorithm: SearchAlgorithm, max_trials: int, every_s: float = SUMMARY_EVERY_S,
                 trial_dir: Callable[[int], str] | None = None) -> None:
        self.algorithm = algorithm
        self.max_trials = max_trials
        self.every_s = every_s
        self.trial_dir = trial_dir
        self.done_at_start = algorithm.completed()
        self.started = self.last = time.monotonic()

    def __getstate__(self) -> dict:
        """Tune pickles its callbacks into tuner.pkl: the algorithm (and its open journal) stay out."""
        return {"max_trials": self.max_trials, "every_s": self.every_s}

    def __setstate__(self, state: dict) -> None:
        raise NotImplementedError("a search resumes from its journal (run `amoeba search` again with the "
                                  "same --output_dir), not from a pickled Tune experiment")

    def line(self) -> str:
        return progress_line(self.algorithm, self.max_trials, self.done_at_start, time.monotonic() - self.started,
                             self.trial_dir)

    def on_step_end(self, iteration: int, trials: list, **info) -> None:
        if time.monotonic() - self.last >= self.every_s:
            self.last = time.monotonic()
            print(self.line(), flush=True)

    def on_experiment_end(self, trials: list, **info) -> None:
        print(self.line(), flush=True)


def models_line(model_dirs: dict[str, str], elapsed_s: float) -> str:
    """Each model's state from its model_dir: done; building, tracing, or its step and pace (trainer's
    progress.json); or waiting (not started)."""
    parts = []
    for name, folder in model_dirs.items():
        progress = storage.join(folder, PROGRESS)
        if storage.exists(storage.join(folder, RESULT)):
            parts.append(f"{name} done")
        elif storage.exists(progress):
            parts.append(f"{name} {_model_state(storage.read_json(progress))}")
        else:
            parts.append(f"{name} waiting")
    return f"[progress {_duration(elapsed_s)}] " + "; ".join(parts)


def _model_state(p: dict) -> str:
    """building; tracing (step k/n); step k/n (images/s, eval top1): from a trainer's progress.json
    (or a search trial's, whose step count may not be known yet: step k)."""
    phase = p.get("phase", "training")
    at = f"step {p['step']}" + (f"/{p['total_steps']}" if "total_steps" in p else "") if "step" in p else ""
    if phase != "training":
        return f"{phase} ({at})" if at and p["step"] else phase
    figures = [f"{p['images_per_sec']:.0f} images/s"] if p.get("images_per_sec") is not None else []
    figures += [f"eval top1 {p['eval_top1']:.4f}"] if p.get("eval_top1") is not None else []
    return f"{at} ({', '.join(figures)})" if figures else at


class PromoteProgress(Callback):
    """Prints `models_line` every `every_s` seconds of the driver loop, and once at the end."""

    def __init__(self, model_dirs: dict[str, str], every_s: float = SUMMARY_EVERY_S) -> None:
        self.model_dirs = model_dirs
        self.every_s = every_s
        self.started = self.last = time.monotonic()

    def on_step_end(self, iteration: int, trials: list, **info) -> None:
        if time.monotonic() - self.last >= self.every_s:
            self.last = time.monotonic()
            print(models_line(self.model_dirs, time.monotonic() - self.started), flush=True)

    def on_experiment_end(self, trials: list, **info) -> None:
        print(models_line(self.model_dirs, time.monotonic() - self.started), flush=True)
