"""`amoeba results` and the progress summary: read a search's files, while it runs or after."""

import json
import os
import re
from dataclasses import replace

import pytest

from evolution import RegularizedEvolution
from experiments.search.progress import journal_pace, progress_line, status_line
from searchspace import NasNetSpace
from tests.conftest import amoeba_here as amoeba  # in this process: a Python start less each


def search_in_progress(out: str) -> RegularizedEvolution:
    """A search dir as a running driver leaves it: 4 trials asked, 3 told (one failed), 1 in flight."""
    os.makedirs(out)
    with open(os.path.join(out, "search_config.json"), "w") as f:
        json.dump({"max_trials": 10}, f)
    algorithm = RegularizedEvolution(NasNetSpace(num_blocks=2), population_size=3, sample_size=2, seed=0,
                                     journal_path=os.path.join(out, "journal.jsonl"))
    trials = [algorithm.ask() for _ in range(4)]
    algorithm.tell(trials[0].trial_id, {"val_accuracy": 0.5, "params": 100})
    algorithm.tell(trials[1].trial_id, {"val_accuracy": 0.75, "params": 200, "validation_images": 100})
    algorithm.tell(trials[2].trial_id, error="NaN loss: mean training loss nan in epoch 0")
    return algorithm


def test_status_and_progress_lines_count_every_state(tmp_path):
    algorithm = search_in_progress(str(tmp_path / "s"))
    assert status_line(algorithm, 10) == \
        "3/10 done (1 failed), 1 running, 6 left; best 0.7500 (trial 1, 100 validation images)"
    line = progress_line(algorithm, 10, done_at_start=1, elapsed_s=720)
    assert line.startswith("[progress 12m00s] 3/10 done") and "10.0 trials/h" in line and "ETA 42m00s" in line
    assert progress_line(algorithm, 10, done_at_start=3, elapsed_s=5).endswith("-- trials/h; ETA --")
    told = sorted(algorithm.outcomes)  # results 10 minutes apart: 2 more in 20 minutes, 7 left
    algorithm.outcomes.update({t: replace(algorithm.outcomes[t], told_at=1000.0 + 600 * i) for i, t in enumerate(told)})
    assert journal_pace(algorithm, 10) == "6.0 trials/h; ETA 1h10m"


def test_results_of_a_running_search_read_its_files_and_change_nothing(tmp_path):
    out = str(tmp_path / "s")
    search = search_in_progress(out)  # its driver holds the journal's lock: running
    journal = open(os.path.join(out, "journal.jsonl"), "rb").read()

    table = amoeba("results", out).stdout
    assert "regularized_evolution, 3/10 done (1 failed), 1 running, 6 left; best 0.7500 (trial 1, 100 " in table
    assert "trials/h; ETA" in table
    search.close()
    stopped = amoeba("results", out).stdout.splitlines()[0]  # after a Ctrl-C: nothing runs, no ETA
    assert "1 in flight when it stopped (re-issued on resume), 6 left" in stopped
    assert stopped.endswith("trials/h; stopped"), stopped
    assert table.index("0.7500") < table.index("0.5000")  # best first

    rows = json.loads(amoeba("results", out, "--format=json", "--top=1").stdout)
    assert [(r["trial_id"], r["val_accuracy"], r["params"]) for r in rows] == [(1, 0.75, 200)]

    csv = amoeba("results", out, "--format=csv", "--top=0").stdout.splitlines()
    assert csv[0].startswith("trial_id,parent_id,mutation,genotype,key,status,rung,epochs,val_accuracy")
    assert [line.split(",")[0] for line in csv[1:]] == ["0", "1", "2", "3"]  # every trial, pending too
    assert "pending" in csv[4] and "NaN loss" in csv[3]
    assert open(os.path.join(out, "journal.jsonl"), "rb").read() == journal


def test_the_pace_after_a_resume_leaves_out_the_idle_time_between_runs(tmp_path):
    algorithm = search_in_progress(str(tmp_path / "s"))
    told = sorted(algorithm.outcomes)  # two results in the first run, then a day idle, then one 10 min in
    at = {told[0]: 1000.0, told[1]: 1600.0, told[2]: 1000.0 + 86_400 + 600}
    algorithm.outcomes.update({t: replace(algorithm.outcomes[t], told_at=at[t]) for t in told})
    assert journal_pace(algorithm, 10, run_started=1000.0 + 86_400, stopped=True) == "6.0 trials/h; stopped"
    assert journal_pace(algorithm, 10).startswith("0.1 trials/h")  # the whole journal, idle day and all


def test_results_of_a_dir_without_a_search_say_so(tmp_path):
    result = amoeba("results", str(tmp_path), check=False)
    assert result.returncode == 1 and f"{tmp_path}: no journal.jsonl: not a search dir" in result.stderr


def test_fractional_sizes_of_a_function_of_ones_own_are_written_as_they_are(tmp_path):
    from experiments.search.results import results_table, write_results

    out = str(tmp_path / "s")
    algorithm = search_in_progress(out)  # reported params 100 and 200: whole numbers stay whole
    assert str(results_table(algorithm).params.dtype) == "Int64"
    trial = algorithm.ask()
    algorithm.tell(trial.trial_id, {"val_accuracy": 0.6, "params": 1.25, "multiply_adds": 0.5})  # millions
    write_results(algorithm, out)  # raised TypeError: cannot safely cast non-equivalent float64 to int64
    table = results_table(algorithm).set_index("trial_id")
    assert table.params[trial.trial_id] == 1.25 and table.multiply_adds[trial.trial_id] == 0.5
    assert table.params[1] == 200 and "1.25" in open(os.path.join(out, "results.csv")).read()
    from experiments.search.driver import describe_result  # the line printed after the trial

    assert describe_result(algorithm, algorithm.outcomes[trial.trial_id].metrics) == "val_accuracy 0.6000, 1.25 params"
    assert describe_result(algorithm, {"val_accuracy": 0.5, "params": 273000}) == "val_accuracy 0.5000, 273,000 params"


def test_the_progress_line_shows_each_running_trials_step_and_rate_from_its_progress_file(tmp_path):
    algorithm = search_in_progress(str(tmp_path / "s"))  # trial 3 in flight
    trial = algorithm.ask()  # and trial 4, not started training yet
    folder = tmp_path / "checkpoints"

    def trial_dir(trial_id: int) -> str:
        return str(folder / f"trial_{trial_id}")

    os.makedirs(trial_dir(3))
    with open(os.path.join(trial_dir(3), "progress.json"), "w") as f:  # as the proxy trainer writes it
        json.dump({"phase": "training", "step": 120, "total_steps": 264, "images_per_sec": 310.4}, f)
    line = progress_line(algorithm, 10, done_at_start=1, elapsed_s=240, trial_dir=trial_dir)
    assert line.endswith("; running: trial 3 step 120/264 (310 images/s)") and trial.trial_id == 4
    os.makedirs(trial_dir(4))
    for state, shown in [({"phase": "tracing", "step": 0}, "trial 4 tracing"),  # its first step being compiled
                         ({"phase": "training", "step": 3}, "trial 4 step 3")]:  # --train_seconds, uncalibrated
        with open(os.path.join(trial_dir(4), "progress.json"), "w") as f:
            json.dump(state, f)
        line = progress_line(algorithm, 10, done_at_start=1, elapsed_s=240, trial_dir=trial_dir)
        assert line.endswith(f"; running: trial 3 step 120/264 (310 images/s), {shown}"), line
    assert "running:" not in progress_line(algorithm, 10, done_at_start=1, elapsed_s=240)  # no dirs: as before


def _curve_search(out) -> None:
    """A time-to-accuracy search (0.8 in 100 s) of 4 trials with their curves: trial 0 hits 0.8 at
    60 s, 1 misses it by 0.001 but reaches 0.78 first, 2 and 3 alike (3 with fewer parameters)."""
    from core.proxy_config import ProxyConfig

    out.mkdir()
    proxy = ProxyConfig(target_accuracy=0.8, target_seconds=100.0)
    (out / "search_config.json").write_text(json.dumps({"max_trials": 3, "proxy": proxy.to_dict()}))
    search = RegularizedEvolution(NasNetSpace(num_blocks=2), population_size=3, sample_size=2, seed=0,
                                  objective="seconds_to_target", mode="min", journal_path=str(out / "journal.jsonl"))
    curves = [[[30, 0.7], [60, 0.81]], [[20, 0.75], [40, 0.79], [60, 0.795], [100, 0.799]], [[25, 0.6], [50, 0.78]],
              [[25, 0.6], [50, 0.78]]]
    for curve, params in zip(curves, [10, 10, 10, 5]):
        scored = proxy.seconds_to_target_on(curve)
        search.tell(search.ask().trial_id, {**scored, "target_curve": curve, "params": params})
    search.close()


def test_a_time_to_accuracy_search_is_scored_again_at_a_lower_target_from_its_curves(tmp_path):
    out = tmp_path / "s"
    _curve_search(out)
    assert amoeba("results", str(out), "--format=json").stdout.count('"trial_id"') == 4
    rows = json.loads(amoeba("results", str(out), "--format=json", "--at_target=0.78").stdout)
    assert [(r["trial_id"], r["time_to_target_s"]) for r in rows] == [(1, 40), (3, 50), (2, 50), (0, 60)]
    assert rows[0]["best_val_accuracy"] == 0.799 and rows[3]["seconds_to_target"] == 60
    assert json.loads(amoeba("results", str(out), "--format=json").stdout)[0]["trial_id"] == 0  # at 0.8: its hit
    over = amoeba("results", str(out), "--at_target=0.9", check=False)
    assert over.returncode == 1 and "--at_target: 0.9 must lie in (0, 0.8]" in over.stderr


def test_promote_at_target_trains_the_search_ranked_again_there(tmp_path):
    from experiments.promote.promote_config import PromoteConfig
    from experiments.promote.promote_plan import open_plan, top_genotypes

    out = tmp_path / "s"
    _curve_search(out)
    config = PromoteConfig(output_dir=str(tmp_path / "p"), data=str(tmp_path / "data"), search_dirs=(str(out),),
                           recipe={"num_cells": 1, "train_steps": 6, "image_size": 16}, top_k=2, at_target=0.78)
    assert [(m.search_trial_id, m.search_rank) for m in open_plan(config)] == [(1, 1), (3, 2)]
    assert [m.search_trial_id for m in top_genotypes(str(out), 2)] == [0, 1]  # at the search's own 0.8
    audited = top_genotypes(str(out), 1, audit_k=3, at_target=0.78)  # drawn from below, ranked at 0.78
    assert [(m.search_trial_id, m.search_rank) for m in audited] == [(1, 1), (3, 2), (2, 3), (0, 4)]
    with pytest.raises(ValueError, match=f"--search_dir {re.escape(str(out))}: --at_target: 0.9 must lie in"):
        top_genotypes(str(out), 1, at_target=0.9)
    (out / "search_config.json").write_text("{}")
    with pytest.raises(ValueError, match=f"--search_dir {re.escape(str(out))}: search_config.json: --at_target needs"):
        top_genotypes(str(out), 1, at_target=0.78)
