"""Starting Ray for a command: join a cluster at `address`, or start a private one on this machine
that listens on 127.0.0.1 only and prints nothing about authentication tokens, and keep Ray Tune's
own console output (banners, INFO lines) out of the command's.

Ray's own ray.init() turns 127.0.0.1 into the machine's address and binds its servers to every
interface; the one switch it has for a loopback-only node is the Windows/macOS fallback
(`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`), read by this process at call time and by Ray's child
processes from their environment. This module must not import TensorFlow.
"""

from __future__ import annotations

import logging
import os
from typing import Any

LOOPBACK = "127.0.0.1"
_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


def init_ray(address: str | None, runtime_env: dict[str, Any] | None = None, **resources: Any) -> None:
    """ray.init for a command. `address` ("auto" or HOST:PORT) joins a running cluster; None starts a
    local one on the loopback address, with token authentication (Ray's default) and quietly;
    `resources` (num_cpus, num_gpus, resources) size a local one, for tests and benchmarks."""
    import ray
    from ray._private import ray_constants

    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                              "log_to_driver": False,  # TensorFlow start-up chatter; errors go to Tune's files
                              "runtime_env": runtime_env}
    if address is None:
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # Ray's child processes: loopback only
        ray_constants.ENABLE_RAY_CLUSTER = False  # this process: the constant was read at import
        logging.getLogger(_AUTH_LOGGER).setLevel(logging.ERROR)  # "token authentication is enabled"
        kwargs.update(address="local", _node_ip_address=LOOPBACK, **resources)
        # No idle workers started for this driver: Tune's trial actors never take them (each starts
        # a worker of its own), so each cost 1.5-2 CPU-seconds for nothing
        kwargs["_system_config"] = {"prestart_worker_first_driver": False}
    else:
        kwargs["address"] = address
    # Our commands print their own progress: no Tune banner ("Configuration for experiment", "View
    # detailed results here"), which Tune's new output prints even at verbose=0, nor its INFO lines
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    logging.getLogger("ray.tune").setLevel(logging.WARNING)
    ray.init(**kwargs)
