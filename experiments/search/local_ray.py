"""Starting Ray for a command: join a cluster at `address`, or start a private one on this machine
that listens on 127.0.0.1 only and prints nothing about authentication tokens, and keep Ray Tune's
own console output (banners, INFO lines) out of the command's.

Ray's own ray.init() turns 127.0.0.1 into the machine's address and binds its servers to every
interface; the one switch it has for a loopback-only node is the Windows/macOS fallback
(`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`), read by this process at call time and by Ray's child
processes from their environment.

A local Ray's processes (GCS, raylet, their helpers) are started each in a session of its own: a
SIGTERM to the driver's whole process group (`timeout`, `kill -TERM -PGID`, a terminal's group)
reaches the driver alone, which stops its trials and ends as Ctrl-C ends it
(experiments/search/stop_signals.py); Ray blocks only SIGINT in them, and a SIGTERM ending them left the
driver waiting a minute for its GCS before Ray ended it. They still end with the driver (Ray's
fate-sharing: the kernel kills them when it dies). A job scheduler that signals every process of
the job (Slurm) still reaches them: `local_ray_gone` tells the driver, which then ends at once.
This module must not import TensorFlow.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any, Iterator

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
    with own_sessions() if address is None else contextlib.nullcontext():
        ray.init(**kwargs)


@contextlib.contextmanager
def own_sessions() -> Iterator[None]:
    """While it lasts, each process Ray starts (ray._private.services.ConsolePopen, its one way of
    starting them) opens a session of its own, out of the driver's process group; where Ray has no
    such class (another version) or on Windows, its processes start as Ray starts them."""
    from ray._private import services

    popen = getattr(services, "ConsolePopen", None)
    if popen is None or sys.platform == "win32":
        yield
        return

    class OwnSession(popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("start_new_session", True)
            super().__init__(*args, **kwargs)

    services.ConsolePopen = OwnSession
    try:
        yield
    finally:
        services.ConsolePopen = popen


GCS_ANSWER_S = 2.0  # a local GCS that does not answer within it is gone


def local_ray_gone() -> bool:
    """Whether the local Ray this process started has lost its GCS: its process ended, or it does
    not answer (a GCS sent SIGTERM stops serving and hangs in its shutdown). The driver would wait a
    minute for it before Ray ends it. False with no local Ray (a joined cluster's GCS runs elsewhere)."""
    try:
        from ray._private import ray_constants, worker
        from ray.exceptions import RpcError

        node = worker._global_node
        infos = node.all_processes.get(ray_constants.PROCESS_TYPE_GCS_SERVER, []) if node is not None else []
        if not infos:
            return False
        if any(info.process.poll() is not None for info in infos):
            return True
        worker.global_worker.gcs_client.internal_kv_exists(b"ping", b"amoeba", timeout=GCS_ANSWER_S)
        return False
    except (ImportError, AttributeError):  # another Ray version: its own wait stands
        return False
    except RpcError:
        return True
