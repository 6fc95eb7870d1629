"""The durable append-only journal: one JSON object per line, flushed and fsynced as written.

Reading never changes the file. A last line without its newline is a torn write (a crash
mid-append): it is dropped with a warning, and cut off when the journal is next opened for
appending. Damage anywhere else is an error that names the line. JSON only: nothing here may
unpickle or eval.
"""

from __future__ import annotations

import json
import logging
import os
from typing import IO, Any

log = logging.getLogger(__name__)


class JournalError(ValueError):
    """The journal is damaged or does not match what replaying it produces."""


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
    """Appends events to a JSONL file, one flushed and fsynced line each.

    `intact_bytes`, from `read_journal`, repairs a torn end before the first append.
    """

    def __init__(self, path: str, intact_bytes: int | None = None, fsync: bool = True) -> None:
        self.path = path
        self.fsync = fsync
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


def _last_byte(path: str) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)
