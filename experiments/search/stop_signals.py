"""Stopping a search by a signal: Ctrl-C (SIGINT) or SIGTERM (`timeout`, a job scheduler) ends it as
the circuit breaker does, resumable, with one line. No TensorFlow or Ray here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, Callable, Iterator

STOP_SIGNALS = {  # what a stopping signal prints once: its name, and how to end at once
    signal.SIGINT: ("interrupted", "Ctrl-C again to end at once"),
    signal.SIGTERM: ("terminated (SIGTERM)", "a second signal ends it at once"),  # `timeout`, a scheduler
}
CHECK_EVERY_S = 0.5  # after a signal, how often whether Ray died with it is checked


@contextlib.contextmanager
def stop_on_interrupt(ray_gone: Callable[[], bool] | None = None, last_words: Callable[[], str] | None = None,
                      end: Callable[[int], Any] = os._exit, check_every_s: float = CHECK_EVERY_S
                      ) -> Iterator[threading.Event]:
    """Ctrl-C (SIGINT) or SIGTERM (`timeout`, a job scheduler) sets the event: the search stops its
    trials as the circuit breaker does and ends, resumable (Ray Tune's own SIGINT handler, which ends
    one Tune experiment and lets the next start, is turned off, and Ray's C++ SIGTERM handler, which
    prints a stack trace and ends the driver, is replaced); a second signal ends the driver at once.
    With `ray_gone`: should Ray die with the signal (a scheduler that signals every process of the
    job), the driver, which would wait a minute for it, prints `last_words()` on stderr and ends
    (`end(1)`) at once; its journal holds every result. Only the main thread can take signals."""
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return
    watch = _RayWatch(ray_gone, last_words or (lambda: "interrupted"), end, check_every_s)

    def handle(signum: int, frame: Any) -> None:
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()
        what, again = STOP_SIGNALS.get(signum, ("interrupted", "again to end at once"))
        print(f"{what}: stopping the running trials ({again}); run the same command again to resume", flush=True)
        watch.start()

    before = {signum: signal.signal(signum, handle) for signum in STOP_SIGNALS}
    tune_handler = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER")
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    try:
        yield interrupted
    finally:
        watch.stand_down()
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        if tune_handler is None:
            os.environ.pop("TUNE_DISABLE_SIGINT_HANDLER", None)
        else:
            os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = tune_handler


class _RayWatch:
    """After a stop signal, a thread that ends the driver should Ray die (`ray_gone()`), until the
    search stands it down (before it shuts its own Ray down: that death is no reason to end)."""

    def __init__(self, ray_gone: Callable[[], bool] | None, last_words: Callable[[], str],
                 end: Callable[[int], Any], every_s: float) -> None:
        self.ray_gone, self.last_words, self.end, self.every_s = ray_gone, last_words, end, every_s
        self.lock, self.done = threading.Lock(), threading.Event()

    def start(self) -> None:
        if self.ray_gone is not None and not self.done.is_set():
            threading.Thread(target=self._watch, name="amoeba-ray-watch", daemon=True).start()

    def _watch(self) -> None:
        while not self.done.wait(self.every_s):
            with self.lock:  # the search cannot stand it down between the check and the end
                if self.done.is_set() or not self.ray_gone():
                    continue
                print(self.last_words(), file=sys.stderr, flush=True)
                self.end(1)
                return

    def stand_down(self) -> None:
        with self.lock:
            self.done.set()
