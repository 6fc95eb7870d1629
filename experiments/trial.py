"""The Ray Tune trainable for one search candidate; it runs in its own Ray worker process.

TensorFlow is imported here, inside the worker, never in the search driver.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ray import tune


def run_trial(config: dict[str, Any], proxy: dict[str, Any]) -> None:
    """Train the candidate in `config` and report its metrics, or an `error` for a failed one."""
    t_start = time.perf_counter()
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
    tune.report(
        {
            **metrics,
            "error": error,
            "import_seconds": import_seconds,
            "trial_seconds": time.perf_counter() - t_start,
            "worker_pid": os.getpid(),
        }
    )
