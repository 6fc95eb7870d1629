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

FLAGS = flags.FlagValues()
USES_TENSORFLOW = True  # the CLI imports it first, quietly
F = {"flag_values": FLAGS}

flags.DEFINE_string("train_csv", None, "CSV of training images: `path,label` rows.", **F)
flags.DEFINE_string("eval_csv", None, "CSV of evaluation images: `path,label` rows.", **F)
flags.DEFINE_string("train_dir", None, "Instead of --train_csv: a folder with one subfolder of images per class "
                    "(DIR/CLASS/IMAGE.jpg, as Keras's image_dataset_from_directory reads).", **F)
flags.DEFINE_string("eval_dir", None, "Instead of --eval_csv: the evaluation images, one subfolder per class.", **F)
flags.DEFINE_float("eval_fraction", 0.0, "Instead of --eval_csv or --eval_dir: hold out this share of each class "
                   "of the training set (seeded) to evaluate.", **F)
flags.DEFINE_string("labels", None, "labels.txt, one label per line (default: the training CSV's sorted labels).",
                    **F)
flags.DEFINE_string("output_dir", None, "New or empty folder (local or gs://) for the TFRecords.", **F)
flags.DEFINE_integer("num_shards_train", 0, "Training shards (0: one per ~1,000 images).", lower_bound=0, **F)
flags.DEFINE_integer("num_shards_eval", 0, "Evaluation shards (0: one per ~1,000 images).", lower_bound=0, **F)
flags.DEFINE_integer("num_workers", 0, "Threads reading and decoding images (0: CPUs + 4, at most 32).",
                     lower_bound=0, **F)
flags.DEFINE_boolean("skip_bad_rows", False, "Leave bad rows out (listed in bad_rows.csv) instead of failing.", **F)
flags.DEFINE_boolean("trust_labels", False, "Without --labels, take every label of the training CSV as a class, "
                     "even one with a handful of rows or spelt nearly as another (otherwise those stop prepare, "
                     "naming their rows).", **F)
flags.DEFINE_boolean("dry_run", False, "Check every row and print the counts; write nothing.", **F)
flags.DEFINE_boolean("fake_imagenet", False, "Write a fake ImageNet-format set instead of converting CSVs.", **F)
flags.DEFINE_integer("num_train", 1024, "--fake_imagenet: training images.", lower_bound=1, **F)
flags.DEFINE_integer("num_eval", 256, "--fake_imagenet: evaluation images.", lower_bound=1, **F)
flags.DEFINE_integer("num_classes", 10, "--fake_imagenet: classes.", lower_bound=1, **F)
flags.DEFINE_integer("image_size", 64, "--fake_imagenet: typical image side (sides vary by +-25%).",
                     lower_bound=8, **F)
flags.DEFINE_integer("label_offset", 1, "--fake_imagenet, --index_tfrecords: stored label = class id + this.",
                     lower_bound=0, **F)
flags.DEFINE_string("index_tfrecords", None, "Write metadata.json for the TFRecords in this dir.", **F)
flags.DEFINE_integer("seed", 0, "--fake_imagenet: random seed.", **F)

_CSV_FLAGS = ("train_csv", "eval_csv", "train_dir", "eval_dir", "eval_fraction", "labels", "skip_bad_rows", "dry_run",
              "num_workers", "trust_labels")
_FAKE_FLAGS = ("num_train", "num_eval", "num_classes", "image_size", "label_offset", "seed")


def _given(names: tuple[str, ...]) -> list[str]:
    return [f"--{name}" for name in names if FLAGS[name].present]


def _fake() -> None:
    from trainer.fake_imagenet import write_fake_imagenet

    if _given(_CSV_FLAGS):
        raise app.UsageError(f"--fake_imagenet does not take {', '.join(_given(_CSV_FLAGS))}")
    info = write_fake_imagenet(
        FLAGS.output_dir, num_train=FLAGS.num_train, num_eval=FLAGS.num_eval, num_classes=FLAGS.num_classes,
        image_size=FLAGS.image_size, label_offset=FLAGS.label_offset, seed=FLAGS.seed,
        num_shards_train=FLAGS.num_shards_train, num_shards_eval=FLAGS.num_shards_eval)
    print(f"wrote to {FLAGS.output_dir}: a fake ImageNet of {info.num_train_images} training and "
          f"{info.num_eval_images} evaluation images, {info.num_classes} classes, label_offset {info.label_offset}")


def _convert() -> None:
    from trainer.prepare import PrepareConfig, prepare

    if _given(_FAKE_FLAGS):
        raise app.UsageError(f"{', '.join(_given(_FAKE_FLAGS))} go with --fake_imagenet only")
    if not (FLAGS.train_csv or FLAGS.train_dir) or not (FLAGS.eval_csv or FLAGS.eval_dir or FLAGS.eval_fraction):
        raise app.UsageError("prepare needs --train_csv or --train_dir, and --eval_csv, --eval_dir or --eval_fraction "
                             "(or --fake_imagenet)")
    config = PrepareConfig(
        train_csv=FLAGS.train_csv, eval_csv=FLAGS.eval_csv, output_dir=FLAGS.output_dir, labels=FLAGS.labels,
        train_dir=FLAGS.train_dir, eval_dir=FLAGS.eval_dir, eval_fraction=FLAGS.eval_fraction,
        num_shards_train=FLAGS.num_shards_train, num_shards_eval=FLAGS.num_shards_eval,
        num_workers=FLAGS.num_workers, skip_bad_rows=FLAGS.skip_bad_rows, dry_run=FLAGS.dry_run,
        trust_labels=FLAGS.trust_labels)
    print(prepare(config).describe())


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
