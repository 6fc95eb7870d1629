"""Promote a search's best cells: retrain the top-k distinct genotypes beside baseline models under
one recipe (the same data, schedule and budget), each model a Ray trial with its own resources,
then compare them in `comparison.csv` / `comparison.json`.

The plan (which models, at which filters) is fixed by the first run in `promote_plan.json`; a rerun
with the same settings trains only the models without a `result.json`, each resuming from its
checkpoint. Models train in `OUTPUT_DIR/models/NAME` (an `amoeba train` model_dir: `amoeba
evaluate`, `export` and TensorBoard work on it). This module must not parse flags; TensorFlow is
imported only to size the models (--match_params) and in the trials.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import random
import re
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd

from evolution import SearchAlgorithm, resume
from searchspace import MacroGenotype, genotype_from_json
from experiments import ranking
from experiments.comparison import choose
from experiments.hparams import write_promote_hparams
from experiments.mlflow_log import log_exported_model, log_promoted_models
from experiments.layout import CONFIG, JOURNAL, PLAN, RESULT
from experiments.promote_config import PromoteConfig, baseline_model, with_new_recipe_fields
from experiments.noise import wilson_interval
from experiments.resources import trial_resources
from experiments.targets import parse_column, to_targets
from core import storage
from core.train_config import PROGRESS, TrainConfig, config_from_saved, genotype_model

RESULT_KEY = "promote_result"  # the trial's result.json, as JSON text in its Tune report
COMPARISON_COLUMNS = [
    "name", "kind", "model", "status", "params", "multiply_adds", "top1", "top1_low", "top1_high", "eval_images",
    "chance_top1", "top5", "epochs", "wall_seconds", "images_per_sec", "filters", "search_trial_id",
    "search_rank", "search_val_accuracy", "search_dir", "error",
]  # and after images_per_sec, time, training multiply-adds and cost to each target (experiments/targets.py)
MATCH_TOLERANCE = 0.1  # the paper compares cells at equal size: within 10% of the target's parameters


@dataclass(frozen=True)
class PlannedModel:
    name: str  # its dir under models/ and its row of the comparison
    kind: str  # "searched" or "baseline"
    model: str  # a MODEL_FAMILIES name
    genotype: dict[str, Any] | None = None
    filters: int | None = None  # set by --match_params for searched cells
    search_trial_id: int | None = None
    search_rank: int | None = None  # 1: the search's pick, as it ranked the cells promoted from it
    search_val_accuracy: float | None = None
    search_dir: str | None = None
    width_multiplier: float | None = None  # a baseline's NAME@WIDTH


def best_distinct_trials(algorithm: SearchAlgorithm, k: int) -> list[int]:
    """Ids of the k best distinct genotypes' trials as the search ranks them (experiments/ranking.py:
    its score and mode, like with like across rungs; ties: fewer parameters, then the earlier trial).
    A search of several goals (Pareto evolution): k cells evenly spaced along its front in the order
    of its last goal (the cost), cheapest to dearest, then the best others."""
    if len(algorithm.goals) <= 1:
        return ranking.ranked(algorithm, k, distinct=True)
    spread = ranking.spread_along_front(algorithm, k)
    rest = [tid for tid in ranking.ranked(algorithm) if tid not in spread]
    return ranking.first(algorithm, spread + rest, k)


def _search_accuracy(result: dict[str, Any], objective: str) -> float:
    """The search's validation accuracy of a trial (its objective where it reports none: a function
    of one's own); a time-to-accuracy search's objective is seconds."""
    return float(result.get("val_accuracy", result[objective]))


def top_genotypes(search_dir: str, k: int, audit_k: int = 0) -> list[PlannedModel]:
    """The search's best_distinct_trials, as models to promote, each with its rank among them as the
    search ranks (experiments/ranking.py; a Pareto search's are spread along its front); with
    `audit_k`, that many more distinct trials drawn at random (seeded by the dir's name) from those
    ranked below, each with its rank among all the search's distinct trials."""
    path = os.path.join(search_dir, JOURNAL)
    if not os.path.exists(path):
        raise FileNotFoundError(f"--search_dir {search_dir}: no {JOURNAL}; is it an `amoeba search` output dir?")
    algorithm = resume(path, read_only=True)
    chosen = best_distinct_trials(algorithm, k)
    if not chosen and k:
        raise ValueError(f"--search_dir {search_dir}: no successful trial to promote")
    prefix = os.path.basename(os.path.normpath(search_dir))
    by_rank = chosen if len(algorithm.goals) <= 1 else ranking.ranked(algorithm, among=chosen)  # a front's: spread
    rank = {tid: i + 1 for i, tid in enumerate(by_rank)}
    if audit_k:
        everyone = ranking.ranked(algorithm, distinct=True)
        keys = {algorithm.trials[tid].genotype.key() for tid in chosen}
        rest = [tid for tid in everyone if algorithm.trials[tid].genotype.key() not in keys]
        audited = random.Random(f"audit:{prefix}").sample(rest, min(audit_k, len(rest)))
        rank.update({tid: everyone.index(tid) + 1 for tid in audited})
        chosen = chosen + sorted(audited, key=rank.get)
    return [PlannedModel(name=f"{prefix}-trial{tid}", kind="searched",
                         model=genotype_model(algorithm.trials[tid].genotype),
                         genotype=algorithm.trials[tid].genotype.to_json(), search_trial_id=tid,
                         search_rank=rank[tid],
                         search_val_accuracy=_search_accuracy(ranking.result_of(algorithm, tid),
                                                              algorithm.objective),
                         search_dir=os.path.abspath(search_dir))
            for tid in chosen]


def at_given_size(config: PromoteConfig, m: PlannedModel) -> PlannedModel:
    """A macro genotype at --filters and --num_cells where the command line gives them; its own size
    otherwise. Other models as they are (their size is the recipe's)."""
    sizes = {"filters": "filters", "num_cells": "cells"}
    given = {sizes[k]: config.recipe[k] for k in config.size_flags if k in sizes}
    if m.model != "nasnet_macro" or not given:
        return m
    return dataclasses.replace(m, genotype=genotype_from_json(m.genotype).resized(**given).to_json())


def own_size_searches(search_dirs: tuple[str, ...]) -> bool:
    """Whether every search of `search_dirs` searched whole networks (macro or convnet genotypes:
    they train at their own size, not sized to a baseline)."""
    def space(d: str) -> str:
        path = os.path.join(d, CONFIG)
        return storage.read_json(path).get("proxy_space", "nasnet") if os.path.exists(path) else "nasnet"
    return bool(search_dirs) and all(space(d) in ("nasnet_macro", "convnet") for d in search_dirs)


def plan_models(config: PromoteConfig) -> list[PlannedModel]:
    """The searched cells (sized to --match_params when given) and the baselines to train."""
    planned = [at_given_size(config, m) for d in config.search_dirs
               for m in top_genotypes(d, config.top_k, config.audit_k)]
    names = [m.name for m in planned]
    if len(set(names)) < len(names):
        raise ValueError(f"two --search_dir have the same folder name: {names}")
    if config.match_params and planned:
        from trainer.models import count_params, match_filters, model_spec
        from trainer.records import read_metadata

        classes = read_metadata(config.data).num_classes

        def spec(model: str, genotype: Any = None, **changes: Any):
            return model_spec(config.train_config("sizing", model, genotype, **changes), classes)

        if config.match_params.isdigit():
            target = int(config.match_params)
        else:
            model, width = baseline_model(config.match_params)
            target = count_params(spec(model, **({"width_multiplier": width} if width else {})))
        sized = []
        for m in planned:
            try:
                filters, params = match_filters(spec(m.model, genotype_from_json(m.genotype)), target,
                                                MATCH_TOLERANCE)
            except ValueError as err:
                raise ValueError(f"--match_params={config.match_params} ({target:,} parameters), {m.name}: {err}") \
                    from None
            print(f"{m.name}: F={filters}, {params:,} parameters ({params / target - 1:+.1%} of {target:,})")
            sized.append(dataclasses.replace(m, filters=filters))
        planned = sized
    for b in config.baselines:
        model, width = baseline_model(b)
        planned.append(PlannedModel(name=b, kind="baseline", model=model, width_multiplier=width))
    return planned


def default_match_params(output_dir: str, baselines: tuple[str, ...], searched: bool, filters_given: bool
                         ) -> tuple[str | None, str | None]:
    """--match_params when it is not given, and a note to print: a promote already planned keeps what
    its plan was made with (so the same command resumes it); a new one promoting searched cells
    beside baselines, at no --filters of the user's, sizes them to the first baseline (a comparison
    is fair at equal size)."""
    plan = storage.join(output_dir, PLAN)
    if storage.exists(plan):
        return storage.read_json(plan)["settings"].get("match_params"), None
    if baselines and searched and not filters_given:
        return baselines[0], (f"comparing at equal size: each cell's filters are set to match {baselines[0]}'s "
                              "parameters (--filters=F or --match_params=MODEL|COUNT to choose)")
    return None, None


def model_config(config: PromoteConfig, m: PlannedModel) -> TrainConfig:
    genotype = genotype_from_json(m.genotype) if m.genotype else None
    changes = {"filters": m.filters} if m.filters else {}
    if m.filters and isinstance(genotype, MacroGenotype):  # a macro genotype's F is its own: sized, it is another genotype
        genotype, changes = genotype.resized(filters=m.filters), {}
    if m.width_multiplier:
        changes["width_multiplier"] = m.width_multiplier
    return config.train_config(m.name, m.model, genotype, **changes)


def open_plan(config: PromoteConfig) -> list[PlannedModel]:
    """The plan of output_dir: made and saved by the first run; a rerun must have the same settings
    (ValueError naming those that differ), and gets the saved plan."""
    path = storage.join(config.output_dir, PLAN)
    settings = config.settings()
    if storage.exists(path):
        saved = storage.read_json(path)
        changed = changed_keys(with_new_recipe_fields(saved["settings"], settings), settings)
        if changed:
            raise ValueError(f"{config.output_dir} was promoted with other settings ({'; '.join(changed)}): "
                             "rerun with the same flags to resume it, or use a new --output_dir")
        return [PlannedModel(**m) for m in saved["models"]]
    planned = plan_models(config)
    storage.write_json(path, {"settings": settings, "models": [dataclasses.asdict(m) for m in planned],
                              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    return planned


def changed_keys(saved: dict[str, Any], now: dict[str, Any], prefix: str = "") -> list[str]:
    """`name: old -> new` for each key that differs between two plans' settings (plain JSON dicts:
    the plan stores the resolved values, not a config class, so experiments/settings.py's
    `changed_settings` does not apply), a nested one (the recipe's) by its own dotted name, so a
    changed learning rate reads `recipe.learning_rate: 0.1 -> 0.05`."""
    changed = []
    for key in sorted(set(saved) | set(now)):
        old, new = saved.get(key), now.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            changed += changed_keys(old, new, f"{prefix}{key}.")
        elif old != new:
            changed.append(f"{prefix}{key}: {old!r} -> {new!r}")
    return changed


def _trial_name(trial: Any) -> str:
    return trial.config["model"]["name"]


def promote_trial(config: dict[str, Any], threads: int) -> None:
    """A Ray Tune trial: train one planned model (resuming from its checkpoint), write its result.json
    and report it (the driver writes it too: on a cluster the trial's disk is not the driver's)."""
    config = config["model"]
    from ray import tune

    from trainer.candidate import set_threads, use_gpu_memory_growth
    from trainer.models import model_report
    from trainer.train import Trainer
    from trainer.worker_setup import reset_keras

    use_gpu_memory_growth()
    set_threads(threads)
    reset_keras()  # a warm worker (more models than slots): the last model's graphs and names go
    train_config = config_from_saved(config["train_config"])
    storage.write_json(storage.join(train_config.model_dir, PROGRESS), {"phase": "building"})  # for the watcher
    trainer = Trainer(train_config)
    final = trainer.train()
    wall = float(trainer.wall_seconds.numpy())
    steps = int(trainer.optimizer.iterations)
    result = {
        "name": config["name"], **model_report(trainer.model), "top1": final["top1"], "top5": final["top5"],
        "loss": final["loss"], "steps": steps, "epochs": steps * train_config.train_batch_size /
        trainer.info.num_train_images, "wall_seconds": wall,
        "images_per_sec": steps * train_config.train_batch_size / wall if wall else None,
        "num_eval_images": final["num_examples"],
        "history": trainer.evaluations(),
    }
    storage.write_json(storage.join(train_config.model_dir, RESULT), result)
    tune.report({"top1": final["top1"], RESULT_KEY: json.dumps(result)})  # for a driver on another machine


def run_promote(config: PromoteConfig, trainable: Any = None) -> pd.DataFrame:
    """Train every planned model not yet finished, as Ray Tune trials; write and return the comparison."""
    import ray
    from ray import tune

    from experiments.local_ray import init_ray
    from experiments.progress import PromoteProgress

    planned = open_plan(config)
    todo = [m for m in planned if not storage.exists(storage.join(model_config(config, m).model_dir, RESULT))]
    for m in planned:
        if m not in todo:
            print(f"{m.name}: already trained ({storage.join('models', m.name, RESULT)})")
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
            trainable = trainable or tune.with_parameters(promote_trial, threads=max(1, int(resources["CPU"])))
            models = [{"name": m.name, "train_config": model_config(config, m).to_json()} for m in todo]
            grid = tune.Tuner(
                tune.with_resources(trainable, resources),
                param_space={"model": tune.grid_search(models)},
                tune_config=tune.TuneConfig(max_concurrent_trials=concurrent, reuse_actors=True,  # TF imported once
                                            trial_name_creator=_trial_name, trial_dirname_creator=_trial_name),
                run_config=tune.RunConfig(
                    name=time.strftime("tune-%Y%m%d-%H%M%S"), verbose=0,
                    storage_path=_tune_storage(config.output_dir),
                    failure_config=tune.FailureConfig(max_failures=config.max_failures),
                    callbacks=[PromoteProgress({m.name: model_config(config, m).model_dir for m in todo})]),
            ).fit()
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
    write_promote_hparams(config.output_dir, table.to_dict("records"))  # TensorBoard's HParams dashboard
    if config.mlflow_tracking_uri:
        log_promoted_models(config.output_dir, config.mlflow_tracking_uri, table.to_dict("records"))
    return table


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
        row = {"name": m.name, "kind": m.kind, "model": m.model, "filters": m.filters,
               "search_trial_id": m.search_trial_id, "search_rank": m.search_rank,
               "search_val_accuracy": m.search_val_accuracy,
               "search_dir": m.search_dir, "status": "ok" if result else ("failed" if m.name in errors else "pending"),
               "error": errors.get(m.name, "")}
        row.update({k: result.get(k) for k in ("params", "multiply_adds", "top1", "top5", "epochs", "wall_seconds",
                                                "images_per_sec")})
        row.update(_top1_noise(result, trained.model_dir))
        row.update(to_targets(result.get("history", []), config.targets(), result.get("multiply_adds"),
                              trained.train_batch_size, config.cost_per_hour))
        rows.append(row)
    at = COMPARISON_COLUMNS.index("images_per_sec") + 1
    columns = COMPARISON_COLUMNS[:at] + [c for c in (rows[0] if rows else {}) if parse_column(c)] + \
        COMPARISON_COLUMNS[at:]
    return pd.DataFrame(rows, columns=columns).astype(INTEGER_COLUMNS)


def _top1_noise(result: dict, model_dir: str) -> dict:
    """The top-1's evaluation images, its Wilson 95% interval (experiments/noise.py) and chance
    (1 / the classes in the model dir's labels.txt); None where unknown."""
    n, top1 = result.get("num_eval_images"), result.get("top1")
    low, high = wilson_interval(top1, n) if n and top1 is not None else (None, None)
    labels = storage.join(model_dir, "labels.txt")
    classes = len([l for l in storage.read_text(labels).splitlines() if l.strip()]) if storage.exists(labels) else 0
    return {"top1_low": low, "top1_high": high, "eval_images": n, "chance_top1": 1 / classes if classes else None}


INTEGER_COLUMNS = {"eval_images": "Int64", "params": "Int64", "multiply_adds": "Int64", "filters": "Int64",
                   "search_trial_id": "Int64", "search_rank": "Int64"}


def write_comparison(output_dir: str, table: pd.DataFrame) -> None:
    storage.write_text(storage.join(output_dir, "comparison.csv"), table.to_csv(index=False))
    storage.write_text(storage.join(output_dir, "comparison.json"), table.to_json(orient="records", indent=2) + "\n")


def read_comparison(output_dir: str) -> pd.DataFrame:
    """comparison.csv as write_comparison wrote it, counts as integers."""
    table = pd.read_csv(io.StringIO(storage.read_text(storage.join(output_dir, "comparison.csv"))))
    return table.astype({k: v for k, v in INTEGER_COLUMNS.items() if k in table})  # older ones lack eval_images


def export_winner(config: PromoteConfig, table: pd.DataFrame) -> tuple[str, str, dict[str, dict]]:
    """Export the model `config.export_choice` picks (experiments/comparison.py's `choose`: each
    search's pick and the baselines, by top-1 or by time to the highest --target_top1) from its
    checkpoint to `config.export_dir` in each of `config.export_format` (trainer/export.py); (its
    name, why in words, each file's parity with the Keras model).
    ValueError when none finished."""
    from trainer.train import load_trainer

    target = max(config.target_top1) if config.target_top1 else None
    winner, why = choose(table, config.export_choice, target)
    planned = next(m for m in open_plan(config) if m.name == winner)
    trainer = load_trainer(model_config(config, planned).model_dir, config.data)
    checks = trainer.export(config.export_dir, config.export_format)  # the averaged weights, with --ema_decay
    if config.mlflow_tracking_uri:
        log_exported_model(config.output_dir, config.mlflow_tracking_uri, winner, config.export_dir)
    return winner, why, checks
