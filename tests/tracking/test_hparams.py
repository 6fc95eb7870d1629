"""TensorBoard HParams (issue 37): a search's trials and a promote's models written as sessions and
read back as TensorBoard reads them."""

from __future__ import annotations

import dataclasses
import glob
import os

import pytest

from evolution import RegularizedEvolution
from experiments.tracking.hparams import genotype_hparams, write_promote_hparams, write_search_hparams
from searchspace import NasNetSpace
from searchspace.convnet import AIRBENCH94


def read_sessions(root: str) -> dict[str, tuple[dict, dict]]:
    """{run: (hyperparameters, metrics)} from the event files under `root`, by TensorBoard's reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    sessions = {}
    for run in sorted(os.listdir(root)):
        events = EventAccumulator(os.path.join(root, run))
        events.Reload()
        content = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
        start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
        hparams = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()}
        metrics = {tag: events.Scalars(tag)[-1].value for tag in events.Tags()["scalars"]}
        sessions[run] = (hparams, metrics)
    return sessions


def hparams_sessions(root: str) -> list[str]:
    """The folders under `root` (relative to it, sorted) whose event files hold an HParams session
    start, each one that TensorBoard's HParams dashboard lists: ours under hparams/, and any other
    writer's (Ray Tune's TBX logger's, under tune/)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    found = set()
    for path in glob.glob(os.path.join(root, "**", "*tfevents*"), recursive=True):
        if any(value.tag == "_hparams_/session_start_info" and value.metadata.plugin_data.plugin_name == "hparams"
               for event in EventFileLoader(path).Load() for value in event.summary.value):
            found.add(os.path.relpath(os.path.dirname(path), root))
    return sorted(found)


def test_a_genotype_becomes_flat_choices_with_its_ops_counted():
    convnet = genotype_hparams(AIRBENCH94.to_json())
    assert convnet["activation"] == "gelu" and convnet["stem"] == "whiten2x2"
    assert (convnet["stages.0.width"], convnet["stages.1.width"], convnet["stages.2.width"]) == (64, 256, 256)
    cell = {"normal": {"blocks": [{"inputs": [0, 1], "ops": ["sep_conv_3x3", "none"]},
                                  {"inputs": [2, 0], "ops": ["sep_conv_3x3", "max_pool_3x3"]}], "concat": [3]}}
    flat = genotype_hparams(cell, vocabulary=("none", "sep_conv_3x3", "max_pool_3x3", "avg_pool_3x3"))
    assert flat == {"normal.blocks.ops:sep_conv_3x3": 2, "normal.blocks.ops:none": 1,
                    "normal.blocks.ops:max_pool_3x3": 1, "normal.blocks.ops:avg_pool_3x3": 0, "normal.concat.0": 3}


def test_a_search_writes_each_finished_trial_once_as_an_hparams_session(tmp_path):
    out = str(tmp_path)
    algorithm = RegularizedEvolution(NasNetSpace(num_blocks=2), population_size=3, sample_size=2, seed=0,
                                     journal_path=os.path.join(out, "journal.jsonl"))
    trials = [algorithm.ask() for _ in range(3)]
    algorithm.tell(trials[0].trial_id, {"val_accuracy": 0.5, "params": 100, "latency_ms": 2.5})
    algorithm.tell(trials[1].trial_id, error="NaN loss")
    assert write_search_hparams(algorithm, out) == 2  # trial 2 is still training: not yet
    sessions = read_sessions(os.path.join(out, "hparams"))
    assert sorted(sessions) == ["trial_0", "trial_1"]
    assert hparams_sessions(out) == ["hparams/trial_0", "hparams/trial_1"]  # as the dashboard finds them
    hparams, metrics = sessions["trial_0"]
    assert metrics == {"val_accuracy": 0.5, "params": 100.0, "latency_ms": 2.5}
    assert hparams["status"] == "ok" and hparams["mutation"] == "random" and hparams["parent_id"] == -1
    ops = {k: v for k, v in hparams.items() if k.startswith("normal.blocks.ops:")}
    assert sum(ops.values()) == 4 and len(ops) == len(NasNetSpace(num_blocks=2).ops)  # every op, 0 when unused
    assert sessions["trial_1"][0]["status"] == "failed" and sessions["trial_1"][1] == {}
    files = sorted(glob.glob(os.path.join(out, "hparams", "*", "*")))
    algorithm.tell(trials[2].trial_id, {"val_accuracy": 0.6, "params": 120})
    assert write_search_hparams(algorithm, out) == 1  # the new one only: a trial is written once
    assert sorted(read_sessions(os.path.join(out, "hparams"))) == ["trial_0", "trial_1", "trial_2"]
    assert [f for f in sorted(glob.glob(os.path.join(out, "hparams", "*", "*"))) if "trial_2" not in f] == files
    retried = algorithm.outcomes[trials[1].trial_id]  # --retry_failed re-runs trial 1: told again, later
    algorithm.outcomes[trials[1].trial_id] = dataclasses.replace(
        retried, status="ok", error=None, metrics={"val_accuracy": 0.7}, told_at=(retried.told_at or 0) + 1)
    assert write_search_hparams(algorithm, out) == 1
    assert read_sessions(os.path.join(out, "hparams"))["trial_1"][0]["status"] == "ok"


def test_a_promote_writes_its_models_as_sessions_rewritten_on_a_rerun(tmp_path):
    rows = [{"name": "s-trial4", "kind": "searched", "model": "convnet", "status": "ok", "top1": 0.9,
             "params": 1000, "time_to_top1_0.9_s": 1500.0, "macs_to_top1_0.9": 1e12, "search_rank": 1},
            {"name": "airbench94@0.5", "kind": "baseline", "model": "airbench94", "status": "ok", "top1": 0.85,
             "params": 500, "time_to_top1_0.9_s": float("nan"), "search_rank": float("nan")}]
    write_promote_hparams(str(tmp_path), rows)
    write_promote_hparams(str(tmp_path), rows)  # a rerun: the same sessions, not twice
    sessions = read_sessions(str(tmp_path / "hparams"))
    assert sorted(sessions) == ["airbench94@0.5", "s-trial4"]
    assert sessions["s-trial4"][0] == {"name": "s-trial4", "kind": "searched", "model": "convnet", "status": "ok",
                                       "search_rank": 1.0}
    assert sessions["s-trial4"][1] == pytest.approx({"top1": 0.9, "params": 1000.0, "time_to_top1_0.9_s": 1500.0})
    assert sessions["airbench94@0.5"][1] == pytest.approx({"top1": 0.85, "params": 500.0})  # never at 0.9: no time
    assert len(glob.glob(str(tmp_path / "hparams" / "s-trial4" / "*"))) == 1
