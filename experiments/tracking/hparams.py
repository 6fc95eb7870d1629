"""A search's trials and a promote's models as TensorBoard HParams sessions, so that `tensorboard
--logdir=DIR` on either dir shows the HParams dashboard (table, parallel coordinates, scatter):
each trial's choices (the genotype's fields; ops as counts) and its origin as hyperparameters, its
metrics and costs as metrics. One run per trial under DIR/hparams/trial_N, written once when its
final result is in (a resumed search writes the ones missing; a trial re-run by --retry_failed is
written again); a promote rewrites its own runs.
Written with tensorboardX, so that the search driver imports no TensorFlow. These are the only
HParams sessions of a search: `tune_without_tensorboard` keeps Ray Tune's own TensorBoard logger
off while a Tune experiment runs.

Must not import TensorFlow or Ray, or train.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
from typing import Any, Iterable, Iterator, Mapping

from evolution import SearchAlgorithm

HPARAMS_DIR = "hparams"
TOLD_FILE = "told_at"  # beside a trial's events: when its result came (TensorBoard reads events files only)
METRICS = ("val_accuracy", "best_val_accuracy", "seconds_to_target", "params", "multiply_adds", "latency_ms",
           "step_ms", "train_seconds", "images_per_sec", "trial_seconds")  # the ones a trial has are written
PROMOTE_METRICS = ("top1", "top1_low", "top1_high", "top5", "val_top1", "params", "multiply_adds", "images_per_sec",
                   "wall_seconds", "search_val_accuracy")
HParam = bool | int | float | str
TUNE_AUTO_LOGGERS = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"  # Ray Tune's switch for the loggers it adds itself
_written: dict[str, dict[int, str]] = {}  # hparams dir -> {trial id: told_at of the session written}


def genotype_hparams(data: Any, vocabulary: Iterable[str] = ()) -> dict[str, HParam]:
    """A genotype's JSON as flat hyperparameters: a field's value under its dotted path
    (`activation`, `stages.0.width`); strings inside lists (a cell's ops) counted per path without
    the indices (`normal.blocks.ops:sep_conv_3x3` = 2), every op of `vocabulary` present (0 when
    unused); numbers nested in two lists or more (a block's inputs) left out."""
    flat: dict[str, HParam] = {}
    counted: set[str] = set()

    def walk(value: Any, path: list[str], lists: int) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, [*path, str(key)], lists)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, [*path, str(i)], lists + 1)
        elif isinstance(value, str) and lists:
            where = ".".join(p for p in path if not p.isdigit())
            counted.add(where)
            flat[f"{where}:{value}"] = int(flat.get(f"{where}:{value}", 0)) + 1
        elif isinstance(value, (bool, int, float, str)) and lists < 2:
            flat[".".join(path)] = value

    walk(data, [], 0)
    for where in counted:
        for op in vocabulary:
            flat.setdefault(f"{where}:{op}", 0)
    return flat


@contextlib.contextmanager
def tune_without_tensorboard() -> Iterator[None]:
    """While this block runs a Tuner.fit(), Ray Tune adds none of its CSV, JSON and TensorBoard
    (TBX) loggers itself: the caller passes the CSV and JSON ones (Tune reads its results back from
    them), so that TensorBoard shows each trial once, as written here. (Tune's TBX logger would add
    a session of its own config for each trial under OUTPUT_DIR/tune.) The environment is restored
    after: a Tune run of one's own in the same process keeps its loggers."""
    before = os.environ.get(TUNE_AUTO_LOGGERS)
    os.environ[TUNE_AUTO_LOGGERS] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TUNE_AUTO_LOGGERS, None)
        else:
            os.environ[TUNE_AUTO_LOGGERS] = before


def _session(run_dir: str, hparams: Mapping[str, HParam], metrics: Mapping[str, float]) -> None:
    """One HParams session in `run_dir`: its hyperparameters and metrics (written as scalars)."""
    from tensorboardX.summary import hparams as hparams_summaries, scalar
    from tensorboardX.writer import FileWriter

    _, start, end = hparams_summaries(dict(hparams), dict(metrics))
    writer = FileWriter(run_dir)
    writer.add_summary(start)
    writer.add_summary(end)
    for name, value in metrics.items():
        writer.add_summary(scalar(name, value), 0)
    writer.close()


def finite_numbers(values: Mapping[str, Any], names: Iterable[str]) -> dict[str, float]:
    """The values of `names` that are finite numbers (not bools), as floats."""
    return {name: float(values[name]) for name in names
            if isinstance(values.get(name), (int, float)) and not isinstance(values.get(name), bool)
            and math.isfinite(values[name])}


def trial_record(algorithm: SearchAlgorithm, trial_id: int) -> tuple[dict[str, HParam], dict[str, float]]:
    """A finished trial's choices (its genotype's fields, its mutation and parent, -1 for none) and
    its metrics and costs: what HParams and MLflow record of it."""
    trial, outcome = algorithm.trials[trial_id], algorithm.outcomes[trial_id]
    genotype = trial.genotype.to_json() if hasattr(trial.genotype, "to_json") else trial.genotype
    choices = {**genotype_hparams(genotype, tuple(getattr(algorithm.space, "ops", ()) or ())),
               "mutation": trial.mutation or "", "parent_id": -1 if trial.parent_id is None else trial.parent_id}
    return choices, finite_numbers(outcome.metrics, dict.fromkeys((*METRICS, algorithm.objective)))


def model_record(row: Mapping[str, Any]) -> tuple[dict[str, HParam], dict[str, float]]:
    """A promoted model's (a comparison.csv row's) choices and metrics: what HParams and MLflow record."""
    keys = ("name", "kind", "model", "status", "filters", "search_rank", "search_dir", "same_as")
    choices = {key: row[key] for key in keys
               if isinstance(row.get(key), (bool, int, float, str))
               and not (isinstance(row.get(key), float) and math.isnan(row[key]))}
    targets = [key for key in row if re.match(r"time_to_top[15]_", str(key))]
    return choices, finite_numbers(row, (*PROMOTE_METRICS, *targets))


def write_search_hparams(algorithm: SearchAlgorithm, output_dir: str) -> int:
    """A run for each trial with a final result and no run yet; how many were written."""
    root = os.path.join(output_dir, HPARAMS_DIR)
    known = _written.setdefault(os.path.abspath(root), {})  # the markers read once a process, not every result
    written = 0
    for trial_id, outcome in sorted(algorithm.outcomes.items()):
        run_dir, told = os.path.join(root, f"trial_{trial_id}"), repr(outcome.told_at)
        marker = os.path.join(run_dir, TOLD_FILE)
        if trial_id not in known and os.path.exists(run_dir):
            known[trial_id] = open(marker).read() if os.path.exists(marker) else told  # no marker: kept as it is
        if known.get(trial_id) == told:
            continue
        shutil.rmtree(run_dir, ignore_errors=True)  # told again (--retry_failed re-ran it): the new result wins
        choices, metrics = trial_record(algorithm, trial_id)
        _session(run_dir, {**choices, "status": outcome.status}, metrics)
        with open(marker, "w") as f:
            f.write(told)
        known[trial_id] = told
        written += 1
    return written


def write_promote_hparams(output_dir: str, rows: Iterable[Mapping[str, Any]]) -> None:
    """Promote's models (comparison.csv's rows) as sessions, the dir rewritten: each model's name,
    kind and width as hyperparameters, its accuracy, size, speed and times to targets as metrics."""
    root = os.path.join(output_dir, HPARAMS_DIR)
    shutil.rmtree(root, ignore_errors=True)
    for row in rows:
        _session(os.path.join(root, re.sub(r"[^\w.@-]", "_", str(row.get("name")))), *model_record(row))
