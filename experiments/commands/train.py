"""amoeba train --model=NAME_OR_GENOTYPE.json --data=DIR --model_dir=DIR [flags]: full training.

--model: a name of trainer/models.py's table (ImageNet ResNets resnet18..resnet200, CIFAR ResNets
resnet20, resnet32, resnet44, resnet56, resnet110, amoebanet_a, amoebanet_d, nasnet_a), or a
genotype JSON file (e.g. a search's best_genotype.json). --data: a dir made by
`amoeba prepare` (local or gs://). A model_dir that holds a checkpoint is resumed: keep it to
continue (also on new data), delete it to start fresh. --export_dir exports it at the end in each
--export_format (saved_model, tflite, tflite_int8, onnx), each file checked against the model.
"""

from __future__ import annotations

SUMMARY = "train a model (a searched cell, AmoebaNet, ResNet) fully on a data dir"  # for `amoeba --help`

from absl import app, flags

from core.export_formats import check_precision, check_runtimes
from experiments.export_flags import define_export_format, exported_lines
from experiments.recipe_flags import define_recipe_flags, recipe_from_flags
from core.train_config import TrainConfig, genotype_model
from searchspace import MacroGenotype

FLAGS = flags.FlagValues()
USES_TENSORFLOW = True  # the CLI imports it first, quietly
flags.DEFINE_string("model", None, "Model name or genotype JSON file.", flag_values=FLAGS)
flags.DEFINE_string("data", None, "Prepared TFRecord dir (amoeba prepare).", flag_values=FLAGS)
flags.DEFINE_string("model_dir", None, "Checkpoints, TensorBoard logs, eval results.", flag_values=FLAGS)
flags.DEFINE_string("export_dir", None, "Export the model here after training (in each --export_format).",
                    flag_values=FLAGS)
define_recipe_flags(FLAGS)
define_export_format(FLAGS)


def config_from_flags():
    from experiments.commands.show import load_genotype
    from trainer.models import MODEL_NAMES

    for name in ("model", "data", "model_dir"):
        if not FLAGS[name].value:
            raise app.UsageError(f"train needs --{name}")
    recipe = recipe_from_flags(FLAGS, "train")
    model, genotype = FLAGS.model, None
    if model not in MODEL_NAMES:
        try:
            genotype = load_genotype(model)
        except ValueError as err:
            raise app.UsageError(f"--model: not one of {', '.join(MODEL_NAMES)}, and {err}") from None
        model = genotype_model(genotype)
        if isinstance(genotype, MacroGenotype):  # a macro genotype: its own cells per stack and F unless the flags say
            model = "nasnet_macro"
            genotype = genotype.resized(filters=FLAGS.filters if FLAGS["filters"].present else None,
                                        cells=FLAGS.num_cells if FLAGS["num_cells"].present else None)
    try:
        return TrainConfig(model=model, genotype=genotype, data=FLAGS.data, model_dir=FLAGS.model_dir, **recipe)
    except ValueError as err:
        raise app.UsageError(str(err)) from None


def main(args: list[str]) -> None:
    if args:
        raise app.UsageError(f"train takes no positional arguments, got {args}")
    config = config_from_flags()
    from trainer.train import Trainer

    try:
        if FLAGS.export_dir:
            check_runtimes(FLAGS.export_format)  # before training, not after
            check_precision(FLAGS.export_format, config.precision)
        trainer = Trainer(config)
        trainer.restore()  # a checkpoint of another model, or other labels, fails here, at once
    except (ValueError, FileNotFoundError, ImportError) as err:
        raise app.UsageError(str(err)) from None
    result = trainer.train()
    print(f"final eval: top1 {result['top1']:.4f} top5 {result['top5']:.4f} loss {result['loss']:.4f} "
          f"on {result['num_examples']} images at step {result['step']}")
    if FLAGS.export_dir:
        try:
            checks = trainer.export(FLAGS.export_dir, FLAGS.export_format)  # the averaged weights, with --ema_decay
        except ValueError as err:  # a file beyond its tolerance; the checkpoint stays: amoeba evaluate --export_dir
            raise app.UsageError(str(err)) from None
        print(exported_lines(FLAGS.export_dir, checks))
