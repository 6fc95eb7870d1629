"""MLflow tracking (an optional extra): with --mlflow_tracking_uri, one MLflow run per finished
trial of a search (its choices as params, its metrics and costs, the genotype JSON as an artifact)
and one per model of a promote (its row of comparison.csv; the exported files as artifacts of the
exported model's run). The experiment is named after the output dir. Each trial or model is
logged once per result: what the experiment already holds (by its `amoeba.trial_id` or
`amoeba.model` tag) is not logged again, so a resumed search or a rerun promote logs only what is
new. A new result (a trial re-run by --retry_failed; a model trained again after it failed, so its
row of comparison.csv changed) is a new run beside the old one (MLflow's params cannot change), and
the latest run of a model is the one its exported files attach to. A tracking server that cannot
be reached costs a warning, never the search.

Must not import TensorFlow or Ray; imports mlflow only when a URI is given.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Any, Callable, Iterable, Mapping

from core.optional import require_module
from evolution import SearchAlgorithm
from experiments.tracking.hparams import model_record, trial_record

log = logging.getLogger(__name__)
INSTALL = "pip install 'amoeba-nas[mlflow]' (or: pip install mlflow-skinny)"
TRIAL_TAG, MODEL_TAG = "amoeba.trial_id", "amoeba.model"
TOLD_TAG = "amoeba.told_at"  # a trial re-run (--retry_failed) is told again, later: logged again
_logged: dict[tuple[str, str, str], dict[str, Any]] = {}  # (uri, experiment, tag) -> {value: what _already keeps}
_unreachable: set[str] = set()  # URIs that failed in this process: not tried again until a resume


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
    """The client and the output dir's experiment: named after the dir, or, when another dir of that
    name logged there first, after the dir and a hash of its path."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")  # a dead server: seconds, not minutes
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    from mlflow import MlflowClient

    client, where = MlflowClient(tracking_uri=uri), os.path.abspath(output_dir)
    name = experiment_name(output_dir)
    found = client.get_experiment_by_name(name)
    if found and found.tags.get("amoeba.output_dir", where) != where:
        name = f"{name}-{hashlib.sha1(where.encode()).hexdigest()[:8]}"
        found = client.get_experiment_by_name(name)
    experiment_id = found.experiment_id if found else client.create_experiment(
        name, tags={"amoeba.output_dir": where})
    return client, experiment_id


def _already(client: Any, experiment_id: str, uri: str, tag: str, keep: Callable[[Any], Any]) -> dict[str, Any]:
    """{the tag's value: keep(run)} of the runs the experiment holds (of several with one value, the
    latest), read once per process, then kept up to date. A run's identifying tag is set last, so a
    run cut short by a crash is not counted."""
    key = (uri, experiment_id, tag)
    if key not in _logged:
        runs = client.search_runs([experiment_id], max_results=50_000, order_by=["attributes.start_time ASC"])
        _logged[key] = {run.data.tags[tag]: keep(run) for run in runs if tag in run.data.tags}
    return _logged[key]


def _told_at(run: Any) -> str:
    return run.data.tags.get(TOLD_TAG, "")


def _model_run(run: Any) -> tuple[str, str]:
    """A model's run: its id and what it records (`_record_key`)."""
    return run.info.run_id, _record_key(run.data.params, run.data.metrics)


def _record_key(params: Mapping[str, str], metrics: Mapping[str, float]) -> str:
    """Params and metrics as one string, the same for a comparison.csv row and the run logged from it."""
    return json.dumps([sorted(params.items()), sorted((k, float(v)) for k, v in metrics.items())])


def _params(values: Mapping[str, Any]) -> dict[str, str]:
    return {key[:250]: str(value)[:6000] for key, value in values.items()}


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
        if uri in _unreachable:
            return 0
        client, experiment_id = _client_and_experiment(uri, output_dir)
        done = _already(client, experiment_id, uri, TRIAL_TAG, _told_at)
        logged = 0
        for trial_id, outcome in sorted(algorithm.outcomes.items()):
            if done.get(str(trial_id)) == repr(outcome.told_at):
                continue
            genotype = algorithm.trials[trial_id].genotype
            genotype = genotype.to_json() if hasattr(genotype, "to_json") else genotype
            tags = {TOLD_TAG: repr(outcome.told_at), "amoeba.status": outcome.status}
            if outcome.error:
                tags["amoeba.error"] = str(outcome.error)[:5000]
            run_id = _log_run(client, experiment_id, f"trial_{trial_id}", tags, *trial_record(algorithm, trial_id))
            client.log_text(run_id, json.dumps(genotype, indent=1, sort_keys=True), "genotype.json")
            client.set_tag(run_id, TRIAL_TAG, str(trial_id))  # last: the run is whole
            client.set_terminated(run_id, "FINISHED" if outcome.status != "failed" else "FAILED")
            done[str(trial_id)] = repr(outcome.told_at)
            logged += 1
        return logged
    except Exception as err:  # noqa: BLE001 (the tracking server is not the search's business)
        _warn(uri, err)
        return 0


def log_promoted_models(output_dir: str, uri: str, rows: Iterable[Mapping[str, Any]]) -> int:
    """An MLflow run for each promoted model (comparison.csv's rows) whose row the experiment does not
    hold yet: a model new to it, or one whose latest run records another row (it failed, and this
    run trained it). How many were logged. A failure to reach the server is a warning."""
    try:
        if uri in _unreachable:
            return 0
        client, experiment_id = _client_and_experiment(uri, output_dir)
        done = _already(client, experiment_id, uri, MODEL_TAG, _model_run)
        made = 0
        for row in rows:
            name, (params, metrics) = str(row.get("name")), model_record(row)
            record = _record_key(_params(params), metrics)
            if name in done and done[name][1] == record:
                continue
            run_id = _log_run(client, experiment_id, name, {}, params, metrics)
            client.set_tag(run_id, MODEL_TAG, name)  # last: the run is whole
            client.set_terminated(run_id, "FINISHED" if row.get("status") == "ok" else "FAILED")
            done[name] = (run_id, record)
            made += 1
        return made
    except Exception as err:  # noqa: BLE001
        _warn(uri, err)
        return 0


def log_exported_model(output_dir: str, uri: str, name: str, export_dir: str) -> None:
    """The exported files of model `name` (parity.json among them) as artifacts of its latest run:
    the one of the training they were exported from."""
    if uri in _unreachable:
        return
    try:
        client, experiment_id = _client_and_experiment(uri, output_dir)
        run_id, _ = _already(client, experiment_id, uri, MODEL_TAG, _model_run).get(name, (None, None))
        if run_id is None:
            raise ValueError(f"no run of model {name!r} in experiment {experiment_name(output_dir)!r}")
        client.log_artifacts(run_id, export_dir, "exported_model")
    except Exception as err:  # noqa: BLE001
        _warn(uri, err)


def _warn(uri: str, err: Exception) -> None:
    """One warning; then the URI is left alone for the rest of this run (a resume logs what is missing)."""
    _unreachable.add(uri)
    line = (f"warning: could not log to MLflow at {uri}: {type(err).__name__}: {err}; not tried again in this "
            "run (rerun the same command to log what is missing)")
    log.warning(line)
    print(line, flush=True)
