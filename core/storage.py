"""Small-object I/O of our own (metadata, labels, reports, results) for local paths and gs://.

Local paths are written atomically (temp file + os.replace). gs:// objects go through
google-cloud-storage, whose uploads replace an object whole; it honours STORAGE_EMULATOR_HOST,
so tests run it against a local emulator. Bulk data (TFRecords, checkpoints, SavedModels) goes
through TensorFlow's own filesystem (tf.io.gfile) instead; this module must not import TensorFlow.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from functools import lru_cache
from typing import Any

log = logging.getLogger(__name__)


def is_gcs(path: str) -> bool:
    return path.startswith("gs://")


def split_gcs(path: str) -> tuple[str, str]:
    """gs://bucket/a/b -> ("bucket", "a/b")."""
    bucket, _, name = path[len("gs://"):].partition("/")
    if not bucket:
        raise ValueError(f"{path}: not a gs://BUCKET/OBJECT path")
    return bucket, name


@lru_cache(maxsize=1)
def _client():
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project="emulator", credentials=AnonymousCredentials())
    return storage.Client()


def _blob(path: str):
    bucket, name = split_gcs(path)
    return _client().bucket(bucket).blob(name)


def join(base: str, *parts: str) -> str:
    if is_gcs(base):
        return "/".join([base.rstrip("/"), *parts])
    return os.path.join(base, *parts)


def exists(path: str) -> bool:
    return _blob(path).exists() if is_gcs(path) else os.path.exists(path)


def read_bytes(path: str) -> bytes:
    if is_gcs(path):
        return _blob(path).download_as_bytes()
    with open(path, "rb") as f:
        return f.read()


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def read_json(path: str) -> Any:
    return json.loads(read_text(path))


def write_bytes(path: str, data: bytes) -> None:
    """Replace `path` whole: a reader sees the old content or the new, never a part."""
    if is_gcs(path):
        _blob(path).upload_from_string(data)
        return
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide results and reports from other readers
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_text(path: str, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def append_line(path: str, line: str) -> None:
    """Add one line to a log: appended and synced locally (after a newline, should a crash have
    torn the last line); a gs:// object, which cannot be appended to, is rewritten whole."""
    if is_gcs(path):
        old = read_text(path) if exists(path) else ""
        write_text(path, old + ("\n" if old and not old.endswith("\n") else "") + line + "\n")
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a+b") as f:
        torn = False
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
        f.write((b"\n" if torn else b"") + line.encode("utf-8") + b"\n")
        f.flush()
        os.fsync(f.fileno())


def read_lines_json(path: str) -> list[Any]:
    """The JSON lines of a log written by append_line; a line torn by a crash is skipped, with a
    warning naming it."""
    if not exists(path):
        return []
    rows = []
    for number, line in enumerate(read_text(path).splitlines(), 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            log.warning("%s:%d: not a whole JSON line (a crash while writing?); skipped", path, number)
    return rows


def copy_tree_to_gcs(local_dir: str, gcs_dir: str) -> int:
    """Upload every file under `local_dir` to `gcs_dir`; returns the number of files."""
    count = 0
    for root, _, files in os.walk(local_dir):
        for name in files:
            local = os.path.join(root, name)
            rel = os.path.relpath(local, local_dir).replace(os.sep, "/")
            _blob(join(gcs_dir, rel)).upload_from_filename(local)
            count += 1
    return count
