"""The scripts in examples/ run as a user runs them (tiny budgets): ask/tell without Ray, the same
space through Ray Tune stopped and run again, and NASNet cells with one's own Keras training. Each
runs its script's main in this process (`example`: its command line, its stdout), on the pytest
worker's shared Ray: a Python start, a TensorFlow import and a Ray start less each."""

import os

import pandas as pd
import pytest

from evolution import resume
from tests.conftest import REPO, amoeba_here, script_here


def example(name: str, *args: str) -> str:
    """`python examples/NAME ARGS...` run in this process as its own __main__; its stdout."""
    return script_here(os.path.join(REPO, "examples", name), *args)


@pytest.mark.integration  # 15 random forests cross-validated
def test_ask_tell_over_scikit_learn_settings_resumes_from_its_journal(tmp_path):
    journal = str(tmp_path / "journal.jsonl")
    first = example("sklearn_ask_tell.py", "--trials=6", f"--journal={journal}")
    assert first.count("trial ") == 6 + 1 and "best: trial" in first
    second = example("sklearn_ask_tell.py", "--trials=9", f"--journal={journal}")
    assert [line.split()[1] for line in second.splitlines()[:3]] == ["6", "7", "8"]  # went on, not again
    search = resume(journal, read_only=True)
    assert search.completed() == 9 and any(t.parent_id is not None for t in search.trials.values())


@pytest.mark.integration
def test_the_same_space_through_ray_tune_two_at_a_time_stopped_and_run_again(tmp_path, shared_ray):
    """Run again with more trials, the example goes on from its journal. (A search driver killed
    mid-trial and resumed, its in-flight trials re-issued: test_search_integration.py's SIGKILL test,
    through the same run_search.)"""
    out = str(tmp_path / "tune")
    journal = os.path.join(out, "journal.jsonl")
    example("sklearn_ray_tune.py", f"--output_dir={out}", "--trials=3")
    before = resume(journal, read_only=True)
    assert before.completed() == 3
    output = example("sklearn_ray_tune.py", f"--output_dir={out}", "--trials=8")
    after = resume(journal, read_only=True)
    assert after.completed() == 8 and not after.pending() and "best: trial" in output
    assert all(after.trials[t] == before.trials[t] for t in before.trials)  # went on, not again
    assert any(t.parent_id is not None for t in after.trials.values())  # evolved past the population of 6
    table = pd.read_csv(os.path.join(out, "results.csv"))
    assert set(table.status) == {"ok"} and table.val_accuracy.between(0.5, 1).all()
    assert "n_estimators=" in amoeba_here("results", out).stdout
    amoeba_here("report", out)
    assert "max_features=" in open(os.path.join(out, "report.html")).read()


@pytest.mark.integration
def test_nasnet_cells_with_ones_own_keras_training_then_the_best_trained_longer(tmp_path, shared_ray):
    out = str(tmp_path / "nasnet")
    output = example("nasnet_keras.py", f"--output_dir={out}", "--trials=1", "--final_epochs=1")  # two at once: test_api
    table = pd.read_csv(os.path.join(out, "results.csv"))
    assert len(table) == 1 and set(table.status) == {"ok"} and (table.params > 1000).all()
    assert "best cell (trial" in output and "trained 1 epochs at F=16" in output
