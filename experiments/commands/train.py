"""amoeba train --model=NAME_OR_GENOTYPE.json --data=DIR --model_dir=DIR [flags]: full training.

--model: a name of trainer/models.py's table (ImageNet ResNets resnet18..resnet200, CIFAR ResNets
resnet20, resnet32, resnet44, resnet56, resnet110, amoebanet_a, amoebanet_d, nasnet_a), or a
genotype JSON file (e.g. a search's best_genotype.json). --data: a dir made by
`amoeba prepare` (local or gs://). A model_dir that holds a checkpoint is resumed: keep it to
continue (also on new data), delete it to start fresh. --export_dir exports a SavedModel at the end.
"""

from __future__ import annotations

import dataclasses
import sys

from absl import app, flags

from trainer.train_config import OPTIMIZERS, SCHEDULES, TrainConfig
from trainer.proxy import PRECISIONS

FLAGS = flags.FlagValues()
USES_TENSORFLOW = True  # the CLI imports it first, quietly
F = {"flag_values": FLAGS}
D = {f.name: f.default for f in dataclasses.fields(TrainConfig)}  # defaults: the config's own
flags.DEFINE_string("model", None, "Model name or genotype JSON file.", **F)
flags.DEFINE_string("data", None, "Prepared TFRecord dir (amoeba prepare).", **F)
flags.DEFINE_string("model_dir", None, "Checkpoints, TensorBoard logs, eval results.", **F)
flags.DEFINE_string("export_dir", None, "Export a SavedModel here after training.", **F)
flags.DEFINE_integer("train_batch_size", D["train_batch_size"], "Global training batch size.", **F)
flags.DEFINE_integer("eval_batch_size", D["eval_batch_size"], "Global evaluation batch size.", **F)
flags.DEFINE_integer("train_steps", D["train_steps"], "Training steps (0: use num_epochs).", **F)
flags.DEFINE_float("num_epochs", D["num_epochs"], "Training epochs, when train_steps is 0.", **F)
flags.DEFINE_integer("steps_per_eval", D["steps_per_eval"], "Evaluate every this many steps (0: at the end).", **F)
flags.DEFINE_integer("image_size", D["image_size"], "Input image size.", **F)
flags.DEFINE_integer("num_cells", D["num_cells"], "NASNet family: N, normal cells per stack (3 stacks), as in "
                     "amoeba search.", **F)
flags.DEFINE_integer("filters", D["filters"], "NASNet family: F, filters of the first stack, as in amoeba search.",
                     **F)
flags.DEFINE_float("learning_rate", D["learning_rate"], "Peak learning rate.", **F)
flags.DEFINE_enum("lr_schedule", D["lr_schedule"], list(SCHEDULES), "Decay after warm-up.", **F)
flags.DEFINE_float("lr_decay_value", D["lr_decay_value"], "Decay factor (exponential: per lr_decay_epochs; "
                   "piecewise: per boundary).", **F)
flags.DEFINE_list("lr_decay_epochs", [f"{e:g}" for e in D["lr_decay_epochs"]], "Exponential: decay period in "
                  "epochs; piecewise: boundaries.", **F)
flags.DEFINE_float("lr_warmup_epochs", D["lr_warmup_epochs"], "Linear warm-up epochs.", **F)
flags.DEFINE_enum("optimizer", D["optimizer"], list(OPTIMIZERS), "Optimizer.", **F)
flags.DEFINE_float("momentum", D["momentum"], "Momentum of rmsprop and momentum.", **F)
flags.DEFINE_float("weight_decay", D["weight_decay"], "L2 weight decay (not on BN or biases).", **F)
flags.DEFINE_float("label_smoothing", D["label_smoothing"], "Label smoothing.", **F)
flags.DEFINE_enum("precision", D["precision"], list(PRECISIONS), "Compute precision: bfloat16 and mixed_float16 "
                  "compute in 16 bits and keep float32 weights.", **F)
flags.DEFINE_integer("iterations_per_loop", D["iterations_per_loop"], "Steps per tf.function call "
                     "(steps_per_execution).", **F)
flags.DEFINE_integer("save_checkpoints_steps", D["save_checkpoints_steps"], "Checkpoint every N steps (0: every "
                     "save_checkpoints_secs).", **F)
flags.DEFINE_float("save_checkpoints_secs", D["save_checkpoints_secs"], "With save_checkpoints_steps 0: checkpoint "
                   "at the first loop end this long after the last (and always at evaluations and the end).", **F)
flags.DEFINE_string("tpu", D["tpu"], "TPU name: train with TPUStrategy.", **F)
flags.DEFINE_float("dropout", D["dropout"], "Dropout before the classifier.", **F)
flags.DEFINE_float("drop_path_keep_prob", D["drop_path_keep_prob"], "NASNet family: ScheduledDropPath final keep "
                   "probability.", **F)
flags.DEFINE_float("aux_weight", D["aux_weight"], "NASNet family: auxiliary head loss weight (0: no head).", **F)
flags.DEFINE_integer("label_offset", D["label_offset"], "Subtracted from record labels (default: the data's "
                     "metadata.json; 1 for ImageNet TFRecords).", **F)
flags.DEFINE_bool("cache", D["cache"], "Cache decoded data in memory (small data).", **F)
flags.DEFINE_integer("seed", D["seed"], "Seed.", **F)
# Old spellings, still read (with a warning): the vocabulary of amoeba search is the one
DEPRECATED = {"reduction_size": "filters", "lr": "learning_rate"}
flags.DEFINE_integer("reduction_size", None, "Deprecated: --filters.", **F)
flags.DEFINE_float("lr", None, "Deprecated: --learning_rate.", **F)


def _apply_deprecated_spellings() -> None:
    for old, new in DEPRECATED.items():
        if FLAGS[old].value is not None:
            print(f"amoeba train: --{old} is deprecated; use --{new}", file=sys.stderr)
            if FLAGS[new].present:
                raise app.UsageError(f"--{old} and --{new} are the same flag; give --{new} only")
            FLAGS[new].value = FLAGS[old].value


def config_from_flags():
    from experiments.commands.show import load_genotype
    from trainer.models import MODEL_NAMES

    for name in ("model", "data", "model_dir"):
        if not FLAGS[name].value:
            raise app.UsageError(f"train needs --{name}")
    _apply_deprecated_spellings()
    model, genotype = FLAGS.model, None
    if model not in MODEL_NAMES:
        try:
            genotype = load_genotype(model)
        except ValueError as err:
            raise app.UsageError(f"--model: not one of {', '.join(MODEL_NAMES)}, and {err}") from None
        model = "genotype"
    try:
        return TrainConfig(
            model=model, genotype=genotype, data=FLAGS.data, model_dir=FLAGS.model_dir,
            train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
            train_steps=FLAGS.train_steps, num_epochs=FLAGS.num_epochs, steps_per_eval=FLAGS.steps_per_eval,
            image_size=FLAGS.image_size, num_cells=FLAGS.num_cells, filters=FLAGS.filters,
            learning_rate=FLAGS.learning_rate, lr_schedule=FLAGS.lr_schedule, lr_decay_value=FLAGS.lr_decay_value,
            lr_decay_epochs=tuple(float(e) for e in FLAGS.lr_decay_epochs),
            lr_warmup_epochs=FLAGS.lr_warmup_epochs, optimizer=FLAGS.optimizer, momentum=FLAGS.momentum,
            weight_decay=FLAGS.weight_decay, label_smoothing=FLAGS.label_smoothing, precision=FLAGS.precision,
            iterations_per_loop=FLAGS.iterations_per_loop, save_checkpoints_steps=FLAGS.save_checkpoints_steps,
            save_checkpoints_secs=FLAGS.save_checkpoints_secs,
            tpu=FLAGS.tpu, dropout=FLAGS.dropout, drop_path_keep_prob=FLAGS.drop_path_keep_prob,
            aux_weight=FLAGS.aux_weight, label_offset=FLAGS.label_offset, cache=FLAGS.cache, seed=FLAGS.seed,
        )
    except ValueError as err:
        raise app.UsageError(str(err)) from None


def main(args: list[str]) -> None:
    if args:
        raise app.UsageError(f"train takes no positional arguments, got {args}")
    config = config_from_flags()
    from trainer.export import export_model
    from trainer.train import Trainer

    try:
        trainer = Trainer(config)
        trainer.restore()  # a checkpoint of another model, or other labels, fails here, at once
    except (ValueError, FileNotFoundError) as err:
        raise app.UsageError(str(err)) from None
    result = trainer.train()
    print(f"final eval: top1 {result['top1']:.4f} top5 {result['top5']:.4f} loss {result['loss']:.4f} "
          f"on {result['num_examples']} images at step {result['step']}")
    if FLAGS.export_dir:
        export_model(trainer.model, FLAGS.export_dir, config.image_size, trainer.info.labels)
        print(f"exported SavedModel to {FLAGS.export_dir}")
