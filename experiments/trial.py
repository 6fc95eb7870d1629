"""The Ray Tune trainable for one search candidate; it runs in its own Ray worker process.

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


def run_trial(config: dict[str, Any], proxy: dict[str, Any]) -> None:
    """Train the candidate in `config` and report its metrics, or an `error` for a failed one."""
    t_start = time.perf_counter()
    timeout = float(proxy.get("timeout_s") or 0)
    done = start_watchdog(timeout + max(60.0, 0.25 * timeout), f"trial {config['trial_id']}") if timeout else None
    from searchspace import NasNetGenotype
    from trainer.candidate import CandidateFailed, train_candidate
    from trainer.proxy import ProxyConfig

    import_seconds = time.perf_counter() - t_start
    genotype = NasNetGenotype.from_json(config["genotype"])
    proxy_config = ProxyConfig(**{**proxy, "seed": proxy["seed"] + config["trial_id"]})
    try:
        metrics: dict[str, Any] = train_candidate(genotype, proxy_config)
        error = ""
    except CandidateFailed as err:
        metrics, error = {"val_accuracy": float("nan")}, str(err)
    if done is not None:
        done.set()
    tune.report(
        {
            **metrics,
            "error": error,
            "import_seconds": import_seconds,
            "trial_seconds": time.perf_counter() - t_start,
            "worker_pid": os.getpid(),
        }
    )
