"""Promote a search's best cells: retrain the top-k distinct genotypes beside baseline models under
one recipe (the same data, schedule and budget), each model a Ray trial with its own resources,
then compare them in `comparison.csv` / `comparison.json`.

The plan (which models, at which filters: experiments/promote/promote_plan.py) is fixed by the first run in
`promote_plan.json`; a rerun with the same settings trains only the models without a
`result.json`, each resuming from its checkpoint. Models train in `OUTPUT_DIR/models/NAME` (an
`amoeba train` model_dir: `amoeba evaluate`, `export` and TensorBoard work on it). This module must
not parse flags; TensorFlow is imported only in the trials, to export and to time the racers' steps.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import tempfile
import time
from typing import Any

import pandas as pd

from experiments.promote.comparison import choose
from experiments.tracking.hparams import tune_without_tensorboard, write_promote_hparams
from experiments.tracking.mlflow_log import log_exported_model, log_promoted_models
from experiments.layout import RESULT
from experiments.promote.promote_config import PromoteConfig
from experiments.promote.comparison import FINE_TUNED, INHERITED
from experiments.promote.promote_plan import PlannedModel, model_config, open_plan
from experiments.promote.seed_race import STEP_SECONDS, racers
from experiments.promote.noise import wilson_interval
from experiments.search.resources import trial_resources
from experiments.promote.targets import parse_column, to_targets
from core import storage
from core.correct_images import read_correct
from core.train_config import PROGRESS, config_from_saved

TIMED_STEPS = 8  # steps a racer's step is timed over in each round, after its trace (--race_seeds)
RESULT_KEY = "promote_result"  # the trial's result.json, as JSON text in its Tune report
COMPARISON_COLUMNS = [
    "name", "kind", "model", "status", "params", "multiply_adds", "top1", "top1_low", "top1_high", "eval_images",
    "val_top1", "val_images", "chance_top1", "top5", "epochs", "wall_seconds", "images_per_sec", "filters", "search_trial_id",
    "search_rank", "search_val_accuracy", "search_dir", "same_as", "error", "eval_correct", "val_correct",
]  # and after images_per_sec, time, training multiply-adds and cost to each target (experiments/promote/targets.py);
# eval_correct, val_correct: which images of each split the model got right (core/correct_images.py)


def _trial_name(trial: Any) -> str:
    return trial.config["model"]["name"]


def promote_trial(config: dict[str, Any], threads: int) -> None:
    """A Ray Tune trial: train one planned model (train_planned) and report its result (the driver
    writes it too: on a cluster the trial's disk is not the driver's)."""
    from ray import tune

    result = train_planned(config["model"], threads)
    tune.report({"top1": result["top1"], RESULT_KEY: json.dumps(result)})


def train_planned(config: dict[str, Any], threads: int) -> dict[str, Any]:
    """Train one planned model (trial_spec's), resuming from its checkpoint; write its result.json and
    return it. An inherited net's model dir is first written from its search's supernet (unless it
    holds a checkpoint), then evaluated as it is or fine-tuned from it."""
    from trainer.candidate import set_threads, use_gpu_memory_growth
    from trainer.models import model_report
    from trainer.subnet_model_dir import existing_checkpoint
    from trainer.train import Trainer
    from trainer.worker_setup import reset_keras

    use_gpu_memory_growth()
    set_threads(threads)
    reset_keras()  # a warm worker (more models than slots): the last model's graphs and names go
    train_config = config_from_saved(config["train_config"])
    storage.write_json(storage.join(train_config.model_dir, PROGRESS), {"phase": "building"})  # for the watcher
    inherit = config.get("inherit")
    if inherit and not existing_checkpoint(train_config.model_dir):
        from experiments.search.inherit import write_inherited

        write_inherited(inherit["search_dir"], inherit["trial_id"], train_config)
        reset_keras()
    trainer = Trainer(train_config)
    final = trainer.evaluate_as_is() if config.get("evaluate_only") else trainer.train()
    wall = float(trainer.wall_seconds.numpy())
    steps = int(trainer.optimizer.iterations)
    result = {
        "name": config["name"], **model_report(trainer.model), "top1": final["top1"], "top5": final["top5"],
        "loss": final["loss"], "steps": steps, "epochs": steps * train_config.train_batch_size /
        trainer.info.num_train_images, "wall_seconds": wall,
        "images_per_sec": trainer.images_per_sec() if steps else None,  # training loops only: the search's
        "num_eval_images": final["num_examples"], "val_top1": final.get("val_top1"),
        "val_images": final.get("val_examples"), "history": trainer.evaluations(),
        **{k: v for k, v in read_correct(train_config.model_dir).items() if k.endswith("_correct")},
    }  # eval_correct, val_correct: 1,250 bytes a 10,000 images (a paired test: experiments/promote/noise.py)
    storage.write_json(storage.join(train_config.model_dir, RESULT), result)
    return result


def trial_spec(config: PromoteConfig, m: PlannedModel) -> dict[str, Any]:
    """What train_planned trains for planned model `m`: its name and TrainConfig, and for an inherited
    or fine-tuned net, the search and trial it inherits from (evaluated as it is when INHERITED)."""
    spec = {"name": m.name, "train_config": model_config(config, m).to_json()}
    if m.kind in (INHERITED, FINE_TUNED):
        spec.update(inherit={"search_dir": m.search_dir, "trial_id": m.search_trial_id},
                    evaluate_only=m.kind == INHERITED)
    return spec


def untrained(config: PromoteConfig, planned: list[PlannedModel]) -> list[PlannedModel]:
    """The planned models to train: those without a result.json, each network once (a searched twin
    of a baseline trains as that baseline)."""
    return [m for m in planned
            if not m.same_as and not storage.exists(storage.join(model_config(config, m).model_dir, RESULT))]


def _say_untrained(planned: list[PlannedModel], todo: list[PlannedModel]) -> None:
    """A line for each planned model that is not trained now: a twin, or one already trained."""
    for m in planned:
        if m.same_as:
            print(f"{m.name}: the same network as {m.same_as}, trained once under that name")
        elif m not in todo:
            print(f"{m.name}: already trained ({storage.join('models', m.name, RESULT)})")


def run_promote(config: PromoteConfig, trainable: Any = None) -> pd.DataFrame:
    """Train every planned model not yet finished, as Ray Tune trials; write and return the comparison."""
    import ray
    from ray import tune

    from experiments.search.local_ray import init_ray
    from experiments.search.progress import PromoteProgress

    planned = open_plan(config)
    todo = untrained(config, planned)
    _say_untrained(planned, todo)
    errors: dict[str, str] = {}
    if todo:
        started_ray = not ray.is_initialized()
        if started_ray:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            init_ray(config.ray_address)
        try:
            resources, concurrent = trial_resources(config, ray.cluster_resources())
            if not config.max_concurrent and concurrent > len(todo):  # fewer models than slots: more CPUs each
                resources, concurrent = trial_resources(dataclasses.replace(config, max_concurrent=len(todo)),
                                                        ray.cluster_resources())
            from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

            trainable = trainable or tune.with_parameters(promote_trial, threads=max(1, int(resources["CPU"])))
            models = [trial_spec(config, m) for m in todo]
            grid = tune.Tuner(
                tune.with_resources(trainable, resources),
                param_space={"model": tune.grid_search(models)},
                tune_config=tune.TuneConfig(max_concurrent_trials=concurrent, reuse_actors=True,  # TF imported once
                                            trial_name_creator=_trial_name, trial_dirname_creator=_trial_name),
                run_config=tune.RunConfig(
                    name=time.strftime("tune-%Y%m%d-%H%M%S"), verbose=0,
                    storage_path=_tune_storage(config.output_dir),
                    failure_config=tune.FailureConfig(max_failures=config.max_failures),
                    callbacks=[PromoteProgress({m.name: model_config(config, m).model_dir for m in todo}),
                               CSVLoggerCallback(), JsonLoggerCallback()]),  # no TBX: one HParams session each
            )
            with tune_without_tensorboard():
                grid = grid.fit()
            for result in grid:
                name = result.config["model"]["name"]
                if result.error is not None:
                    errors[name] = _one_line(result.error)
                elif result.metrics and RESULT_KEY in result.metrics:
                    model_dir = model_config(config, next(m for m in todo if m.name == name)).model_dir
                    storage.write_json(storage.join(model_dir, RESULT), json.loads(result.metrics[RESULT_KEY]))
        finally:
            if started_ray:
                ray.shutdown()
    table = comparison_table(config, planned, errors)
    write_comparison(config.output_dir, table)
    if config.race_seeds > 1 and not errors:
        time_racers(config, planned)
    write_promote_hparams(config.output_dir, table.to_dict("records"))  # TensorBoard's HParams dashboard
    if config.mlflow_tracking_uri:
        log_promoted_models(config.output_dir, config.mlflow_tracking_uri, table.to_dict("records"))
    return table


def time_racers(config: PromoteConfig, planned: list[PlannedModel]) -> dict[str, list[float]]:
    """The racers' training steps timed interleaved (trainer/step_timing.py), once: written to the
    promote dir's STEP_SECONDS and read back by a rerun."""
    path = storage.join(config.output_dir, STEP_SECONDS)
    names = [m.name for m in racers(planned)]
    timed = storage.read_json(path) if storage.exists(path) else {}
    if sorted(timed.get("seconds", ())) == sorted(names) and timed.get("rounds") == config.step_rounds:
        return timed["seconds"]
    from trainer.records import read_metadata
    from trainer.step_timing import interleaved_step_seconds

    print(f"timing the training steps of {', '.join(names)} interleaved, {config.step_rounds} rounds (on this "
          "machine)", flush=True)
    try:
        seconds = interleaved_step_seconds({m.name: model_config(config, m) for m in racers(planned)},
                                           read_metadata(config.data).num_classes, config.step_rounds, TIMED_STEPS)
    except Exception as err:  # noqa: BLE001 - the trained models and their comparison stand; a rerun times again
        print(f"warning: could not time the racers' steps ({_one_line(err)}); rerun the same command to time them",
              flush=True)
        return {}
    storage.write_json(path, {"rounds": config.step_rounds, "steps": TIMED_STEPS, "seconds": seconds})
    return seconds


def step_seconds(output_dir: str) -> dict[str, list[float]]:
    """The promote's interleaved step timings (time_racers'), none when it has not timed them."""
    path = storage.join(output_dir, STEP_SECONDS)
    return storage.read_json(path)["seconds"] if storage.exists(path) else {}


def _tune_storage(output_dir: str) -> str:
    """Where Tune keeps its own files: OUTPUT_DIR/tune, or a local folder for a gs:// output dir (Tune's
    storage is kept local; google-cloud-storage writes our results there)."""
    if storage.is_gcs(output_dir):
        return os.path.join(tempfile.gettempdir(), "amoeba-promote-tune", output_dir[len("gs://"):].replace("/", "_"))
    return os.path.abspath(os.path.join(output_dir, "tune"))


def _one_line(error: BaseException) -> str:
    """The last `SomeError: message` line of a trial's error (Ray wraps it in its traceback)."""
    lines = [line.strip() for line in str(error).splitlines()]
    raised = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b.*:", line)]
    return (raised or [line for line in lines if line] or [type(error).__name__])[-1][:200]


def comparison_table(config: PromoteConfig, planned: list[PlannedModel], errors: dict[str, str]) -> pd.DataFrame:
    rows = []
    for m in planned:
        trained = model_config(config, m)
        path = storage.join(trained.model_dir, RESULT)
        result = storage.read_json(path) if storage.exists(path) else {}
        error = errors.get(m.same_as or m.name, "")  # a twin fails with the baseline it shares
        row = {"name": m.name, "kind": m.kind, "model": m.model, "filters": m.filters,
               "search_trial_id": m.search_trial_id, "search_rank": m.search_rank,
               "search_val_accuracy": m.search_val_accuracy, "search_dir": m.search_dir, "same_as": m.same_as,
               "status": "ok" if result else ("failed" if error else "pending"), "error": error}
        row.update({k: result.get(k) for k in ("params", "multiply_adds", "top1", "top5", "epochs", "wall_seconds",
                                                "images_per_sec", "val_top1", "val_images", "eval_correct",
                                                "val_correct")})
        row.update(_top1_noise(result, trained.model_dir))
        if m.kind != INHERITED:  # never trained: no time to a target (the supernet's training is not its own)
            row.update(to_targets(result.get("history", []), config.targets(), result.get("multiply_adds"),
                                  trained.train_batch_size, config.cost_per_hour))
        rows.append(row)
    at = COMPARISON_COLUMNS.index("images_per_sec") + 1
    columns = COMPARISON_COLUMNS[:at] + [c for c in (rows[0] if rows else {}) if parse_column(c)] + \
        COMPARISON_COLUMNS[at:]
    return pd.DataFrame(rows, columns=columns).astype(INTEGER_COLUMNS)


def _top1_noise(result: dict, model_dir: str) -> dict:
    """The top-1's evaluation images, its Wilson 95% interval (experiments/promote/noise.py) and chance
    (1 / the classes in the model dir's labels.txt); None where unknown."""
    n, top1 = result.get("num_eval_images"), result.get("top1")
    low, high = wilson_interval(top1, n) if n and top1 is not None else (None, None)
    labels = storage.join(model_dir, "labels.txt")
    classes = len([l for l in storage.read_text(labels).splitlines() if l.strip()]) if storage.exists(labels) else 0
    return {"top1_low": low, "top1_high": high, "eval_images": n, "chance_top1": 1 / classes if classes else None}


INTEGER_COLUMNS = {"eval_images": "Int64", "val_images": "Int64", "params": "Int64", "multiply_adds": "Int64", "filters": "Int64",
                   "search_trial_id": "Int64", "search_rank": "Int64"}


def write_comparison(output_dir: str, table: pd.DataFrame) -> None:
    storage.write_text(storage.join(output_dir, "comparison.csv"), table.to_csv(index=False))
    storage.write_text(storage.join(output_dir, "comparison.json"), table.to_json(orient="records", indent=2) + "\n")


def read_comparison(output_dir: str) -> pd.DataFrame:
    """comparison.csv as write_comparison wrote it, counts as integers."""
    table = pd.read_csv(io.StringIO(storage.read_text(storage.join(output_dir, "comparison.csv"))))
    return table.astype({k: v for k, v in INTEGER_COLUMNS.items() if k in table})  # older ones lack eval_images


def export_winner(config: PromoteConfig, table: pd.DataFrame) -> tuple[str, str, dict[str, dict]]:
    """Export the model `config.export_choice` picks (experiments/promote/comparison.py's `choose`: each
    search's pick and the baselines, on the validation split, by top-1 or by time to the highest
    --target_top1) from its checkpoint to `config.export_dir` in each of `config.export_format`
    (trainer/export.py); (its name, why in words, each file's parity with the Keras model and its
    own top-1 on the evaluation split). ValueError when none finished."""
    from trainer.train import load_trainer

    target = max(config.target_top1) if config.target_top1 else None
    plan = open_plan(config)
    winner, why = choose(table, config.export_choice, target, histories(config, plan))
    planned = next(m for m in plan if m.name == winner)
    trainer = load_trainer(model_config(config, planned).model_dir, config.data)
    checks = trainer.export(config.export_dir, config.export_format)  # the averaged weights, with --ema_decay
    if config.mlflow_tracking_uri:
        log_exported_model(config.output_dir, config.mlflow_tracking_uri, winner, config.export_dir)
    return winner, why, checks


def histories(config: PromoteConfig, planned: list[PlannedModel]) -> dict[str, list[dict[str, Any]]]:
    """Each finished model's evaluations (its result.json's history), by name (a twin: its baseline's)."""
    found = {}
    for m in planned:
        path = storage.join(model_config(config, m).model_dir, RESULT)
        if storage.exists(path):
            found[m.name] = storage.read_json(path).get("history", [])
    return found
