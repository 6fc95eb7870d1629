"""The durable append-only journal: one JSON object per line, flushed and fsynced as written.

One writer at a time: appending holds an exclusive lock (`JournalLock`) that a second writer is
refused, naming the holder. Reading never takes the lock and never changes the file. A last line without its newline is a torn write (a crash
mid-append): it is dropped with a warning, and cut off when the journal is next opened for
appending. Damage anywhere else is an error that names the line. JSON only: nothing here may
unpickle or eval.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import time
from typing import IO, Any

log = logging.getLogger(__name__)


class JournalError(ValueError):
    """The journal is damaged or does not match what replaying it produces."""


class JournalLocked(RuntimeError):
    """Another live process is appending to the journal (for a search: another driver)."""


class JournalLock:
    """The one-writer lock of the journal at `journal_path`: an flock on `journal_path + ".lock"`,
    a file that names the holder (pid, host, start time). The kernel drops the lock when the holder
    exits, however it ends, so a killed writer never blocks the next one. The file itself stays."""

    def __init__(self, journal_path: str) -> None:
        self.path = journal_path + ".lock"
        lock_file = open(self.path, "a+b")  # a lock that is garbage collected is released with it
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _read_holder(lock_file)
            lock_file.close()
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise JournalLocked(
                f"{journal_path} is in use by another process ({holder}); wait for it to end or stop it, "
                "then run again"
            ) from None
        lock_file.truncate(0)
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "since": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "time": round(time.time(), 3)}
        lock_file.write(json.dumps(holder).encode())
        lock_file.flush()
        self._file: IO[bytes] | None = lock_file

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the file drops the flock
            self._file = None


def journal_in_use(journal_path: str) -> bool:
    """Whether a live process holds the journal's lock (a search running now); creates nothing."""
    try:
        lock_file = open(journal_path + ".lock", "rb")
    except FileNotFoundError:
        return False
    with lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return True
            raise
        fcntl.flock(lock_file, fcntl.LOCK_UN)
        return False


def last_holder(journal_path: str) -> dict:
    """What the journal's last (or present) writer wrote of itself: pid, host, since and, from
    2026-12-03, `time` (when its run began); {} when there is no lock file or it is unreadable."""
    try:
        with open(journal_path + ".lock", "rb") as f:
            holder = json.loads(f.read(4096))
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _read_holder(lock_file: IO[bytes]) -> str:
    try:
        lock_file.seek(0)
        holder = json.loads(lock_file.read(4096))
        return f"pid {holder['pid']} on host {holder['host']}, running since {holder['since']}"
    except (OSError, ValueError, TypeError, KeyError):
        return "holder unknown: it has not written its name yet"


def _parse(line: bytes) -> dict[str, Any]:
    event = json.loads(line)
    if not isinstance(event, dict) or "event" not in event:
        raise ValueError("not an event object")
    return event


def read_journal(path: str) -> tuple[list[dict[str, Any]], int]:
    """The events of the journal at `path`, and the length in bytes of its intact part."""
    with open(path, "rb") as f:
        data = f.read()
    *complete, tail = data.split(b"\n")
    events = []
    for number, line in enumerate(complete, start=1):
        try:
            events.append(_parse(line))
        except ValueError as err:
            raise JournalError(f"{path}:{number}: damaged journal line: {err}") from None
    if tail:
        try:
            _parse(tail)
        except ValueError as err:
            log.warning("%s:%d: dropping a torn last line (%s)", path, len(complete) + 1, err)
        else:  # whole but without its newline: nothing was lost but the newline
            events.append(_parse(tail))
            return events, len(data)
    return events, len(data) - len(tail)


class Journal:
    """Appends events to a JSONL file, one flushed and fsynced line each, holding its `lock` (taken
    here unless given) until `close`.

    `intact_bytes`, from `read_journal`, repairs a torn end before the first append.
    """

    def __init__(self, path: str, intact_bytes: int | None = None, fsync: bool = True,
                 lock: JournalLock | None = None) -> None:
        self.path = path
        self.fsync = fsync
        self.lock = lock or JournalLock(path)
        self._file: IO[bytes] = open(path, "ab")
        if intact_bytes is not None:
            self._file.truncate(intact_bytes)
            self._file.seek(0, os.SEEK_END)
            if intact_bytes and _last_byte(path) != b"\n":
                self._file.write(b"\n")

    def append(self, event: dict[str, Any]) -> None:
        self._file.write(json.dumps(event, separators=(",", ":")).encode() + b"\n")
        self._file.flush()
        if self.fsync:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()
        self.lock.release()


def _last_byte(path: str) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)
