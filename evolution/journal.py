"""The durable append-only journal: one JSON object per line, flushed as it is written.

Reading tolerates a torn last line (a crash mid-write) and drops it with a warning; damage
anywhere else is an error that names the line. JSON only: nothing here may unpickle or eval.
"""

from __future__ import annotations

import json
import logging
import os
from typing import IO, Any

log = logging.getLogger(__name__)


class JournalError(ValueError):
    """The journal is damaged or does not match what replaying it produces."""


def read_journal(path: str) -> list[dict[str, Any]]:
    """All events of the journal at `path`; repairs a torn last line by truncating it away."""
    with open(path, "rb") as f:
        data = f.read()
    events: list[dict[str, Any]] = []
    lines = data.split(b"\n")
    good_bytes = 0
    for number, line in enumerate(lines, start=1):
        is_last = number == len(lines) or (number == len(lines) - 1 and lines[-1] == b"")
        if not line.strip():
            if not is_last and number != len(lines):
                raise JournalError(f"{path}:{number}: empty line inside the journal")
            continue
        try:
            event = json.loads(line)
            if not isinstance(event, dict) or "event" not in event:
                raise ValueError("not an event object")
        except ValueError as err:
            if is_last:
                log.warning("%s:%d: dropping a torn last line (%s)", path, number, err)
                os.truncate(path, good_bytes)
                break
            raise JournalError(f"{path}:{number}: damaged journal line: {err}") from None
        events.append(event)
        good_bytes += len(line) + 1
    if good_bytes > len(data):  # a complete last line without its newline
        with open(path, "ab") as f:
            f.write(b"\n")
    return events


class Journal:
    """Appends events to a JSONL file, one flushed line each.

    Pickling (Ray Tune pickles its search algorithm) keeps only the path; the file is opened
    again on the next append.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def append(self, event: dict[str, Any]) -> None:
        if self._file is None:
            self._file = open(self.path, "a", encoding="utf-8")
        self._file.write(json.dumps(event, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self._file = state["path"], None
