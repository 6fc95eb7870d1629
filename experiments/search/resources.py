"""How many trials run at once and what each asks Ray for, from the cluster's resources: shared by
`amoeba search` and `amoeba promote`. Arithmetic only: no Ray or TensorFlow here.
"""

from __future__ import annotations

from typing import Any


class ClusterTooSmall(ValueError):
    """The Ray cluster lacks the resources one trial asks for (a config error)."""


def trial_resources(config: Any, cluster: dict[str, float]) -> tuple[dict[str, float], int]:
    """Each trial's Ray resources, and how many trials run at once: `max_concurrent`, or as many as
    the cluster's CPUs, GPUs and TPUs allow for the per-trial amounts asked. CPUs not asked for are
    shared out among the concurrent trials. `config` has cpus/gpus/tpus_per_trial and max_concurrent."""
    asked = {"GPU": config.gpus_per_trial, "TPU": config.tpus_per_trial, "CPU": config.cpus_per_trial}
    limits = {kind: int(cluster.get(kind, 0) / amount + 1e-9) for kind, amount in asked.items() if amount}
    concurrent = config.max_concurrent or min(limits.values(), default=max(1, int(cluster.get("CPU", 1))))
    short = [kind for kind, limit in limits.items() if limit < 1]
    if short:
        have = ", ".join(f"{cluster.get(kind, 0):g} {kind}" for kind in short)
        raise ClusterTooSmall(f"the Ray cluster has {have}: not enough for one trial "
                              f"({', '.join(f'{asked[k]:g} {k}' for k in short)} per trial)")
    cpu = cluster.get("CPU", 1)
    cpus = config.cpus_per_trial or float(max(1, int(cpu // concurrent)))
    if not config.cpus_per_trial and (config.gpus_per_trial or config.tpus_per_trial):
        cpus = min(cpus, cpu / concurrent)  # accelerators set the pace: trials may share a CPU
    resources = {"CPU": cpus, "GPU": config.gpus_per_trial, "TPU": config.tpus_per_trial}
    return {k: v for k, v in resources.items() if v}, concurrent
