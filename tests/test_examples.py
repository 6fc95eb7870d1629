"""The scripts in examples/ run as a user runs them (tiny budgets): ask/tell without Ray, the same
space through Ray Tune killed and resumed, and NASNet cells with one's own Keras training. A run
that is not killed runs its script's main in this process (`example`: its command line, its
stdout), on the pytest worker's shared Ray: a Python start, a TensorFlow import and a Ray start
less each."""

import contextlib
import io
import json
import os
import runpy
import signal
import subprocess
import sys
from unittest import mock

import pandas as pd
import pytest

from evolution import resume
from tests.conftest import REPO, amoeba_here, wait_for_text

QUIET = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def example(name: str, *args: str) -> str:
    """`python examples/NAME ARGS...` run in this process as its own __main__; its stdout."""
    path, out = os.path.join(REPO, "examples", name), io.StringIO()
    with mock.patch.object(sys, "argv", [path, *args]), contextlib.redirect_stdout(out):
        runpy.run_path(path, run_name="__main__")
    return out.getvalue()


def test_ask_tell_over_scikit_learn_settings_resumes_from_its_journal(tmp_path):
    journal = str(tmp_path / "journal.jsonl")
    first = example("sklearn_ask_tell.py", "--trials=6", f"--journal={journal}")
    assert first.count("trial ") == 6 + 1 and "best: trial" in first
    second = example("sklearn_ask_tell.py", "--trials=9", f"--journal={journal}")
    assert [line.split()[1] for line in second.splitlines()[:3]] == ["6", "7", "8"]  # went on, not again
    search = resume(journal, read_only=True)
    assert search.completed() == 9 and any(t.parent_id is not None for t in search.trials.values())


@pytest.mark.integration
def test_the_same_space_through_ray_tune_two_at_a_time_killed_and_resumed(tmp_path, shared_ray):
    out = str(tmp_path / "tune")
    journal = os.path.join(out, "journal.jsonl")
    command = [sys.executable, os.path.join(REPO, "examples", "sklearn_ray_tune.py"), f"--output_dir={out}",
               "--trials=8"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO, env=QUIET,
                            start_new_session=True)
    wait_for_text(journal, '"event":"tell"', proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Ray
    proc.wait()
    before = resume(journal, read_only=True)
    in_flight = before.pending()
    assert 1 <= before.completed() < 8
    output = example("sklearn_ray_tune.py", f"--output_dir={out}", "--trials=8")
    after = resume(journal, read_only=True)
    assert after.completed() == 8 and not after.pending() and "best: trial" in output
    assert all(after.trials[t] == before.trials[t] and t in after.outcomes for t in in_flight)
    events = [json.loads(line)["event"] for line in open(journal)]
    assert events.count("reissue") == len(in_flight) and events.count("tell") == 8
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
