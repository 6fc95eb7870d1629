"""Your own images -> sharded TFRecords: CSVs of `path,label` rows in, trainer/records.py format out.

Two passes (each image is read twice, so memory stays flat whatever the data size). The first
reads and decodes every image in worker threads and collects every bad row (file:line: path:
reason); without `skip_bad_rows` any bad row fails the run before a shard is written. The second writes the shards, each under a hidden temp name renamed when complete, then
labels.txt, bad_rows.csv (with skip_bad_rows) and, last, metadata.json. Training rows are shuffled
with a fixed seed before sharding (CSVs are often sorted by class); evaluation rows keep CSV order.
RGB JPEGs are stored byte for byte; other images (grey or CMYK JPEG, PNG, GIF, BMP, WebP) are
converted to RGB JPEG. This module must not build models, train, or read TFRecords back.
"""

from __future__ import annotations

import collections
import concurrent.futures
import csv
import io
import math
import os
import random
import sys
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

import tensorflow as tf

from trainer import records, storage

IMAGES_PER_SHARD = 1000
SHUFFLE_SEED = 0
JPEG_QUALITY = 95
MAX_LISTED = 20
BAD_ROWS_FILE = "bad_rows.csv"
HEADER_PATHS = {"path", "file", "filename", "file_name", "filepath", "file_path", "image", "image_path",
                "img", "uri", "url", "gcs_path"}
HEADER_LABELS = {"label", "labels", "class", "class_name", "category", "label_name", "target"}


@dataclass(frozen=True)
class PrepareConfig:
    train_csv: str
    eval_csv: str
    output_dir: str | None  # may be None only for a dry run
    labels: str | None = None  # labels.txt; None: the training CSV's sorted unique labels
    num_shards_train: int = 0  # 0: about IMAGES_PER_SHARD images per shard
    num_shards_eval: int = 0
    num_workers: int = 0  # 0: min(32, CPUs + 4) threads
    skip_bad_rows: bool = False
    dry_run: bool = False

    def __post_init__(self) -> None:
        if not self.train_csv or not self.eval_csv:
            raise ValueError("give both train_csv and eval_csv")
        if not self.output_dir and not self.dry_run:
            raise ValueError("give output_dir (only a dry run goes without)")
        for name in ("num_shards_train", "num_shards_eval", "num_workers"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)}")

    def workers(self) -> int:
        return self.num_workers or min(32, (os.cpu_count() or 1) + 4)


@dataclass(frozen=True)
class Row:
    csv_path: str
    line: int
    path: str  # as written in the CSV
    source: str  # where it is read from (relative paths joined to the CSV's folder)
    label: str


@dataclass(frozen=True)
class BadRow:
    csv_path: str
    line: int
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.csv_path}:{self.line}: {self.path}: {self.reason}"


@dataclass(frozen=True)
class ImageInfo:
    height: int
    width: int
    convert: bool  # not an RGB JPEG: stored re-encoded as one


def list_bad_rows(bad_rows: Sequence[BadRow]) -> str:
    """The first MAX_LISTED bad rows, one per indented line, and how many more there are."""
    lines = [f"  {bad}" for bad in bad_rows[:MAX_LISTED]]
    if len(bad_rows) > MAX_LISTED:
        lines.append(f"  ... and {len(bad_rows) - MAX_LISTED} more")
    return "\n".join(lines)


class BadInputError(ValueError):
    """Bad rows, listed (the first MAX_LISTED) in the message; all of them in `bad_rows`."""

    def __init__(self, bad_rows: Sequence[BadRow]) -> None:
        self.bad_rows = tuple(bad_rows)
        super().__init__(
            f"{len(self.bad_rows)} bad row(s); no shard was written (--skip_bad_rows leaves them out "
            f"and lists them in {BAD_ROWS_FILE}):\n{list_bad_rows(self.bad_rows)}")


@dataclass(frozen=True)
class PrepareSummary:
    output_dir: str | None
    num_train_images: int
    num_eval_images: int
    labels: tuple[str, ...]
    num_shards_train: int
    num_shards_eval: int
    dry_run: bool
    bad_rows: tuple[BadRow, ...] = field(default=())

    def describe(self) -> str:
        verb = "would write" if self.dry_run else "wrote"
        where = f" to {self.output_dir}" if self.output_dir else ""
        text = (f"{verb}{where}: {self.num_train_images} training images in {self.num_shards_train} "
                f"shard(s), {self.num_eval_images} evaluation images in {self.num_shards_eval} "
                f"shard(s), {len(self.labels)} classes")
        if self.bad_rows:
            listed_in = "" if self.dry_run else f", listed in {BAD_ROWS_FILE}"
            text += f"\n{len(self.bad_rows)} bad row(s) left out{listed_in}:\n{list_bad_rows(self.bad_rows)}"
        return text


# ---- reading the inputs ----

def _read_input_text(path: str, what: str) -> str:
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
    except tf.errors.NotFoundError:
        raise ValueError(f"{what} {path}: file not found") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{what} {path}: not UTF-8 text ({err})") from None


def resolve(csv_path: str, path: str) -> str:
    """A CSV row's path as read: URLs and absolute paths as given, others under the CSV's folder."""
    if "://" in path or os.path.isabs(path):
        return path
    if "://" in csv_path:
        return f"{csv_path.rsplit('/', 1)[0]}/{path}"
    return os.path.join(os.path.dirname(csv_path), path)


def _is_header(fields: list[str]) -> bool:
    return len(fields) == 2 and fields[0].lower() in HEADER_PATHS and fields[1].lower() in HEADER_LABELS


def read_csv(csv_path: str) -> tuple[list[Row], list[BadRow]]:
    """Rows and malformed rows of a `path,label` CSV; blank lines and a header row are skipped.
    ValueError when the file is missing, unreadable or has no rows."""
    text = _read_input_text(csv_path, "CSV")
    rows, bad = [], []
    first = True
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [f.strip() for f in next(csv.reader([line]), [])]
        if first and _is_header(fields):
            first = False
            continue
        first = False
        shown = line.strip() if len(line.strip()) <= 80 else line.strip()[:77] + "..."
        if len(fields) != 2:
            bad.append(BadRow(csv_path, line_number, shown,
                              f"malformed line: expected 2 fields (path,label), got {len(fields)}"))
        elif not fields[0]:
            bad.append(BadRow(csv_path, line_number, shown, "malformed line: empty path"))
        elif not fields[1]:
            bad.append(BadRow(csv_path, line_number, fields[0], "malformed line: empty label"))
        else:
            rows.append(Row(csv_path, line_number, fields[0], resolve(csv_path, fields[0]), fields[1]))
    if not rows and not bad:
        raise ValueError(f"CSV {csv_path}: no rows (expected lines `path,label`)")
    return rows, bad


def read_labels(path: str) -> list[str]:
    """labels.txt: one label per line, line order = class id; blank lines are ignored."""
    labels, seen = [], {}
    for line_number, line in enumerate(_read_input_text(path, "labels file").splitlines(), start=1):
        label = line.strip()
        if not label:
            continue
        if "," in label:
            raise ValueError(f"{path}:{line_number}: label {label!r} contains a comma")
        if label in seen:
            raise ValueError(f"{path}:{line_number}: label {label!r} repeats line {seen[label]}")
        seen[label] = line_number
        labels.append(label)
    if not labels:
        raise ValueError(f"labels file {path}: no labels")
    return labels


def _missing_classes(labels: Sequence[str], train_rows: Iterable[Row], labels_source: str) -> str | None:
    present = {row.label for row in train_rows}
    missing = [f"{label!r} (id {i})" for i, label in enumerate(labels) if label not in present]
    if not missing:
        return None
    shown = ", ".join(missing[:MAX_LISTED])
    if len(missing) > MAX_LISTED:
        shown += f", ... {len(missing) - MAX_LISTED} more"
    return f"{labels_source}: {len(missing)} class(es) with no training image: {shown}"


# ---- images ----

def _op_message(err: Exception) -> str:
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    if text.startswith("{{function_node"):
        text = text.split("}}", 1)[-1].strip()
    return text.split(" [Op:", 1)[0].strip()


def _read_image(source: str) -> bytes:
    with tf.io.gfile.GFile(source, "rb") as f:
        return f.read()


def _decode_rgb(data: bytes) -> tf.Tensor:
    return tf.io.decode_image(data, channels=3, expand_animations=False)


def inspect_image(source: str) -> ImageInfo | str:
    """The image's size, or the reason it is unusable (never raises for a bad image)."""
    try:
        data = _read_image(source)
    except tf.errors.NotFoundError:
        return "file not found"
    except tf.errors.OpError as err:
        return f"cannot read file ({_op_message(err)})"
    if not data:
        return "empty file"
    try:
        image = _decode_rgb(data)
        components = int(tf.image.extract_jpeg_shape(data)[2]) if data[:3] == b"\xff\xd8\xff" else 0
    except (tf.errors.OpError, ValueError) as err:
        if data[:3] == b"\xff\xd8\xff" and not data.rstrip(b"\x00").endswith(b"\xff\xd9"):
            return f"truncated JPEG (no end-of-image marker; {_op_message(err)})"
        return f"cannot decode image ({_op_message(err)})"
    height, width = int(image.shape[0]), int(image.shape[1])
    if not height or not width:
        return "image has no pixels"
    return ImageInfo(height, width, convert=components != 3)


def encode_row(row: Row, info: ImageInfo, label_id: int) -> bytes:
    """The serialized record of a checked row (read again; converted to RGB JPEG when needed)."""
    try:
        data = _read_image(row.source)
        if info.convert:
            data = tf.io.encode_jpeg(_decode_rgb(data), quality=JPEG_QUALITY).numpy()
    except (tf.errors.OpError, ValueError) as err:
        raise ValueError(f"{row.csv_path}:{row.line}: {row.path}: changed since it was checked "
                         f"({_op_message(err)}); the output dir holds a partial set: remove it and "
                         f"run again") from None
    return records.make_example(data, label_id, row.label, info.height, info.width, row.path).SerializeToString()


# ---- parallel helpers ----

T = TypeVar("T")
R = TypeVar("R")


def _ordered_map(pool: concurrent.futures.Executor, fn: Callable[[T], R], items: Iterable[T],
                 window: int) -> Iterator[R]:
    """pool.map with at most `window` items in flight (pool.map submits everything at once)."""
    pending: collections.deque[concurrent.futures.Future] = collections.deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


class _Progress:
    """A thread-safe keras Progbar of rows done; silent when disabled."""

    def __init__(self, total: int, title: str, enabled: bool) -> None:
        self._lock = threading.Lock()
        self._done = 0
        self._bar = None
        if enabled and total:
            print(title, flush=True)
            interval = 0.05 if sys.stdout.isatty() else 10.0
            self._bar = tf.keras.utils.Progbar(total, unit_name="row", interval=interval)

    def add(self, count: int = 1) -> None:
        with self._lock:
            self._done += count
            if self._bar is not None:
                self._bar.update(self._done)


def write_shard(path: str, serialized: Iterable[bytes]) -> int:
    """Write records to a hidden temp file beside `path`, renamed to `path` once complete."""
    folder, name = path.rsplit("/", 1) if "://" in path else os.path.split(path)
    temp = f"{folder}/.{name}.incomplete" if "://" in path else os.path.join(folder, f".{name}.incomplete")
    count = 0
    try:
        with tf.io.TFRecordWriter(temp) as writer:
            for record in serialized:
                writer.write(record)
                count += 1
        tf.io.gfile.rename(temp, path, overwrite=False)
    except BaseException:
        if tf.io.gfile.exists(temp):
            tf.io.gfile.remove(temp)
        raise
    return count


def check_output_dir(output_dir: str) -> None:
    """ValueError unless `output_dir` is absent or empty."""
    if not tf.io.gfile.exists(output_dir):
        return
    if not tf.io.gfile.isdir(output_dir):
        raise ValueError(f"output_dir {output_dir}: exists and is not a folder")
    entries = tf.io.gfile.listdir(output_dir)
    if entries:
        shown = ", ".join(sorted(entries)[:5]) + (", ..." if len(entries) > 5 else "")
        raise ValueError(f"output_dir {output_dir}: not empty ({shown}); give a new or empty folder")


def default_num_shards(num_images: int) -> int:
    return max(1, math.ceil(num_images / IMAGES_PER_SHARD))


def _split(rows: list[T], num_shards: int) -> list[list[T]]:
    return [rows[i * len(rows) // num_shards:(i + 1) * len(rows) // num_shards] for i in range(num_shards)]


# ---- the run ----

def _check_rows(rows: list[Row], label_ids: dict[str, int], labels_source: str, workers: int,
                verbose: bool) -> tuple[list[tuple[Row, ImageInfo]], list[BadRow]]:
    good, bad = [], []
    known = [row for row in rows if row.label in label_ids]
    bad += [BadRow(row.csv_path, row.line, row.path, f"unknown label {row.label!r} (not in {labels_source})")
            for row in rows if row.label not in label_ids]
    progress = _Progress(len(known), f"checking {len(known)} images", verbose)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for row, info in zip(known, _ordered_map(pool, lambda r: inspect_image(r.source), known, 8 * workers)):
            if isinstance(info, str):
                bad.append(BadRow(row.csv_path, row.line, row.path, info))
            else:
                good.append((row, info))
            progress.add()
    return good, bad


def _write_split(output_dir: str, prefix: str, shards: list[list[tuple[Row, ImageInfo]]],
                 label_ids: dict[str, int], workers: int, progress: _Progress) -> list[int]:
    def encode(item: tuple[Row, ImageInfo]) -> bytes:
        record = encode_row(item[0], item[1], label_ids[item[0].label])
        progress.add()
        return record

    def write(index: int) -> int:
        path = storage.join(output_dir, records.shard_name(prefix, index, len(shards)))
        return write_shard(path, _ordered_map(rows_pool, encode, shards[index], 4 * workers))

    with concurrent.futures.ThreadPoolExecutor(workers) as rows_pool, \
            concurrent.futures.ThreadPoolExecutor(min(workers, len(shards))) as shard_pool:
        futures = [shard_pool.submit(write, i) for i in range(len(shards))]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def prepare(config: PrepareConfig, verbose: bool = True) -> PrepareSummary:
    """Check every row, then (unless a dry run) write the shards and metadata; returns the counts.

    ValueError (BadInputError for bad rows) for bad input, before anything is written."""
    if config.output_dir:
        check_output_dir(config.output_dir)
    train_rows, bad = read_csv(config.train_csv)
    eval_rows, eval_bad = read_csv(config.eval_csv)
    bad += eval_bad
    if config.labels:
        labels, labels_source = read_labels(config.labels), config.labels
    else:
        labels = sorted({row.label for row in train_rows})
        labels_source = f"the labels of {config.train_csv}"
    label_ids = {label: i for i, label in enumerate(labels)}
    missing = _missing_classes(labels, (r for r in train_rows if r.label in label_ids), labels_source)
    if missing:
        raise ValueError(missing + (f"\nand {len(bad)} bad row(s):\n{list_bad_rows(bad)}" if bad else ""))

    workers = config.workers()
    good, checked_bad = _check_rows(train_rows + eval_rows, label_ids, labels_source, workers, verbose)
    bad = sorted(bad + checked_bad, key=lambda b: (b.csv_path != config.train_csv, b.csv_path, b.line))
    if bad and not config.skip_bad_rows:
        raise BadInputError(bad)
    train_ids = {id(row) for row in train_rows}
    train = [item for item in good if id(item[0]) in train_ids]
    evaluation = [item for item in good if id(item[0]) not in train_ids]
    missing = _missing_classes(labels, (row for row, _ in train), labels_source + " (after leaving out bad rows)")
    if missing:
        raise ValueError(f"{missing}; bad rows left out:\n{list_bad_rows(bad)}")
    for rows, csv_path in ((train, config.train_csv), (evaluation, config.eval_csv)):
        if not rows:
            raise ValueError(f"CSV {csv_path}: no usable rows; bad rows left out:\n{list_bad_rows(bad)}")
    random.Random(SHUFFLE_SEED).shuffle(train)
    num_train_shards = min(config.num_shards_train or default_num_shards(len(train)), len(train))
    num_eval_shards = min(config.num_shards_eval or default_num_shards(len(evaluation)), len(evaluation))
    summary = PrepareSummary(config.output_dir, len(train), len(evaluation), tuple(labels),
                             num_train_shards, num_eval_shards, config.dry_run, tuple(bad))
    if config.dry_run:
        return summary

    _write_output(config, labels, train, evaluation, bad, summary, workers, verbose)
    return summary


def _write_output(config: PrepareConfig, labels: list[str], train: list[tuple[Row, ImageInfo]],
                  evaluation: list[tuple[Row, ImageInfo]], bad: list[BadRow], summary: PrepareSummary,
                  workers: int, verbose: bool) -> None:
    """Shards, then labels.txt and bad_rows.csv, then metadata.json (the mark of a complete set)."""
    output_dir = config.output_dir
    label_ids = {label: i for i, label in enumerate(labels)}
    tf.io.gfile.makedirs(output_dir)
    total = len(train) + len(evaluation)
    progress = _Progress(total, f"writing {total} records", verbose)
    shards = {
        prefix: _write_split(output_dir, prefix, _split(items, num_shards), label_ids, workers, progress)
        for prefix, items, num_shards in ((records.TRAIN_PREFIX, train, summary.num_shards_train),
                                          (records.EVAL_PREFIX, evaluation, summary.num_shards_eval))
    }
    storage.write_text(storage.join(output_dir, records.LABELS_FILE), "\n".join(labels) + "\n")
    if config.skip_bad_rows:
        storage.write_text(storage.join(output_dir, BAD_ROWS_FILE), bad_rows_csv(bad))

    def where(path: str) -> str:
        return path if "://" in path else os.path.abspath(path)

    source = {
        "train_csv": where(config.train_csv),
        "eval_csv": where(config.eval_csv),
        "labels": where(config.labels) if config.labels else f"derived: sorted labels of {where(config.train_csv)}",
        "num_bad_rows": len(bad),
        "shuffle_seed": SHUFFLE_SEED,
    }
    metadata = records.build_metadata(labels, shards, label_offset=0, source=source)
    storage.write_json(storage.join(output_dir, records.METADATA_FILE), metadata)


def bad_rows_csv(bad_rows: Sequence[BadRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["csv", "line", "path", "reason"])
    for bad in bad_rows:
        writer.writerow([bad.csv_path, bad.line, bad.path, bad.reason])
    return out.getvalue()
