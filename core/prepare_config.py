"""`amoeba prepare`'s settings, each one field (its flag and help come from it): PrepareConfig
converts your images (trainer/prepare.py runs it), FakeImagenetConfig writes a fake ImageNet-format
set (trainer/fake_imagenet.py), and PrepareMode picks which of prepare's three jobs runs (the third
indexes TFRecords made elsewhere: trainer/index_records.py).

Pure Python: must not import TensorFlow.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any


def _setting(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class PrepareMode:
    fake_imagenet: bool = _setting(False, "Write a fake ImageNet-format set instead of converting CSVs.")
    index_tfrecords: str | None = _setting(None, "Write metadata.json for the TFRecords in this dir.")


@dataclass(frozen=True)
class PrepareConfig:
    train_csv: str | None = _setting(None, "CSV of training images: `path,label` rows.")
    eval_csv: str | None = _setting(None, "CSV of evaluation images: `path,label` rows.")
    output_dir: str | None = _setting(None, "New or empty folder (local or gs://) for the TFRecords.")
    labels: str | None = _setting(None, "labels.txt, one label per line (default: the training CSV's sorted labels).")
    num_shards_train: int = _setting(0, "Training shards (0: one per ~1,000 images).")
    num_shards_eval: int = _setting(0, "Evaluation shards (0: one per ~1,000 images).")
    num_workers: int = _setting(0, "Threads reading and decoding images (0: CPUs + 4, at most 32).")
    skip_bad_rows: bool = _setting(False, "Leave bad rows out (listed in bad_rows.csv) instead of failing.")
    dry_run: bool = _setting(False, "Check every row and print the counts; write nothing.")
    trust_labels: bool = _setting(False, "Without --labels, take every label of the training CSV as a class, even "
                                         "one with a handful of rows or spelt nearly as another (otherwise those "
                                         "stop prepare, naming their rows).")
    train_dir: str | None = _setting(None, "Instead of --train_csv: a folder with one subfolder of images per class "
                                           "(DIR/CLASS/IMAGE.jpg, as Keras's image_dataset_from_directory reads).")
    eval_dir: str | None = _setting(None, "Instead of --eval_csv: the evaluation images, one subfolder per class.")
    eval_fraction: float = _setting(0.0, "Instead of --eval_csv or --eval_dir: hold out this share of each class "
                                         "of the training set (seeded) to evaluate.")

    def __post_init__(self) -> None:
        if bool(self.train_csv) == bool(self.train_dir):
            raise ValueError("give --train_csv (path,label rows) or --train_dir (one folder of images per class)")
        if sum(bool(v) for v in (self.eval_csv, self.eval_dir, self.eval_fraction)) != 1:
            raise ValueError("give one of --eval_csv, --eval_dir or --eval_fraction (a share of the training set)")
        if not 0.0 <= self.eval_fraction < 1.0:
            raise ValueError(f"eval_fraction: a share in (0, 1), got {self.eval_fraction}")
        if not self.output_dir and not self.dry_run:
            raise ValueError("give output_dir (only a dry run goes without)")
        check_counts(self, ("num_shards_train", "num_shards_eval", "num_workers"))

    def workers(self) -> int:
        return self.num_workers or min(32, (os.cpu_count() or 1) + 4)

    @property
    def from_csv(self) -> bool:
        """Whether a CSV is read: bad inputs are then `bad rows`, else (class folders only) `bad images`."""
        return bool(self.train_csv or self.eval_csv)


@dataclass(frozen=True)
class FakeImagenetConfig:
    num_train: int = _setting(1024, "--fake_imagenet: training images.")
    num_eval: int = _setting(256, "--fake_imagenet: evaluation images.")
    num_classes: int = _setting(10, "--fake_imagenet: classes.")
    image_size: int = _setting(64, "--fake_imagenet: typical image side (sides vary by +-25%).")
    label_offset: int = _setting(1, "--fake_imagenet, --index_tfrecords: stored label = class id + this.")
    seed: int = _setting(0, "--fake_imagenet: random seed.")  # the counts are checked where the set is written


def check_counts(config: Any, names: tuple[str, ...]) -> None:
    """ValueError naming the first of `names` below 0."""
    for name in names:
        if getattr(config, name) < 0:
            raise ValueError(f"{name}: must be >= 0, got {getattr(config, name)}")
