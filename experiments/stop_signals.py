"""Stopping a search by a signal: Ctrl-C (SIGINT) or SIGTERM (`timeout`, a job scheduler) ends it as
the circuit breaker does, resumable, with one line. No TensorFlow or Ray here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Iterator

STOP_SIGNALS = {  # what a stopping signal prints once: its name, and how to end at once
    signal.SIGINT: ("interrupted", "Ctrl-C again to end at once"),
    signal.SIGTERM: ("terminated (SIGTERM)", "a second signal ends it at once"),  # `timeout`, a scheduler
}


@contextlib.contextmanager
def stop_on_interrupt() -> Iterator[threading.Event]:
    """Ctrl-C (SIGINT) or SIGTERM (`timeout`, a job scheduler) sets the event: the search stops its
    trials as the circuit breaker does and ends, resumable (Ray Tune's own SIGINT handler, which ends
    one Tune experiment and lets the next start, is turned off, and Ray's C++ SIGTERM handler, which
    prints a stack trace and ends the driver, is replaced); a second signal ends the driver at once.
    Only the main thread can take signals."""
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return

    def handle(signum: int, frame: Any) -> None:
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()
        what, again = STOP_SIGNALS.get(signum, ("interrupted", "again to end at once"))
        print(f"{what}: stopping the running trials ({again}); run the same command again to resume", flush=True)

    before = {signum: signal.signal(signum, handle) for signum in STOP_SIGNALS}
    tune_handler = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER")
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    try:
        yield interrupted
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        if tune_handler is None:
            os.environ.pop("TUNE_DISABLE_SIGINT_HANDLER", None)
        else:
            os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = tune_handler
