"""amoeba evaluate --model_dir=DIR [--data=DIR] [--export_dir=DIR --export_format=...]: evaluate the
latest checkpoint, and export it.

Rebuilds the model from the model_dir's train_config.json, loads its latest checkpoint, and
evaluates it on the data it was trained with or on --data; --export_dir also exports it in each of
--export_format (saved_model, tflite, tflite_int8, onnx), each file checked against the model on
evaluation images (parity.json).
"""

from __future__ import annotations

SUMMARY = "evaluate a trained model's latest checkpoint on the evaluation split"  # for `amoeba --help`

import json

from absl import app, flags

from core.export_formats import check_runtimes
from experiments.export_flags import define_export_format, exported_lines

FLAGS = flags.FlagValues()
USES_TENSORFLOW = True  # the CLI imports it first, quietly
flags.DEFINE_string("model_dir", None, "The model_dir of an `amoeba train` run.", flag_values=FLAGS)
flags.DEFINE_string("data", None, "Prepared data to evaluate on (default: the training run's).", flag_values=FLAGS)
flags.DEFINE_string("export_dir", None, "Also export the model here.", flag_values=FLAGS)
define_export_format(FLAGS)


def main(args: list[str]) -> None:
    if args or not FLAGS.model_dir:
        raise app.UsageError("usage: amoeba evaluate --model_dir=DIR [--data=DIR] [--export_dir=DIR --export_format=F,...]")
    from trainer.train import load_trainer

    try:
        if FLAGS.export_dir:
            check_runtimes(FLAGS.export_format)  # before the evaluation, not after
        trainer = load_trainer(FLAGS.model_dir, FLAGS.data)
    except (ValueError, FileNotFoundError, ImportError) as err:
        raise app.UsageError(str(err)) from None
    print(json.dumps(trainer.evaluate()))
    if FLAGS.export_dir:
        try:
            checks = trainer.export(FLAGS.export_dir, FLAGS.export_format)  # the averaged weights, with --ema_decay
        except (ValueError, ImportError) as err:
            raise app.UsageError(str(err)) from None
        print(exported_lines(FLAGS.export_dir, checks))
