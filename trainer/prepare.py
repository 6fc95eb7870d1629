"""Your own images -> sharded TFRecords: CSVs of `path,label` rows in, trainer/records.py format out.

Two passes (each image is read twice, so memory stays flat whatever the data size). The first
reads and decodes every image in worker threads and collects every bad row (file:line: path:
reason); without `skip_bad_rows` any bad row fails the run before a shard is written. The second
writes the shards, each under a hidden temp name renamed when complete, then labels.txt,
bad_rows.csv (with skip_bad_rows), train_files.csv and eval_files.csv (each split's images as
`path,label` rows, in shard order) and, last, metadata.json. Training rows are shuffled with a
fixed seed before sharding (CSVs are often sorted by class); evaluation rows keep CSV order.

The run is here; its parts are trainer/prepare_inputs.py (the CSVs and labels),
trainer/prepare_images.py (checking and encoding each image) and trainer/shard_writer.py (shards,
the output dir, the thread pools). This module must not build models, train, or read TFRecords
back.
"""

from __future__ import annotations

import concurrent.futures
import os
import random
from dataclasses import dataclass, field

import tensorflow as tf

from core import storage
from core.prepare_config import PrepareConfig
from trainer import records
from trainer.prepare_images import ImageInfo, decoder_lines_hidden, encode_row, inspect_image
from trainer.prepare_inputs import (BAD_ROWS_FILE, BadInputError, BadRow, Row, bad_noun, bad_rows_csv,
                                    list_bad_rows, missing_classes, no_evaluation_image, read_csv, read_folders,
                                    read_labels, split_list_csv, split_off, suspicious_labels)
from trainer.shard_writer import (Progress, check_output_dir, default_num_shards, ordered_map, split_evenly,
                                  write_shard)

__all__ = [  # with the names commands, tests and trainer/fake_imagenet.py import from here
    "BadInputError", "BadRow", "PrepareConfig", "PrepareSummary", "check_output_dir", "default_num_shards",
    "prepare", "read_csv", "read_labels", "write_shard",
]

SHUFFLE_SEED = 0
SPLIT_FILES = {records.TRAIN_PREFIX: "train_files.csv", records.EVAL_PREFIX: "eval_files.csv"}  # path,label lists


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
    warnings: tuple[str, ...] = field(default=())  # e.g. classes with no evaluation image
    from_csv: bool = True  # a CSV was read (bad rows), else class folders only (bad images)

    def describe(self) -> str:
        verb = "would write" if self.dry_run else "wrote"
        where = f" to {self.output_dir}" if self.output_dir else ""
        text = (f"{verb}{where}: {self.num_train_images} training images in {self.num_shards_train} "
                f"shard(s), {self.num_eval_images} evaluation images in {self.num_shards_eval} "
                f"shard(s), {len(self.labels)} classes")
        if self.bad_rows:
            listed_in = "" if self.dry_run else f", listed in {BAD_ROWS_FILE}"
            noun = bad_noun(self.from_csv)
            text += f"\n{len(self.bad_rows)} bad {noun}(s) left out{listed_in}:\n{list_bad_rows(self.bad_rows)}"
        return text + "".join(f"\nwarning: {warning}" for warning in self.warnings)



def _check_rows(rows: list[Row], label_ids: dict[str, int], labels_source: str, workers: int,
                verbose: bool) -> tuple[list[tuple[Row, ImageInfo]], list[BadRow]]:
    good, bad = [], []
    known = [row for row in rows if row.label in label_ids]
    bad += [BadRow(row.input_path, row.line, row.path, f"unknown label {row.label!r} (not in {labels_source})")
            for row in rows if row.label not in label_ids]
    progress = Progress(len(known), f"checking {len(known)} images", verbose, unit="image")
    with decoder_lines_hidden(), concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for row, info in zip(known, ordered_map(pool, lambda r: inspect_image(r.source), known, 8 * workers)):
            if isinstance(info, str):
                bad.append(BadRow(row.input_path, row.line, row.path, info))
            else:
                good.append((row, info))
            progress.add()
    return good, bad


def _write_split(output_dir: str, prefix: str, shards: list[list[tuple[Row, ImageInfo]]],
                 label_ids: dict[str, int], workers: int, progress: Progress) -> list[int]:
    def encode(item: tuple[Row, ImageInfo]) -> bytes:
        record = encode_row(item[0], item[1], label_ids[item[0].label])
        progress.add()
        return record

    def write(index: int) -> int:
        path = storage.join(output_dir, records.shard_name(prefix, index, len(shards)))
        return write_shard(path, ordered_map(rows_pool, encode, shards[index], 4 * workers))

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
    train_rows, eval_rows, bad, classes = _read_inputs(config)
    train_source, noun = config.train_csv or config.train_dir, bad_noun(config.from_csv)
    if config.labels:
        labels, labels_source = read_labels(config.labels), config.labels
    else:
        suspect = None if config.trust_labels else suspicious_labels(train_rows)
        if suspect:
            raise ValueError(suspect)
        labels = classes or sorted({row.label for row in train_rows})
        labels_source = f"the class folders of {train_source}" if classes else f"the labels of {train_source}"
    label_ids = {label: i for i, label in enumerate(labels)}
    missing = missing_classes(labels, (r for r in train_rows if r.label in label_ids), labels_source)
    if missing:
        raise ValueError(missing + (f"\nand {len(bad)} bad {noun}(s):\n{list_bad_rows(bad)}" if bad else ""))

    workers = config.workers()
    good, checked_bad = _check_rows(train_rows + eval_rows, label_ids, labels_source, workers, verbose)
    bad = sorted(bad + checked_bad, key=lambda b: (b.input_path != train_source, b.input_path, b.line, b.path))
    if bad and not config.skip_bad_rows:
        raise BadInputError(bad, config.from_csv)
    train_ids = {id(row) for row in train_rows}
    train = [item for item in good if id(item[0]) in train_ids]
    evaluation = [item for item in good if id(item[0]) not in train_ids]
    missing = missing_classes(labels, (row for row, _ in train), labels_source + f" (after leaving out bad {noun}s)")
    if missing:
        raise ValueError(f"{missing}; bad {noun}s left out:\n{list_bad_rows(bad)}")
    eval_source = config.eval_csv or config.eval_dir or f"{config.eval_fraction:g} of {train_source}"
    for rows, source in ((train, train_source), (evaluation, eval_source)):
        if not rows:
            raise ValueError(f"{source}: no usable {noun}s; bad {noun}s left out:\n{list_bad_rows(bad)}")
    random.Random(SHUFFLE_SEED).shuffle(train)
    unevaluated = no_evaluation_image(labels, [row for row, _ in train], [row for row, _ in evaluation], eval_source,
                                      train_source if config.eval_fraction else None)
    num_train_shards = min(config.num_shards_train or default_num_shards(len(train)), len(train))
    num_eval_shards = min(config.num_shards_eval or default_num_shards(len(evaluation)), len(evaluation))
    summary = PrepareSummary(config.output_dir, len(train), len(evaluation), tuple(labels), num_train_shards,
                             num_eval_shards, config.dry_run, tuple(bad), (unevaluated,) if unevaluated else (),
                             config.from_csv)
    if config.dry_run:
        return summary

    _write_output(config, labels, train, evaluation, bad, summary, workers, verbose)
    return summary


def _read_inputs(config: PrepareConfig) -> tuple[list[Row], list[Row], list[BadRow], list[str] | None]:
    """(training rows, evaluation rows, malformed rows, the class folders or None) from the CSVs or
    the folders, the evaluation rows split off the training ones with `eval_fraction`."""
    classes = None
    if config.train_dir:
        (train_rows, classes), bad = read_folders(config.train_dir), []
    else:
        train_rows, bad = read_csv(config.train_csv)
    if config.eval_fraction:
        train_rows, eval_rows = split_off(train_rows, config.eval_fraction, SHUFFLE_SEED)
    elif config.eval_dir:
        eval_rows, _ = read_folders(config.eval_dir)
    else:
        eval_rows, eval_bad = read_csv(config.eval_csv)
        bad += eval_bad
    return train_rows, eval_rows, bad, classes


def _write_output(config: PrepareConfig, labels: list[str], train: list[tuple[Row, ImageInfo]],
                  evaluation: list[tuple[Row, ImageInfo]], bad: list[BadRow], summary: PrepareSummary,
                  workers: int, verbose: bool) -> None:
    """Shards, then labels.txt, bad_rows.csv and each split's list of images (SPLIT_FILES, in
    shard order), then metadata.json (the mark of a complete set)."""
    output_dir = config.output_dir
    label_ids = {label: i for i, label in enumerate(labels)}
    tf.io.gfile.makedirs(output_dir)
    total = len(train) + len(evaluation)
    progress = Progress(total, f"writing {total} records", verbose, unit="record")
    shards = {
        prefix: _write_split(output_dir, prefix, split_evenly(items, num_shards), label_ids, workers, progress)
        for prefix, items, num_shards in ((records.TRAIN_PREFIX, train, summary.num_shards_train),
                                          (records.EVAL_PREFIX, evaluation, summary.num_shards_eval))
    }
    storage.write_text(storage.join(output_dir, records.LABELS_FILE), "\n".join(labels) + "\n")
    if config.skip_bad_rows:
        storage.write_text(storage.join(output_dir, BAD_ROWS_FILE), bad_rows_csv(bad, config.from_csv))
    for prefix, items in ((records.TRAIN_PREFIX, train), (records.EVAL_PREFIX, evaluation)):
        storage.write_text(storage.join(output_dir, SPLIT_FILES[prefix]), split_list_csv(row for row, _ in items))

    def where(path: str) -> str:
        return path if "://" in path else os.path.abspath(path)

    given = {name: getattr(config, name) for name in ("train_csv", "train_dir", "eval_csv", "eval_dir")}
    train_source = where(config.train_csv or config.train_dir)
    source = {
        **{name: where(value) for name, value in given.items() if value},
        **({"eval_fraction": config.eval_fraction} if config.eval_fraction else {}),
        "labels": where(config.labels) if config.labels else
        f"derived: sorted {'class folders' if config.train_dir else 'labels'} of {train_source}",
        "num_bad_rows": len(bad),
        "shuffle_seed": SHUFFLE_SEED,
    }
    metadata = {**records.build_metadata(labels, shards, label_offset=0, source=source), "split_files": SPLIT_FILES}
    storage.write_json(storage.join(output_dir, records.METADATA_FILE), metadata)
