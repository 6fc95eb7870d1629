"""amoeba inherit --search_dir=DIR --model_dir=DIR [--trial_id=N] [--epochs=E]: a subnet of a
supernet search (`amoeba search --evaluator=supernet`) as an `amoeba train` model dir holding the
weights it inherits from the search's supernet (its BN statistics recalibrated for it, as its trial
was scored), at step 0.

--trial_id: a trial of the search that ended ok (default: the search's best, as
experiments/search/ranking.py ranks). The model dir's recipe is the one `amoeba promote` trains a
net of the search's data with (experiments/search/sizing.py `promote_settings`, its validation
images held out as promote holds them), at the search's image size, for --epochs (default: the
promote's own epochs; the whitening bias's epochs and the evaluations' scaled with them). Then
`amoeba evaluate --model_dir=DIR --export_dir=E` evaluates and exports it with parity checks as it
inherited them, and `amoeba train --flagfile=DIR/train.cfg` fine-tunes it for --epochs from them
(train.cfg holds that recipe as flags).
"""

from __future__ import annotations

SUMMARY = "write a supernet search's subnet with its inherited weights as an amoeba train model dir"  # amoeba --help

import dataclasses
import os
from typing import Any

from absl import app, flags

from core import storage
from core.proxy_config import ProxyConfig
from core.train_config import TrainConfig, at_epochs, genotype_model
from experiments.recipe_flags import NOT_RECIPE, RENAME
from experiments.search import sizing
from experiments.search.inherit import chosen_trial, net_changes, read_search, search_proxy, write_inherited

FLAGS = flags.FlagValues()
USES_TENSORFLOW = True  # the CLI imports it first, quietly
flags.DEFINE_string("search_dir", None, "The output dir of an `amoeba search --evaluator=supernet`.",
                    flag_values=FLAGS)
flags.DEFINE_integer("trial_id", None, "The trial whose net to write (default: the search's best).",
                     flag_values=FLAGS)
flags.DEFINE_string("model_dir", None, "The new model dir (one without a checkpoint).", flag_values=FLAGS)
flags.DEFINE_float("epochs", None, "Epochs a fine-tuning `amoeba train` of it trains (default: what amoeba promote "
                                   "trains a net of the search's data for).", flag_values=FLAGS)
FLAGFILE = "train.cfg"  # in the model dir: `amoeba train --flagfile=` fine-tunes it


def subnet_train_config(genotype: Any, proxy: ProxyConfig, model_dir: str, epochs: float | None) -> TrainConfig:
    """The TrainConfig of the subnet: amoeba promote's recipe for the proxy's data (its held-out
    validation images too) at the proxy's image size and BN settings, for `epochs` (None: the
    promote's own), the whitening bias's epochs and the evaluations' scaled with them."""
    facts = sizing.DataFacts.read(proxy.data)
    _, recipe = sizing.promote_settings(facts)
    epochs = recipe["num_epochs"] if epochs is None else float(epochs)
    recipe.update(at_epochs(recipe, epochs), image_size=proxy.input_size,
                  validation_images=sizing.promote_held_out(facts), **net_changes(proxy))
    data = proxy.data if storage.is_gcs(proxy.data) else os.path.abspath(proxy.data)
    model_dir = model_dir if storage.is_gcs(model_dir) else os.path.abspath(model_dir)
    return TrainConfig(model=genotype_model(genotype), genotype=genotype, data=data, model_dir=model_dir, **recipe)


def write_subnet_model_dir(search_dir: str, trial_id: int | None, model_dir: str,
                           epochs: float | None = None) -> dict[str, Any]:
    """Trial `trial_id` (None: the best) of the supernet search in `search_dir` as the model dir
    `model_dir` at step 0 with its inherited weights, and its train.cfg; what was written."""
    from trainer.subnet_model_dir import INHERITED

    saved, algorithm = read_search(search_dir)
    tid = chosen_trial(algorithm, trial_id, search_dir)
    config = subnet_train_config(algorithm.trials[tid].genotype, search_proxy(saved, search_dir), model_dir, epochs)
    written = write_inherited(search_dir, tid, config)
    flagfile = write_flagfile(config, storage.join(config.model_dir, INHERITED))
    return {**written, "key": config.genotype.key(), "model_dir": config.model_dir,
            "epochs": config.num_epochs, "flagfile": flagfile}


def write_flagfile(config: TrainConfig, genotype_file: str) -> str:
    """train.cfg in the model dir: `amoeba train`'s flags for `config` (the recipe's fields that
    differ from their defaults, by their flag names), so `amoeba train --flagfile=` resumes it."""
    lines = [f"--model={genotype_file}", f"--data={config.data}", f"--model_dir={config.model_dir}"]
    for field in dataclasses.fields(TrainConfig):
        value = getattr(config, field.name)
        if field.name in NOT_RECIPE or value == field.default or value is None:
            continue
        name = RENAME.get(field.name, field.name)
        if isinstance(value, bool):
            lines.append(f"--{'' if value else 'no'}{name}")
        else:
            lines.append(f"--{name}={','.join(map(str, value)) if isinstance(value, tuple) else value}")
    path = storage.join(config.model_dir, FLAGFILE)
    storage.write_text(path, "\n".join(lines) + "\n")
    return path


def main(args: list[str]) -> None:
    if args or not FLAGS.search_dir or not FLAGS.model_dir:
        raise app.UsageError("usage: amoeba inherit --search_dir=DIR --model_dir=DIR [--trial_id=N] [--epochs=E]")
    try:
        done = write_subnet_model_dir(FLAGS.search_dir, FLAGS.trial_id, FLAGS.model_dir, FLAGS.epochs)
    except (ValueError, FileNotFoundError) as err:
        raise app.UsageError(str(err)) from None
    print(f"wrote {done['model_dir']}: trial {done['trial_id']} of {done['search_dir']} ({done['key']}, "
          f"{done['params']:,} parameters) with its supernet weights at step 0 (val_accuracy "
          f"{float(done['val_accuracy']):.4f} inherited); evaluate and export it: "
          f"amoeba evaluate --model_dir={done['model_dir']} --export_dir=EXPORT_DIR --export_format=saved_model,tflite; "
          f"fine-tune it {done['epochs']:g} epochs: amoeba train --flagfile={done['flagfile']}")
