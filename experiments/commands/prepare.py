"""amoeba prepare --train_csv=CSV --eval_csv=CSV --output_dir=DIR [--labels=labels.txt] [flags]
       amoeba prepare --train_dir=DIR [--eval_dir=DIR | --eval_fraction=0.1] --output_dir=DIR [flags]
       amoeba prepare --fake_imagenet --output_dir=DIR [--num_train --num_eval --num_classes --image_size]
       amoeba prepare --index_tfrecords=DIR --label_offset=1

Converts your own images into sharded TFRecords (train-NNNNN-of-MMMMM, validation-NNNNN-of-MMMMM,
metadata.json, labels.txt) for `amoeba train --data=DIR`; train_files.csv and eval_files.csv list
which images went into each split (path,label rows, in shard order). A CSV has one `path,label`
row per image (no header needed; a `path,label` header is skipped); paths are local, gs://, or
relative to the CSV's folder. labels.txt (one label per line, line order = class id) defaults to
the training CSV's sorted labels. Every row is checked before a shard is written: a bad row (missing or undecodable
file, unknown label, malformed line) fails the run with file:line: path: reason, unless
--skip_bad_rows, which leaves it out and lists it in bad_rows.csv. Grey, CMYK and non-JPEG images
are converted to RGB JPEG. --dry_run checks everything and writes nothing.

--train_dir takes photos in folders instead, one subfolder per class (DIR/CLASS/IMAGE.jpg, the
layout of Keras's image_dataset_from_directory; .jpg .jpeg .png .bmp .gif, other files skipped);
the classes are the subfolders, sorted, and labels.txt lists them. --eval_dir is the same for the
evaluation images; --eval_fraction holds out that share of each class of the training set instead.
Bad images are named by their path. A class left with no evaluation image gets a warning.
Without --labels, a CSV label with a handful of rows, or a label or class folder spelt nearly as a
larger one (`aeroplane` beside `airplane`), stops prepare naming its rows, unless --trust_labels.

--index_tfrecords=DIR writes metadata.json and labels.txt for TFRecords made elsewhere (e.g. ImageNet
by tensorflow/tpu's imagenet_to_gcs, with --label_offset=1): one scan counts the images.

--fake_imagenet writes a small ImageNet-format set of coloured-noise images (stored labels from
--label_offset, 1 as in ImageNet) to try recipes without ImageNet.
"""

from __future__ import annotations

SUMMARY = "turn photos in class folders, or CSVs of path,label rows, into a data dir"  # for `amoeba --help`

from absl import app, flags

from core.prepare_config import FakeImagenetConfig, PrepareConfig, PrepareMode, check_counts
from experiments.settings import build, define_flags, flag_settings

FLAGS = flags.FlagValues()
USES_TENSORFLOW = True  # the CLI imports it first, quietly
# Each flag is one field of core/prepare_config.py's settings
MODE = define_flags(PrepareMode, FLAGS, module_name=__name__)
CONVERT = define_flags(PrepareConfig, FLAGS, module_name=__name__)
FAKE = define_flags(FakeImagenetConfig, FLAGS, module_name=__name__)
_OUTPUT_FLAGS = ("output_dir", "num_shards_train", "num_shards_eval")  # where any set is written
_CSV_FLAGS = tuple(s.flag for s in CONVERT if s.flag not in _OUTPUT_FLAGS)
_FAKE_FLAGS = tuple(s.flag for s in FAKE)


def _given(names: tuple[str, ...]) -> list[str]:
    return [f"--{name}" for name in names if FLAGS[name].present]


def _fake() -> None:
    from trainer.fake_imagenet import write_fake_imagenet

    if _given(_CSV_FLAGS):
        raise app.UsageError(f"--fake_imagenet does not take {', '.join(_given(_CSV_FLAGS))}")
    check_counts(FLAGS, _OUTPUT_FLAGS[1:])
    info = write_fake_imagenet(FLAGS.output_dir, **flag_settings(FAKE, FLAGS),
                               num_shards_train=FLAGS.num_shards_train, num_shards_eval=FLAGS.num_shards_eval)
    print(f"wrote to {FLAGS.output_dir}: a fake ImageNet of {info.num_train_images} training and "
          f"{info.num_eval_images} evaluation images, {info.num_classes} classes, label_offset {info.label_offset}")


def _convert() -> None:
    from trainer.prepare import prepare

    if _given(_FAKE_FLAGS):
        raise app.UsageError(f"{', '.join(_given(_FAKE_FLAGS))} go with --fake_imagenet only")
    if not (FLAGS.train_csv or FLAGS.train_dir) or not (FLAGS.eval_csv or FLAGS.eval_dir or FLAGS.eval_fraction):
        raise app.UsageError("prepare needs --train_csv or --train_dir, and --eval_csv, --eval_dir or --eval_fraction "
                             "(or --fake_imagenet)")
    print(prepare(build(PrepareConfig, flag_settings(CONVERT, FLAGS))).describe())


def _index() -> None:
    from trainer.index_records import index_tfrecords

    others = [f for f in _given(_CSV_FLAGS + _FAKE_FLAGS + ("output_dir",)) if f != "--label_offset"]
    if others:
        raise app.UsageError(f"--index_tfrecords does not take {', '.join(others)}")
    info = index_tfrecords(FLAGS.index_tfrecords, FLAGS.label_offset)
    print(f"indexed {FLAGS.index_tfrecords}: {info.num_train_images} training and {info.num_eval_images} "
          f"evaluation images, {info.num_classes} classes, label_offset {info.label_offset}")


def main(args: list[str]) -> None:
    if args:
        raise app.UsageError(f"prepare takes no positional arguments, got {args}")
    if FLAGS.index_tfrecords:
        try:
            return _index()
        except (ValueError, FileNotFoundError) as err:
            raise app.UsageError(str(err)) from None
    if not FLAGS.output_dir and not (FLAGS.dry_run and not FLAGS.fake_imagenet):
        raise app.UsageError("prepare needs --output_dir")
    try:
        _fake() if FLAGS.fake_imagenet else _convert()
    except ValueError as err:  # bad input: nothing (or, for the fake set, nothing new) was written
        raise app.UsageError(str(err)) from None
