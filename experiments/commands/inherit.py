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
from core.train_config import TrainConfig, genotype_model
from evolution import SearchAlgorithm, resume
from experiments.layout import CONFIG, JOURNAL
from experiments.recipe_flags import NOT_RECIPE, RENAME
from experiments.search import ranking, sizing
from experiments.search.supernet import supernet_dir, trained

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


def read_search(search_dir: str) -> tuple[dict[str, Any], SearchAlgorithm]:
    """A supernet search's saved settings and its algorithm replayed (read only); ValueError naming
    the dir for one that is not a supernet search, or whose supernet is not trained."""
    config_path, journal = os.path.join(search_dir, CONFIG), os.path.join(search_dir, JOURNAL)
    if not (os.path.exists(config_path) and os.path.exists(journal)):
        raise ValueError(f"{search_dir}: no {CONFIG} and {JOURNAL}; give the output dir of an `amoeba search "
                         "--evaluator=supernet`")
    saved = storage.read_json(config_path)
    if saved.get("evaluator", "train") != "supernet":
        raise ValueError(f"{search_dir}: not a supernet search (its {CONFIG} says evaluator "
                         f"{saved.get('evaluator', 'train')!r}): its nets trained from scratch and inherit no "
                         "weights; train one with `amoeba train --model` or `amoeba promote`")
    if trained(search_dir) is None:
        raise ValueError(f"{search_dir}: its supernet is not trained yet (no {supernet_dir(search_dir)}/supernet.json); "
                         "run the search until it is")
    return saved, resume(journal, read_only=True)


def chosen_trial(algorithm: SearchAlgorithm, trial_id: int | None, search_dir: str) -> int:
    """`trial_id`, or the search's best; ValueError naming the trial when it did not end ok."""
    if trial_id is None:
        best = ranking.best(algorithm)
        if best is None:
            raise ValueError(f"{search_dir}: no trial ended ok yet, so there is no best to write")
        return best[0].trial_id
    if trial_id not in algorithm.trials:
        raise ValueError(f"{search_dir}: no trial {trial_id} (its trials: 0 to {len(algorithm.trials) - 1})")
    outcome = algorithm.outcomes.get(trial_id)
    if outcome is None or outcome.status != "ok":
        why = "has not ended" if outcome is None else f"ended {outcome.status}" + (
            f" ({outcome.error})" if outcome.error else "")
        raise ValueError(f"{search_dir}: trial {trial_id} {why}; only a trial that ended ok has a score to inherit")
    return trial_id


def search_proxy(saved: dict[str, Any], search_dir: str) -> ProxyConfig:
    """The proxy task the search trained its supernet on; ValueError for one on no prepared data dir."""
    names = {f.name for f in dataclasses.fields(ProxyConfig)}
    proxy = ProxyConfig(**{k: v for k, v in (saved.get("proxy") or {}).items() if k in names})
    if not proxy.data:
        raise ValueError(f"{search_dir}: it searched on the built-in {proxy.dataset!r} data, not a dir made by "
                         "`amoeba prepare`, which `amoeba train` needs")
    return proxy


def subnet_train_config(genotype: Any, proxy: ProxyConfig, model_dir: str, epochs: float | None) -> TrainConfig:
    """The TrainConfig of the subnet: amoeba promote's recipe for the proxy's data (its held-out
    validation images too) at the proxy's image size, for `epochs` (None: the promote's own), the
    whitening bias's epochs and the evaluations' scaled with them."""
    facts = sizing.DataFacts.read(proxy.data)
    _, recipe = sizing.promote_settings(facts)
    epochs = recipe["num_epochs"] if epochs is None else float(epochs)
    if not epochs > 0:
        raise ValueError(f"epochs: a positive number of epochs to fine-tune, got {epochs:g}")
    scale = epochs / recipe["num_epochs"]
    recipe.update(num_epochs=epochs, whiten_bias_epochs=round(recipe["whiten_bias_epochs"] * scale, 2),
                  epochs_per_eval=round(recipe["epochs_per_eval"] * scale, 2), image_size=proxy.input_size,
                  validation_images=sizing.promote_held_out(facts),
                  **{name: getattr(proxy, name) for name in ("bn_momentum", "bn_epsilon") if getattr(proxy, name)})
    data = proxy.data if storage.is_gcs(proxy.data) else os.path.abspath(proxy.data)
    model_dir = model_dir if storage.is_gcs(model_dir) else os.path.abspath(model_dir)
    return TrainConfig(model=genotype_model(genotype), genotype=genotype, data=data, model_dir=model_dir, **recipe)


def write_subnet_model_dir(search_dir: str, trial_id: int | None, model_dir: str,
                           epochs: float | None = None) -> dict[str, Any]:
    """Trial `trial_id` (None: the best) of the supernet search in `search_dir` as the model dir
    `model_dir` at step 0 with its inherited weights, and its train.cfg; what was written."""
    from trainer.subnet_model_dir import INHERITED, existing_checkpoint, write_model_dir

    saved, algorithm = read_search(search_dir)
    tid = chosen_trial(algorithm, trial_id, search_dir)
    proxy = search_proxy(saved, search_dir)
    config = subnet_train_config(algorithm.trials[tid].genotype, proxy, model_dir, epochs)
    found = existing_checkpoint(config.model_dir)  # before the supernet is loaded (write_model_dir checks too)
    if found:
        raise ValueError(f"{model_dir}: already holds a checkpoint ({found}); give a new --model_dir")
    metrics = algorithm.outcomes[tid].metrics
    source = {"search_dir": os.path.abspath(search_dir), "trial_id": tid,
              "val_accuracy": metrics.get("val_accuracy"), "validation_images": metrics.get("validation_images")}
    written = write_model_dir(config, algorithm.space, proxy, supernet_dir(search_dir), source)
    flagfile = write_flagfile(config, storage.join(config.model_dir, INHERITED))
    return {**source, **written, "key": config.genotype.key(), "model_dir": config.model_dir,
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
