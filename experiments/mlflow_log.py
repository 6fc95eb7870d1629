"""MLflow tracking (an optional extra): with --mlflow_tracking_uri, one MLflow run per finished
trial of a search (its choices as params, its metrics and costs, the genotype JSON as an artifact)
and one per model of a promote (its row of comparison.csv; the exported files as artifacts of the
exported model's run). The experiment is named after the output dir. Each trial or model is
logged once: what the experiment already holds (by its `amoeba.trial_id` or `amoeba.model` tag) is
not logged again, so a resumed search or a rerun promote logs only what is new. A tracking server
that cannot be reached costs a warning, never the search.

Must not import TensorFlow or Ray; imports mlflow only when a URI is given.
"""

from __future__ import annotations

import json
import logging
import math
import os
from typing import Any, Iterable, Mapping

from core.optional import require_module
from evolution import SearchAlgorithm
from experiments.hparams import METRICS, PROMOTE_METRICS, genotype_hparams

log = logging.getLogger(__name__)
INSTALL = "pip install 'amoeba-nas[mlflow]' (or: pip install mlflow-skinny)"
TRIAL_TAG, MODEL_TAG = "amoeba.trial_id", "amoeba.model"
_logged: dict[tuple[str, str, str], dict[str, str]] = {}  # (uri, experiment, tag) -> {value: its run id}


def check_mlflow(uri: str | None) -> None:
    """A config error (ValueError) with the pip line when a URI is given and mlflow is not installed."""
    try:
        if uri:
            require_module("mlflow", "mlflow_tracking_uri", INSTALL)
    except ImportError as err:
        raise ValueError(str(err)) from None


def experiment_name(output_dir: str) -> str:
    return os.path.basename(os.path.normpath(os.path.abspath(output_dir)))


def _client_and_experiment(uri: str, output_dir: str) -> tuple[Any, str]:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    name = experiment_name(output_dir)
    found = client.get_experiment_by_name(name)
    experiment_id = found.experiment_id if found else client.create_experiment(
        name, tags={"amoeba.output_dir": os.path.abspath(output_dir)})
    return client, experiment_id


def _already(client: Any, experiment_id: str, uri: str, tag: str) -> dict[str, str]:
    """{the tag's value: its run id} of the runs the experiment holds, read once per process, then
    kept up to date."""
    key = (uri, experiment_id, tag)
    if key not in _logged:
        runs = client.search_runs([experiment_id], max_results=50_000)
        _logged[key] = {run.data.tags[tag]: run.info.run_id for run in runs if tag in run.data.tags}
    return _logged[key]


def _params(values: Mapping[str, Any]) -> dict[str, str]:
    return {key[:250]: str(value)[:6000] for key, value in values.items()}


def _metrics(values: Mapping[str, Any], names: Iterable[str]) -> dict[str, float]:
    return {name: float(values[name]) for name in names if isinstance(values.get(name), (int, float))
            and not isinstance(values.get(name), bool) and math.isfinite(values[name])}


def _log_run(client: Any, experiment_id: str, name: str, tags: dict[str, str], params: Mapping[str, Any],
             metrics: Mapping[str, float]) -> str:
    from mlflow.entities import Metric, Param

    run = client.create_run(experiment_id, run_name=name, tags=tags)
    run_id = run.info.run_id
    client.log_batch(run_id, params=[Param(k, v) for k, v in _params(params).items()],
                     metrics=[Metric(k, v, 0, 0) for k, v in metrics.items()])
    return run_id


def log_search_trials(algorithm: SearchAlgorithm, output_dir: str, uri: str) -> int:
    """An MLflow run for each trial with a final result that the experiment does not hold yet; how
    many were logged. A failure to reach the server is a warning."""
    try:
        client, experiment_id = _client_and_experiment(uri, output_dir)
        done = _already(client, experiment_id, uri, TRIAL_TAG)
        vocabulary = tuple(getattr(algorithm.space, "ops", ()) or ())
        logged = 0
        for trial_id, outcome in sorted(algorithm.outcomes.items()):
            if str(trial_id) in done:
                continue
            trial = algorithm.trials[trial_id]
            genotype = trial.genotype.to_json() if hasattr(trial.genotype, "to_json") else trial.genotype
            params = {**genotype_hparams(genotype, vocabulary), "mutation": trial.mutation or "",
                      "parent_id": "" if trial.parent_id is None else trial.parent_id}
            tags = {TRIAL_TAG: str(trial_id), "amoeba.status": outcome.status}
            if outcome.error:
                tags["amoeba.error"] = str(outcome.error)[:5000]
            run_id = _log_run(client, experiment_id, f"trial_{trial_id}", tags, params,
                              _metrics(outcome.metrics, (*METRICS, algorithm.objective)))
            client.log_text(run_id, json.dumps(genotype, indent=1, sort_keys=True), "genotype.json")
            client.set_terminated(run_id, "FINISHED" if outcome.status != "failed" else "FAILED")
            done[str(trial_id)] = run_id
            logged += 1
        return logged
    except Exception as err:  # noqa: BLE001 (the tracking server is not the search's business)
        _warn(uri, err)
        return 0


def log_promoted_models(output_dir: str, uri: str, rows: Iterable[Mapping[str, Any]]) -> int:
    """An MLflow run for each promoted model (comparison.csv's rows) the experiment does not hold
    yet; how many were logged. A failure to reach the server is a warning."""
    try:
        client, experiment_id = _client_and_experiment(uri, output_dir)
        done = _already(client, experiment_id, uri, MODEL_TAG)
        made = 0
        for row in rows:
            name = str(row.get("name"))
            if name in done:
                continue
            params = {k: row[k] for k in ("kind", "model", "status", "filters", "search_rank", "search_dir")
                      if row.get(k) is not None and not (isinstance(row[k], float) and math.isnan(row[k]))}
            targets = [k for k in row if str(k).startswith("time_to_top")]
            run_id = _log_run(client, experiment_id, name, {MODEL_TAG: name}, params,
                              _metrics(row, (*PROMOTE_METRICS, *targets)))
            client.set_terminated(run_id, "FINISHED" if row.get("status") == "ok" else "FAILED")
            done[name] = run_id
            made += 1
        return made
    except Exception as err:  # noqa: BLE001
        _warn(uri, err)
        return 0


def log_exported_model(output_dir: str, uri: str, name: str, export_dir: str) -> None:
    """The exported files of model `name` (parity.json among them) as artifacts of its run."""
    try:
        client, experiment_id = _client_and_experiment(uri, output_dir)
        run_id = _already(client, experiment_id, uri, MODEL_TAG).get(name)
        if run_id is None:
            raise ValueError(f"no run of model {name!r} in experiment {experiment_name(output_dir)!r}")
        client.log_artifacts(run_id, export_dir, "exported_model")
    except Exception as err:  # noqa: BLE001
        _warn(uri, err)


def _warn(uri: str, err: Exception) -> None:
    log.warning("could not log to MLflow at %s: %s", uri, err)
    print(f"warning: could not log to MLflow at {uri}: {err}", flush=True)
