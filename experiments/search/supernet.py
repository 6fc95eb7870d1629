"""A search with `--evaluator=supernet`: its supernet (searchspace/supernet.py) trained once before
the first trial, in OUTPUT_DIR/supernet, by a Ray task holding the cluster's CPUs (and a GPU when it
has one); trials then score subnets of it (trainer/subnet_score.py) instead of training them.

The supernet's training is part of the search's durable state: its checkpoint after each epoch is
in that dir, so a search killed while it trains resumes it from its last epoch to the same weights,
and one killed later finds it done (supernet.json) and goes on with the journal. Orchestration only:
no TensorFlow here (the task imports it in its own worker).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from core.storage import exists, join

SUPERNET_DIR = "supernet"


def supernet_dir(output_dir: str) -> str:
    return os.path.abspath(join(output_dir, SUPERNET_DIR))


def trained(output_dir: str) -> dict[str, Any] | None:
    """What the search's supernet.json records, or None before its supernet is trained."""
    path = join(supernet_dir(output_dir), "supernet.json")
    if not exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _train(space: dict[str, Any], proxy: dict[str, Any], directory: str, sandwich: int) -> dict[str, Any]:
    """In a Ray worker: the supernet of the space trained into `directory` (resumed from its checkpoint)."""
    from core.proxy_config import ProxyConfig
    from searchspace import space_from_config
    from trainer.proxy_data import load_proxy_data
    from trainer.supernet_training import train_supernet
    from trainer.worker_setup import set_threads, use_gpu_memory_growth

    use_gpu_memory_growth()
    config = ProxyConfig(**proxy)
    set_threads(config.threads)
    return train_supernet(space_from_config(space), config, load_proxy_data(config), directory, sandwich)


def ensure_supernet(config: Any, space: Any, interrupted: Any = None) -> dict[str, Any] | None:
    """The search's supernet, trained now (Ray must be up) unless it was; what supernet.json records.
    None when `interrupted` (an event: Ctrl-C, SIGTERM) was set while it trained: the task is ended,
    its last epoch's checkpoint kept for the rerun."""
    import ray

    done = trained(config.output_dir)
    if done is not None:
        return done
    directory = supernet_dir(config.output_dir)
    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]  # the task runs on one of them
    cpus = max(1, int(max((n.get("CPU", 0) for n in nodes), default=1)))
    gpus = 1 if any(n.get("GPU", 0) >= 1 for n in nodes) else 0
    print(f"supernet: training {space.max_stage_widths} wide, {space.max_convs} further convs and a residual "
          f"branch a stage, {config.supernet_sandwich} subnets a step, {config.proxy.epochs} epochs, in {directory} "
          f"({cpus} CPUs{', a GPU' if gpus else ''}); a rerun resumes it from its last epoch", flush=True)
    start = time.perf_counter()
    task = ray.remote(max_calls=1)(_train).options(num_cpus=cpus, num_gpus=gpus, max_retries=0)  # memory freed after
    ref = task.remote(space.to_config(), {**config.proxy.to_dict(), "threads": cpus}, directory,
                      config.supernet_sandwich)
    while not ray.wait([ref], timeout=1.0)[0]:
        if interrupted is not None and interrupted.is_set():
            ray.cancel(ref, force=True)
            return None
    result = ray.get(ref)
    print(f"supernet: trained in {time.perf_counter() - start:.0f} s ({result['train_seconds']:.0f} s of training "
          f"steps, {result['images_per_sec']:.0f} images/s); scoring subnets", flush=True)
    return result
