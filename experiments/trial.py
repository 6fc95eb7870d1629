"""The Ray Tune trainable for one search candidate; it runs in a Ray worker process that Tune keeps
warm for the next trial (actor reuse), so TensorFlow's import and the proxy data's decoding are paid
once per worker, not once per trial.

TensorFlow is imported here, inside the worker, never in the search driver.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from ray import tune

HANG_EXIT_CODE = 75
_trials_in_this_worker = 0


def start_watchdog(seconds: float, what: str) -> threading.Event:
    """End this worker process if `what` has not finished within `seconds`; set the returned
    event when it has. The soft timeout is checked between training steps; this catches a trial
    that hangs anywhere (building, tracing, a stuck op), and Tune records the trial as failed."""
    done = threading.Event()

    def watch() -> None:
        if not done.wait(seconds):
            print(f"amoeba watchdog: {what} still running after {seconds:g} s; ending its worker",
                  file=sys.stderr, flush=True)
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


def run_trial(config: dict[str, Any], proxy: dict[str, Any], space: dict[str, Any]) -> None:
    """Train the candidate in `config` and report its metrics, or an `error` for a failed one."""
    global _trials_in_this_worker
    _trials_in_this_worker += 1
    t_start = time.perf_counter()
    from searchspace import space_from_config
    from trainer.candidate import CandidateFailed, train_candidate
    from trainer.proxy import ProxyConfig
    from trainer.proxy_data import load_proxy_data

    import_seconds = time.perf_counter() - t_start
    genotype = space_from_config(space).genotype_from_json(config["genotype"])
    proxy_config = ProxyConfig(**{**proxy, "seed": proxy["seed"] + config["trial_id"]})
    t_load = time.perf_counter()
    load_proxy_data(proxy_config)  # a fresh worker decodes the images here, off the trial's clock
    load_seconds = time.perf_counter() - t_load
    timeout = proxy_config.timeout_s
    done = start_watchdog(timeout + max(60.0, 0.25 * timeout), f"trial {config['trial_id']}") if timeout else None
    try:  # a warm worker outlives the trial: its watchdog must stand down however the trial ends
        metrics: dict[str, Any] = train_candidate(genotype, proxy_config)
        error = ""
    except CandidateFailed as err:
        metrics, error = {"val_accuracy": float("nan")}, str(err)
    finally:
        if done is not None:
            done.set()
    tune.report(
        {
            **metrics,
            "load_seconds": load_seconds + metrics.get("load_seconds", 0.0),
            "error": error,
            "import_seconds": import_seconds,
            "trial_seconds": time.perf_counter() - t_start,
            "worker_pid": os.getpid(),
            "worker_trial": _trials_in_this_worker,  # 1: a fresh worker; more: a warm one
            "worker_rss_mb": resident_mb(),  # after the trial: flat over a warm worker's trials
        }
    )
