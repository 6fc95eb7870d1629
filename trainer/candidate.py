"""Train one search candidate on a proxy task and measure it: the entry point a trial calls.

The candidate's network comes from the model-family table (trainer/models.py) by its search space
(trainer/candidate_network.py, which also measures its size and batch-1 latency). It trains on one
device through a plain tf.function loop (trainer/candidate_loop.py: the fused update of
trainer/fused_optimizer.py, Grappler off, rungs, a --train_seconds budget), or, for TPU trials,
through Keras's fit under a TPUStrategy (trainer/candidate_strategy.py). Each call starts from a
cleared Keras session (trainer/worker_setup.py), so a warm worker process trains trial after trial
with results identical to a fresh process's, and its memory stays flat (benchmarks/trial_memory.py).
Precision follows `amoeba train`'s (mixed_float16 with dynamic loss scaling). Candidate failures
(NaN loss, out of memory, timeout) raise `CandidateFailed` with the reason; anything else
propagates.

Costs, measured where the candidate trains: trainable parameters and multiply-adds (as papers
count them), inference latency at batch 1 (graph calls of the traced inference pass on the trial's
device, median of repeats after a warm-up, before training), latency at the evaluation batch, and
the steady-state training step time. This module must not import Ray.
"""

from __future__ import annotations

import time
from typing import Any

import keras

from core.proxy_config import PRECISIONS, ProxyConfig
from trainer.candidate_loop import CALIBRATION_STEPS, EVAL_BATCH, CandidateFailed, train_on_one_device
from core.trial_state import STEPS_FILE
from trainer.candidate_network import LATENCY_REPEATS, batch1_latency_ms, candidate_size, inference_function
from trainer.candidate_strategy import tpu_strategy, train_with_strategy
from trainer.fused_optimizer import DynamicLossScale, MomentumSGD, RestartingCosine
from trainer.proxy_data import load_proxy_data
from trainer.rung_state import RungPlan
from trainer.worker_setup import (GRAPPLER_OFF, freeze_long_lived_objects, graph_options, reset_keras, set_threads,
                                  use_gpu_memory_growth)

__all__ = [  # the names trials, benchmarks and tests import from here
    "CALIBRATION_STEPS", "EVAL_BATCH", "GRAPPLER_OFF", "LATENCY_REPEATS", "STEPS_FILE", "CandidateFailed",
    "DynamicLossScale", "MomentumSGD", "RestartingCosine", "batch1_latency_ms", "candidate_size", "graph_options",
    "inference_function", "reset_keras", "set_threads", "train_candidate", "train_with_strategy",
    "use_gpu_memory_growth",
]


def train_candidate(genotype: Any, proxy: ProxyConfig, rungs: RungPlan | None = None, *,
                    max_latency_ms: float = 0.0, state_dir: str | None = None,
                    space: str = "nasnet") -> dict[str, float]:
    """Train `genotype` (a genotype of the search space named `space`) on the proxy task; return
    validation accuracy, size, costs and timings (with `rungs`: those of the last rung reached,
    each rung's also passed to `rungs.report`). Over `max_latency_ms` at batch 1: its size and
    latency only, untrained (the search records it infeasible)."""
    set_threads(proxy.threads)
    reset_keras()
    t_start = time.perf_counter()
    data = load_proxy_data(proxy)
    freeze_long_lived_objects()
    load_seconds = time.perf_counter() - t_start
    keras.utils.set_random_seed(proxy.seed)
    keras.mixed_precision.set_global_policy(PRECISIONS[proxy.precision])
    try:
        if proxy.tpu:
            if rungs is not None:
                raise ValueError("rungs: a TPU trial trains through Keras's fit and has no rungs yet")
            return train_with_strategy(genotype, proxy, data, tpu_strategy(proxy.tpu), space=space)
        return train_on_one_device(genotype, proxy, data, t_start, load_seconds, rungs, max_latency_ms, state_dir,
                                   space)
    finally:
        keras.mixed_precision.set_global_policy("float32")
        reset_keras()
