"""MLflow tracking (issue 37): a search's trials and a promote's models logged once each to a local
file store and read back by MLflow's own client; a missing mlflow and an unreachable server."""

from __future__ import annotations

import json
import os
import sys

import pytest

from evolution import RegularizedEvolution
from experiments.tracking import mlflow_log
from searchspace import NasNetSpace


def logged_runs(uri: str, experiment: str) -> dict[str, dict]:
    """{run name: {"params", "metrics", "tags", "id"}} of the experiment, by MLflow's client."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    runs = client.search_runs([found.experiment_id]) if found else []
    return {run.info.run_name: {"params": run.data.params, "metrics": run.data.metrics, "tags": run.data.tags,
                                "id": run.info.run_id, "status": run.info.status} for run in runs}


@pytest.fixture
def tracking(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow-skinny has no database store
    monkeypatch.setattr(mlflow_log, "_logged", {})  # a fresh process: what is logged is read from MLflow
    monkeypatch.setattr(mlflow_log, "_unreachable", set())
    return f"file://{tmp_path / 'mlruns'}"


def test_each_finished_trial_is_logged_once_with_its_choices_metrics_and_genotype(tmp_path, tracking, monkeypatch):
    out = str(tmp_path / "my_search")
    os.makedirs(out)
    algorithm = RegularizedEvolution(NasNetSpace(num_blocks=2), population_size=3, sample_size=2, seed=0,
                                     journal_path=os.path.join(out, "journal.jsonl"))
    trials = [algorithm.ask() for _ in range(3)]
    algorithm.tell(trials[0].trial_id, {"val_accuracy": 0.5, "params": 100, "latency_ms": 2.5})
    algorithm.tell(trials[1].trial_id, error="NaN loss: mean training loss nan in epoch 0")
    assert mlflow_log.log_search_trials(algorithm, out, tracking) == 2  # trial 2 is still training
    monkeypatch.setattr(mlflow_log, "_logged", {})  # resumed in a new process
    algorithm.tell(trials[2].trial_id, {"val_accuracy": 0.6, "params": 120})
    assert mlflow_log.log_search_trials(algorithm, out, tracking) == 1  # only the new one
    runs = logged_runs(tracking, "my_search")
    assert sorted(runs) == ["trial_0", "trial_1", "trial_2"]
    other = str(tmp_path / "elsewhere" / "my_search")  # another dir of the same name: an experiment of its own
    os.makedirs(other)
    assert mlflow_log.log_search_trials(algorithm, other, tracking) == 3
    assert len(logged_runs(tracking, "my_search")) == 3
    first = runs["trial_0"]
    assert first["metrics"] == {"val_accuracy": 0.5, "params": 100.0, "latency_ms": 2.5}
    assert first["params"]["mutation"] == "random" and first["tags"]["amoeba.trial_id"] == "0"
    assert sum(int(v) for k, v in first["params"].items() if k.startswith("normal.blocks.ops:")) == 4
    assert runs["trial_1"]["status"] == "FAILED" and "NaN loss" in runs["trial_1"]["tags"]["amoeba.error"]
    from mlflow import MlflowClient

    path = MlflowClient(tracking_uri=tracking).download_artifacts(first["id"], "genotype.json", str(tmp_path))
    assert json.load(open(path)) == trials[0].genotype.to_json()


def test_promoted_models_are_logged_once_and_the_exported_files_beside_the_exported_one(tmp_path, tracking):
    rows = [{"name": "s-trial4", "kind": "searched", "model": "convnet", "status": "ok", "top1": 0.9,
             "params": 1000, "time_to_top1_0.9_s": 1500.0, "search_rank": 1},
            {"name": "resnet20", "kind": "baseline", "model": "resnet20", "status": "ok", "top1": 0.85,
             "time_to_top1_0.9_s": float("nan"), "search_rank": float("nan")}]
    out = str(tmp_path / "promote")
    assert mlflow_log.log_promoted_models(out, tracking, rows) == 2
    assert mlflow_log.log_promoted_models(out, tracking, rows) == 0  # a rerun: logged already
    export = tmp_path / "export"
    export.mkdir()
    (export / "model.tflite").write_bytes(b"tflite")
    (export / "parity.json").write_text("{}")
    mlflow_log.log_exported_model(out, tracking, "s-trial4", str(export))
    runs = logged_runs(tracking, "promote")
    assert sorted(runs) == ["resnet20", "s-trial4"]
    assert runs["s-trial4"]["metrics"] == {"top1": 0.9, "params": 1000.0, "time_to_top1_0.9_s": 1500.0}
    assert runs["s-trial4"]["params"] == {"name": "s-trial4", "kind": "searched", "model": "convnet", "status": "ok",
                                         "search_rank": "1"}
    from mlflow import MlflowClient

    files = [f.path for f in MlflowClient(tracking_uri=tracking).list_artifacts(runs["s-trial4"]["id"],
                                                                                 "exported_model")]
    assert sorted(files) == ["exported_model/model.tflite", "exported_model/parity.json"]


def test_a_model_that_failed_and_is_trained_by_a_rerun_gets_a_new_run_with_its_exported_files(tmp_path, tracking,
                                                                                               monkeypatch):
    """Issue 52 (7): a rerun of promote that trains a model that failed in the first run logs a new,
    FINISHED run of it, and its exported files attach to that run, not to the FAILED one."""
    from mlflow import MlflowClient

    out = str(tmp_path / "promote")
    failed = [{"name": "s-trial4", "kind": "searched", "model": "convnet", "status": "failed"},
              {"name": "resnet20", "kind": "baseline", "model": "resnet20", "status": "ok", "top1": 0.85}]
    assert mlflow_log.log_promoted_models(out, tracking, failed) == 2
    monkeypatch.setattr(mlflow_log, "_logged", {})  # the rerun: a new process
    trained = [{**failed[0], "status": "ok", "top1": 0.9, "params": 1000}, failed[1]]
    assert mlflow_log.log_promoted_models(out, tracking, trained) == 1  # the model trained again; not resnet20
    export = tmp_path / "export"
    export.mkdir()
    (export / "parity.json").write_text("{}")
    mlflow_log.log_exported_model(out, tracking, "s-trial4", str(export))
    monkeypatch.setattr(mlflow_log, "_logged", {})  # a third run trains nothing: nothing new to log
    assert mlflow_log.log_promoted_models(out, tracking, trained) == 0

    client = MlflowClient(tracking_uri=tracking)
    runs = client.search_runs([client.get_experiment_by_name("promote").experiment_id],
                              "tags.`amoeba.model` = 's-trial4'", order_by=["attributes.start_time ASC"])
    assert [(r.info.status, r.data.params["status"]) for r in runs] == [("FAILED", "failed"), ("FINISHED", "ok")]
    assert runs[1].data.metrics == {"top1": 0.9, "params": 1000.0}
    assert [f.path for f in client.list_artifacts(runs[1].info.run_id, "exported_model")] == [
        "exported_model/parity.json"]
    assert client.list_artifacts(runs[0].info.run_id) == []  # the failed attempt exported nothing


def test_no_mlflow_is_a_config_error_and_an_unreachable_server_a_warning(tmp_path, monkeypatch, capsys):
    from experiments.search.driver import SearchConfig

    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed
    with pytest.raises(ValueError, match=r"mlflow_tracking_uri needs mlflow, which is not installed: pip install "
                                         r"'amoeba-nas\[mlflow\]' \(or: pip install mlflow-skinny\)"):
        SearchConfig(output_dir=str(tmp_path), mlflow_tracking_uri="http://127.0.0.1:9")
    monkeypatch.delitem(sys.modules, "mlflow")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    rows = [{"name": "resnet20", "status": "ok", "top1": 0.5}]
    monkeypatch.setattr(mlflow_log, "_unreachable", set())
    assert mlflow_log.log_promoted_models(str(tmp_path), "http://127.0.0.1:9", rows) == 0
    said = capsys.readouterr().out
    assert "warning: could not log to MLflow at http://127.0.0.1:9: " in said and "not tried again" in said
    assert mlflow_log.log_promoted_models(str(tmp_path), "http://127.0.0.1:9", rows) == 0  # at once, silently
    assert capsys.readouterr().out == ""
