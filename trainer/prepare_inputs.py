"""The inputs of `amoeba prepare`: CSVs of `path,label` rows, or folders of class folders (the
layout of Keras's `image_dataset_from_directory`), and an optional labels.txt, read into rows and
bad rows (file:line: path: reason), a stratified split of the training rows when no evaluation
set is given, and the bad rows written back as a CSV.

Relative paths are read under the CSV's folder; blank lines and a header row are skipped. This
module must not read images, write records or build models.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from typing import Iterable, Sequence

import tensorflow as tf

from core import storage
from core.data_dir import IMAGE_EXTENSIONS  # what `amoeba prepare --train_dir` reads, as image_dataset_from_directory

MAX_LISTED = 20  # bad rows (or missing classes) shown in a message, at most
BAD_ROWS_FILE = "bad_rows.csv"
HEADER_PATHS = {"path", "file", "filename", "file_name", "filepath", "file_path", "image", "image_path",
                "img", "uri", "url", "gcs_path"}
HEADER_LABELS = {"label", "labels", "class", "class_name", "category", "label_name", "target"}


@dataclass(frozen=True)
class Row:
    input_path: str  # the CSV, or the folder of class folders, it came from
    line: int  # the CSV's line; 0 for an image of a class folder
    path: str  # as written in the CSV; an image of a class folder: its path under the folder
    source: str  # where it is read from (relative paths joined to the CSV's folder)
    label: str

    @property
    def where(self) -> str:
        """The row as a person finds it: CSV:LINE, or an image of a class folder's path (with the folder's)."""
        return self.source if self.line == 0 else f"{self.input_path}:{self.line}"


@dataclass(frozen=True)
class BadRow:
    input_path: str  # the CSV, or the folder of class folders
    line: int
    path: str
    reason: str

    def __str__(self) -> str:
        if self.line == 0:  # an image of a class folder: its path under the folder given
            return f"{self.input_path.rstrip('/')}/{self.path}: {self.reason}"
        return f"{self.input_path}:{self.line}: {self.path}: {self.reason}"


def list_bad_rows(bad_rows: Sequence[BadRow]) -> str:
    """The first MAX_LISTED bad rows, one per indented line, and how many more there are."""
    lines = [f"  {bad}" for bad in bad_rows[:MAX_LISTED]]
    if len(bad_rows) > MAX_LISTED:
        lines.append(f"  ... and {len(bad_rows) - MAX_LISTED} more")
    return "\n".join(lines)


def bad_noun(from_csv: bool) -> str:
    """What a bad input is called: a row when a CSV was given, else an image (of a class folder)."""
    return "row" if from_csv else "image"


class BadInputError(ValueError):
    """Bad rows, listed (the first MAX_LISTED) in the message; all of them in `bad_rows`.
    `from_csv`: a CSV was given (they are `bad row(s)`), else only class folders (`bad image(s)`)."""

    def __init__(self, bad_rows: Sequence[BadRow], from_csv: bool = True) -> None:
        self.bad_rows = tuple(bad_rows)
        super().__init__(
            f"{len(self.bad_rows)} bad {bad_noun(from_csv)}(s); no shard was written (--skip_bad_rows leaves them out "
            f"and lists them in {BAD_ROWS_FILE}):\n{list_bad_rows(self.bad_rows)}")



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


def read_folders(root: str) -> tuple[list[Row], list[str]]:
    """The images of `root`/CLASS/... (any depth under a class folder; files by extension, case
    aside, others skipped as Keras skips them), each a Row labelled by its class folder (line 0),
    and the class folders, sorted. ValueError when `root` is not a folder or has no class folder."""
    if not tf.io.gfile.isdir(root):
        raise ValueError(f"--train_dir/--eval_dir {root}: not a folder (expected one subfolder of images per class)")
    classes = sorted(name.rstrip("/") for name in tf.io.gfile.listdir(root)
                     if tf.io.gfile.isdir(storage.join(root, name.rstrip("/"))))
    if not classes:
        raise ValueError(f"{root}: no class folders (expected {root}/CLASS/IMAGE.jpg, one subfolder per class)")
    rows = []
    for label in classes:
        for folder, _, files in sorted(tf.io.gfile.walk(storage.join(root, label))):
            for name in sorted(files):
                if name.lower().endswith(IMAGE_EXTENSIONS):
                    source = storage.join(folder, name)
                    rows.append(Row(root, 0, source[len(root):].lstrip("/"), source, label))
    return rows, classes


def split_off(rows: Sequence[Row], fraction: float, seed: int) -> tuple[list[Row], list[Row]]:
    """(training rows, evaluation rows): `fraction` of each class's rows (rounded; at least one of
    a class of two or more, never its last) drawn for evaluation with a seeded shuffle per class."""
    import random

    by_label: dict[str, list[Row]] = {}
    for row in rows:
        by_label.setdefault(row.label, []).append(row)
    train, evaluation = [], []
    for label, group in sorted(by_label.items()):
        group = list(group)
        random.Random(f"{seed}:{label}").shuffle(group)
        n_eval = min(max(1, round(fraction * len(group))), len(group) - 1) if len(group) >= 2 else 0
        evaluation += group[:n_eval]
        train += group[n_eval:]
    return train, evaluation


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


def missing_classes(labels: Sequence[str], train_rows: Iterable[Row], labels_source: str) -> str | None:
    present = {row.label for row in train_rows}
    missing = [f"{label!r} (id {i})" for i, label in enumerate(labels) if label not in present]
    if not missing:
        return None
    shown = ", ".join(missing[:MAX_LISTED])
    if len(missing) > MAX_LISTED:
        shown += f", ... {len(missing) - MAX_LISTED} more"
    return f"{labels_source}: {len(missing)} class(es) with no training image: {shown}"


RARE_SHARE = 0.1  # a derived class with fewer rows than this share of the median class is suspect
NEAR_RATIO = 0.8  # difflib's similarity at which two labels look like one spelt two ways


def suspicious_labels(train_rows: Sequence[Row]) -> str | None:
    """Labels of the training set that look like typos, each with its rows (CSV:LINE, or an image's
    path), or None: a label spelt nearly as one with at least twice its rows (`aeroplane` beside
    `airplane`; case and punctuation aside, or difflib's ratio of NEAR_RATIO or more), or a CSV
    label with fewer rows than RARE_SHARE of the median class's. A class folder with few images is
    not suspect: it is a folder someone made (prepare warns if it gets no evaluation image)."""
    import statistics

    rows: dict[str, list[Row]] = {}
    for row in train_rows:
        rows.setdefault(row.label, []).append(row)
    if len(rows) < 2:
        return None
    counts = {label: len(r) for label, r in rows.items()}
    median = statistics.median(counts.values())
    unit = "image" if all(row.line == 0 for row in train_rows) else "row"
    findings = []
    for label, count in sorted(counts.items(), key=lambda item: (item[1], item[0])):
        near = _spelt_alike(label, [other for other in counts if other != label and counts[other] >= 2 * count])
        rare = count < RARE_SHARE * median and any(row.line for row in rows[label])
        if near or rare:
            why = (f"close to {near!r} ({_count(counts[near], unit)})" if near
                   else f"against a median of {median:g} rows per class")
            where = ", ".join(row.where for row in rows[label][:MAX_LISTED])
            more = f" and {count - MAX_LISTED} more" if count > MAX_LISTED else ""
            findings.append(f"  {label!r}: {count} {unit}(s), {why}: {where}{more}")
    if not findings:
        return None
    return (f"{len(findings)} label(s) of the training set look like typos, not classes:\n" + "\n".join(findings) +
            "\nfix those rows (or folders), or say the classes are right with --labels=labels.txt (one class per "
            "line) or --trust_labels")


def _spelt_alike(label: str, others: Sequence[str]) -> str | None:
    """The first of `others` spelt nearly as `label`: equal but for case and punctuation, or
    difflib's ratio of NEAR_RATIO or more."""
    import difflib

    def plain(text: str) -> str:
        return "".join(c for c in text.lower() if c.isalnum())

    return next((other for other in others if plain(other) == plain(label) or
                 difflib.SequenceMatcher(None, label.lower(), other.lower()).ratio() >= NEAR_RATIO), None)


def bad_rows_csv(bad_rows: Sequence[BadRow], from_csv: bool) -> str:
    """The bad rows as CSV text for bad_rows.csv. When a CSV was given (`from_csv`): the columns
    csv,line,path,reason, an image of a class folder with csv and line empty and its whole path;
    with class folders only: path,reason with each image's whole path. The inputs given choose
    the columns, not which rows were bad (nor whether any was)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["csv", "line", "path", "reason"] if from_csv else ["path", "reason"])
    for bad in bad_rows:
        whole = f"{bad.input_path.rstrip('/')}/{bad.path}"
        if not from_csv:
            writer.writerow([whole, bad.reason])
        else:
            in_csv = [bad.input_path, bad.line, bad.path]
            writer.writerow([*(in_csv if bad.line else ["", "", whole]), bad.reason])
    return out.getvalue()


def split_list_csv(rows: Iterable[Row]) -> str:
    """`path,label` CSV text of the images of one split, in order, each path as it was read (local
    paths made absolute), so that `amoeba prepare --train_csv` reads the list back."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["path", "label"])
    writer.writerows([row.source if "://" in row.source else os.path.abspath(row.source), row.label] for row in rows)
    return out.getvalue()


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def no_evaluation_image(labels: Sequence[str], train: Sequence[Row], evaluation: Sequence[Row],
                        eval_source: str, held_out_of: str | None) -> str | None:
    """A warning naming the classes with training images but no evaluation image (their accuracy
    goes unmeasured), or None. `held_out_of`: the training set the evaluation images were drawn
    from (with --eval_fraction), else None."""
    evaluated = {row.label for row in evaluation}
    counts: dict[str, int] = {}
    for row in train:
        counts[row.label] = counts.get(row.label, 0) + 1
    missing = [label for label in labels if label in counts and label not in evaluated]
    if not missing:
        return None
    more = f", and {len(missing) - MAX_LISTED} more" if len(missing) > MAX_LISTED else ""
    if held_out_of:
        named = ", ".join(f"{label!r} ({_count(counts[label], 'image')} in {held_out_of}, all used for training)"
                          for label in missing[:MAX_LISTED]) + more
    else:
        named = ", ".join(repr(label) for label in missing[:MAX_LISTED]) + more + f" (not in {eval_source})"
    return f"{len(missing)} class(es) with no evaluation image, so their accuracy is not measured: {named}"
