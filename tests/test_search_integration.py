"""End to end through the `amoeba` command and real Ray Tune: a tiny search, then a resume."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from evolution import resume
from searchspace import NasNetGenotype

AMOEBA = [sys.executable, "-c", "from experiments.cli import run; run()"]
TINY_SEARCH = ["--max_concurrent=2", "--population_size=3", "--sample_size=2", "--epochs=1",
               "--filters=4", "--num_blocks=2", "--batch_size=64"]


def amoeba(*args, check=True):
    result = subprocess.run(AMOEBA + list(args), capture_output=True, text=True, timeout=600,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if check and result.returncode != 0:
        raise AssertionError(f"amoeba {args} failed:\n{result.stdout}\n{result.stderr[-4000:]}")
    return result


@pytest.mark.integration
def test_tiny_search_through_ray_tune_then_resume(tmp_path):
    out = str(tmp_path / "search")
    result = amoeba("search", f"--output_dir={out}", "--max_trials=6", *TINY_SEARCH)
    assert "6 trials done (0 failed)" in result.stdout and "top 5:" in result.stdout

    table = pd.read_csv(os.path.join(out, "results.csv"))
    assert list(table.trial_id) == list(range(6)) and set(table.status) == {"ok"}
    assert table.val_accuracy.between(0, 1).all() and (table.params > 0).all()
    assert table.parent_id.notna().sum() >= 1  # evolution mutated after P=3 results
    algorithm = resume(os.path.join(out, "journal.jsonl"))
    pids = [o.metrics["worker_pid"] for o in algorithm.outcomes.values()]
    assert len(set(pids)) == 6  # one fresh worker process per trial

    best = json.load(open(os.path.join(out, "best_genotype.json")))
    assert best["value"] == table.val_accuracy.max()
    NasNetGenotype.from_json(best["genotype"])
    assert "h2 = " in amoeba("show", os.path.join(out, "best_genotype.json")).stdout

    # Same output dir, larger budget: resumes and runs only the 2 new trials.
    result = amoeba("search", f"--output_dir={out}", "--max_trials=8", *TINY_SEARCH)
    assert "8 trials done" in result.stdout
    assert len(pd.read_csv(os.path.join(out, "results.csv"))) == 8

    # A different proxy in the same output dir is a config error, before any trial runs.
    result = amoeba("search", f"--output_dir={out}", "--max_trials=9", *TINY_SEARCH, "--epochs=2",
                    check=False)
    assert result.returncode != 0 and "different proxy" in result.stderr
    assert len(resume(os.path.join(out, "journal.jsonl")).trials) == 8


def test_config_errors_fail_at_once_without_a_journal(tmp_path):
    out = str(tmp_path / "bad")
    result = amoeba("search", f"--output_dir={out}", "--population_size=4", "--sample_size=9",
                    check=False)
    assert result.returncode != 0 and "sample_size" in result.stderr
    assert not os.path.exists(os.path.join(out, "journal.jsonl"))
