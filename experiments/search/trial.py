"""The Ray Tune trainables of a search. A trial runs in a Ray worker process that Tune keeps warm for
the next trial (actor reuse), so TensorFlow's import and the proxy data's decoding are paid once per
worker, not once per trial.

A trial of a multi-fidelity search (its config has `rungs`) reports at each rung and waits there
for the driver's decision (Ray Tune's scheduler: go on, or stop it). Every trial ends in a report:
its metrics, or an `error` naming why the candidate failed (a
CandidateFailed reason, or any exception raised while training it, type and message). Only a worker
that dies (a lost node, the OOM killer, a crash, the hang watchdog) leaves Tune an error, and Tune
retries such a trial (`--max_failures`). The hang watchdog first writes "timeout" into the search's
`FailureNotes`, so the retry reports that reason at once instead of hanging again. Each report
carries the search's objectives and every cost measure the trial measured at the top level of its
Tune result (`trial_report`), the rest as one JSON string.

TensorFlow is imported here, inside the worker, never in the search driver.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import threading
import time
import traceback
import uuid
from typing import Any, Callable, Sequence

import ray
from ray import tune
from ray.experimental.internal_kv import _internal_kv_del, _internal_kv_get, _internal_kv_list, _internal_kv_put

from evolution.objectives import MEASURES
from evolution.tune_searcher import tune_result

HANG_EXIT_CODE = 75
_NOTES_NAMESPACE = "amoeba"
_trials_in_this_worker = 0


@dataclasses.dataclass(frozen=True)
class FailureNotes:
    """What a trial's worker wrote down before it ended itself (the hang watchdog's timeout), by
    search trial id: read by the trial's retry and by the search driver. Kept in the Ray cluster's
    own key-value store (in its GCS, where Ray Tune keeps the trainables it registers), so the notes
    outlive any worker node and cost no process of their own; one `run` per search run, cleared
    when the run ends."""

    run: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def _prefix(self) -> str:
        return f"failure/{self.run}/"

    def _key(self, trial_id: int) -> str:
        return f"{self._prefix}{trial_id}"

    def add(self, trial_id: int, reason: str) -> None:
        _internal_kv_put(self._key(trial_id), reason.encode(), namespace=_NOTES_NAMESPACE)

    def get(self, trial_id: int) -> str | None:
        value = _internal_kv_get(self._key(trial_id), namespace=_NOTES_NAMESPACE)
        return value.decode() if value is not None else None

    def clear(self) -> None:
        _internal_kv_del(self._prefix, del_by_prefix=True, namespace=_NOTES_NAMESPACE)

    @staticmethod
    def left() -> list[bytes]:
        """The keys of every run's notes still in this Ray cluster (none once each run has ended)."""
        return _internal_kv_list("failure/", namespace=_NOTES_NAMESPACE)


def start_watchdog(seconds: float, what: str, on_hang: Callable[[str], None] | None = None) -> threading.Event:
    """End this worker process if `what` has not finished within `seconds`; set the returned
    event when it has. The soft timeout is checked between training steps; this catches a trial
    that hangs anywhere (building, tracing, a stuck op). `on_hang(reason)` runs first."""
    done = threading.Event()

    def watch() -> None:
        if not done.wait(seconds):
            reason = f"timeout: {what} still running after {seconds:g} s (hung); its worker was ended"
            print(f"amoeba watchdog: {what} still running after {seconds:g} s; ending its worker",
                  file=sys.stderr, flush=True)
            if on_hang is not None:
                try:
                    on_hang(reason)
                except Exception as err:  # noqa: BLE001 - the worker must end regardless
                    print(f"amoeba watchdog: could not record the timeout: {err}", file=sys.stderr, flush=True)
            os._exit(HANG_EXIT_CODE)

    threading.Thread(target=watch, name="amoeba-watchdog", daemon=True).start()
    return done


def resident_mb() -> float:
    """This process's resident memory in MiB (Linux /proc; NaN elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return float("nan")


def hang_limit(timeout_s: float, grace_s: float | None = None) -> float:
    """Seconds after which the watchdog ends a trial's worker: the soft limit (checked between
    steps) plus a grace (`grace_s`; None: the larger of 60 s and a quarter of the limit)."""
    return timeout_s + (grace_s if grace_s is not None else max(60.0, 0.25 * timeout_s))


def worker_facts(t_start: float) -> dict[str, Any]:
    """Where and how the trial ran: its worker process, node and the devices Ray gave it (ids,
    and what the process sees through CUDA_VISIBLE_DEVICES and TPU_VISIBLE_CHIPS)."""
    context = ray.get_runtime_context()
    devices = context.get_accelerator_ids()
    return {
        "trial_started_at": time.time() - (time.perf_counter() - t_start),
        "trial_seconds": time.perf_counter() - t_start,
        "worker_pid": os.getpid(),
        "worker_trial": _trials_in_this_worker,  # 1: a fresh worker; more: a warm one
        "worker_rss_mb": resident_mb(),  # after the trial: flat over a warm worker's trials
        "node_id": context.get_node_id(),
        "gpu_ids": ",".join(devices.get("GPU", [])),
        "tpu_ids": ",".join(devices.get("TPU", [])),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "tpu_visible_chips": os.environ.get("TPU_VISIBLE_CHIPS", ""),
    }


def known_failure(notes: Any, trial_id: int) -> str | None:
    """What the search's FailureNotes hold for the trial (a watchdog's timeout), or None."""
    return notes.get(trial_id) if notes is not None else None


def watch_trial(notes: Any, trial_id: int, limit_s: float) -> threading.Event:
    """The hang watchdog for one trial: past `limit_s` it writes the timeout into the search's
    FailureNotes (so the retry reports it) and ends this worker. Set the event when the trial ends."""
    write_down = (lambda reason: notes.add(trial_id, reason)) if notes is not None else None
    return start_watchdog(limit_s, f"trial {trial_id}", on_hang=write_down)


def trial_report(metrics: dict[str, Any], objectives: Sequence[str] = ("val_accuracy",)) -> dict[str, Any]:
    """What a trial reports to Tune: all its metrics as one JSON string (tune_result), and at the top
    level every cost measure it measured (evolution/objectives.py's MEASURES) and each of the search's
    `objectives`, NaN when it has none (a failed candidate): Tune's strict metric check ends the whole
    search at a result without the searcher's metric (the first objective), and the searcher then
    records the error."""
    top = {name: metrics[name] for name in MEASURES
           if isinstance(metrics.get(name), (int, float)) and not isinstance(metrics.get(name), bool)}
    top.update({name: metrics.get(name, math.nan) for name in objectives})
    return {**tune_result(metrics, objectives[0]), **top}


def run_trial(config: dict[str, Any], proxy: dict[str, Any], space: dict[str, Any], notes: Any = None,
              objectives: Sequence[str] = ("val_accuracy",), supernet: str | None = None) -> None:
    """Train the candidate in `config` (or score it as a subnet of the trained `supernet` dir) and
    report its metrics, or an `error` for a failed one. `objectives`: the search's objective first
    (the Tune searcher's metric), then any other goals."""
    global _trials_in_this_worker
    _trials_in_this_worker += 1
    t_start = time.perf_counter()
    clear_progress(config.get("checkpoint_dir"))
    known = known_failure(notes, config["trial_id"])
    if known is not None:  # a retry of a trial whose worker the watchdog ended: no second hang
        tune.report(trial_report({"error": known, **worker_facts(t_start)}, objectives))
        return
    from searchspace import space_from_config
    from trainer.candidate import use_gpu_memory_growth
    from trainer.rung_state import RungPlan

    use_gpu_memory_growth()  # before anything touches the GPU: trials may share one
    import_seconds = time.perf_counter() - t_start
    genotype = space_from_config(space).genotype_from_json(config["genotype"])
    proxy_config, load_seconds, error = _proxy_data(config, proxy)

    def report(metrics: dict[str, Any], error: str = "") -> None:
        tune.report(trial_report({**metrics, "load_seconds": load_seconds + metrics.get("load_seconds", 0.0),
                                  "error": error, "import_seconds": import_seconds, **worker_facts(t_start)},
                                 objectives))

    rungs = None
    if config.get("rungs"):
        rungs = RungPlan(config["rungs"], report, config.get("start_rung", 0), config.get("checkpoint_dir"))
    metrics: dict[str, Any] = {}
    if not error and supernet:
        metrics, error = _score_subnet(genotype, config, proxy_config, space, supernet)
    elif not error:
        metrics, error = _train_watched(genotype, config, proxy_config, space.get("name", "nasnet"), rungs, notes)
        if rungs is not None and "rung" in metrics:
            return  # every rung reported; the last one ended the trial (else: measured, untrained)
    report(metrics, error)


def clear_progress(state_dir: str | None) -> None:
    """Remove the progress file a trial's earlier run left in its state dir (a re-issued or retried
    trial), first thing: the search's progress line showed that dead run's step until the new
    run's training wrote its own (core/trial_state.py StepProgress)."""
    from core.train_config import PROGRESS

    if state_dir:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(state_dir, PROGRESS))


def _proxy_data(config: dict[str, Any], proxy: dict[str, Any]) -> tuple[Any, float, str]:
    """The trial's proxy task (its seed offset by the trial id), the seconds its data took to load
    (a fresh worker decodes the images here, off the trial's clock), and the error that stopped it
    loading ("" when none: e.g. a data dir gone since the search started)."""
    from core.proxy_config import ProxyConfig
    from trainer.proxy_data import load_proxy_data

    stops = config.get("stops") or {}  # a time-to-target search's stops for this trial (evolution/target_race.py)
    proxy_config = ProxyConfig(**{**proxy, "seed": proxy["seed"] + config["trial_id"], **stops})
    t_load = time.perf_counter()
    try:
        load_proxy_data(proxy_config)
    except Exception as err:  # noqa: BLE001 - the candidate fails with it, the search goes on
        return proxy_config, time.perf_counter() - t_load, describe_error(err)
    return proxy_config, time.perf_counter() - t_load, ""


def _train_watched(genotype: Any, config: dict[str, Any], proxy: Any, space: str, rungs: Any, notes: Any
                   ) -> tuple[dict[str, Any], str]:
    """Train the candidate under the hang watchdog: (its metrics, "") or ({}, why it failed)."""
    from trainer.candidate import CandidateFailed, train_candidate

    done = None
    if proxy.timeout_s:
        limit = hang_limit(proxy.timeout_s, proxy.hang_grace_s) * (len(rungs.epochs) if rungs else 1)
        done = watch_trial(notes, config["trial_id"], limit)
    try:  # a warm worker outlives the trial: its watchdog must stand down however the trial ends
        return train_candidate(genotype, proxy, rungs, state_dir=config.get("checkpoint_dir"), space=space,
                               max_latency_ms=(config.get("limits") or {}).get("latency_ms", 0.0)), ""
    except CandidateFailed as err:
        return {}, str(err)
    except Exception as err:  # noqa: BLE001 - any other error fails this candidate, not the search
        return {}, describe_error(err)
    finally:
        if done is not None:
            done.set()


def _score_subnet(genotype: Any, config: dict[str, Any], proxy: Any, space: dict[str, Any], supernet: str
                  ) -> tuple[dict[str, Any], str]:
    """The candidate scored as a subnet of the trained supernet: (its metrics, "") or ({}, why not)."""
    from searchspace import space_from_config
    from trainer.proxy_data import load_proxy_data
    from trainer.subnet_score import scorer
    from trainer.worker_setup import set_threads

    set_threads(proxy.threads)  # as a trained trial's: the trial's CPUs, not the machine's
    try:
        found = scorer(space_from_config(space), proxy, load_proxy_data(proxy), supernet)
        return found.score(genotype, (config.get("limits") or {}).get("latency_ms", 0.0)), ""
    except Exception as err:  # noqa: BLE001 - any error fails this candidate, not the search
        return {}, describe_error(err)


@ray.remote(num_cpus=0)
class SizeMeasurer:
    """Builds (never trains) children to count their trainable parameters and multiply-adds, for the
    search driver's size limits: the driver must not import TensorFlow. One actor per search run,
    so TensorFlow is imported once (a task's idle worker is soon ended by Ray, and the next task
    would pay the import again: 8 s here, per child). Its CPU is not reserved (a build takes 1-2 s
    beside the trials); a Ray error here ends the driver, and a rerun resumes the search."""

    def __init__(self) -> None:
        import tensorflow as tf

        tf.config.set_visible_devices([], "GPU")  # a size is counted, not run: leave the GPUs to the trials

    def measure(self, genotype_json: Any, proxy: dict[str, Any], space: dict[str, Any], timed_steps: int = 0
                ) -> dict[str, float]:
        """The child's size, and with `timed_steps` its training step (screen_step_ms, the race's
        screen: timed while no trial trains, since a search of one trial at a time asks between them)."""
        from searchspace import space_from_config
        from trainer.candidate import candidate_size
        from trainer.step_timing import candidate_step_ms
        from core.proxy_config import ProxyConfig

        genotype, config, name = (space_from_config(space).genotype_from_json(genotype_json), ProxyConfig(**proxy),
                                  space.get("name", "nasnet"))
        figures: dict[str, float] = dict(candidate_size(genotype, config, space=name))
        if timed_steps:
            figures["screen_step_ms"] = candidate_step_ms(genotype, config, name, timed_steps)
        return figures


def size_measure(proxy: dict[str, Any], space: dict[str, Any], timed_steps: int = 0
                 ) -> Callable[[Any], dict[str, float]]:
    """The search algorithm's `measure`: a genotype's size (and with `timed_steps`, its step) from a
    SizeMeasurer, started at the first call (Ray must be up by then) and kept while the algorithm
    holds this function."""
    measurer: list[Any] = []

    def measure(genotype: Any) -> dict[str, int]:
        if not measurer:
            measurer.append(SizeMeasurer.remote())
        return ray.get(measurer[0].measure.remote(genotype.to_json(), proxy, space, timed_steps), timeout=600)

    return measure


def describe_error(err: Exception) -> str:
    """The error as one line (type, message, where it was raised); the traceback goes to the worker's
    log."""
    traceback.print_exception(err, file=sys.stderr)
    frame = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
    where = f" (at {os.path.basename(frame.filename)}:{frame.lineno})" if frame else ""
    message = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {message}{where}"


def sleep_trial(config: dict[str, Any], seconds: float) -> None:
    """A trial that only sleeps `seconds` (at each rung, with rungs) and scores its cell by a hash: the
    search machinery (Ray, Tune, the searcher, the scheduler, the journal) measured and tested
    without training anything (benchmarks/search_scaling.py, tests of resources and clusters)."""
    import hashlib

    global _trials_in_this_worker
    _trials_in_this_worker += 1
    t_start = time.perf_counter()
    digest = hashlib.sha256(str(config["genotype"]).encode()).digest()
    score = int.from_bytes(digest[:4], "big") / 2**32
    for rung, epochs in enumerate(config.get("rungs") or [None]):  # a retried trial reports from rung 0
        time.sleep(seconds)
        at_rung = {} if epochs is None else {"rung": rung, "epochs": epochs}
        tune.report(trial_report({"val_accuracy": score * (1 + rung) / (2 + rung), "error": "", **at_rung,
                                  **worker_facts(t_start)}))
