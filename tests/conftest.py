"""Shared test helpers: fake evaluators and the location of ../shared test data."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The `amoeba` command in a fresh process (subcommand flags are per-process state).
AMOEBA = [sys.executable, "-c", "from experiments.cli import run; run()"]
QUIET_TF = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def amoeba(*args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run `amoeba ARGS...`; with `check`, a non-zero exit fails the test with its output."""
    result = subprocess.run(AMOEBA + list(args), capture_output=True, text=True, timeout=timeout,
                            env=QUIET_TF, cwd=REPO)
    if check and result.returncode != 0:
        raise AssertionError(f"amoeba {args} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def hashed_fitness(key: str) -> float:
    """A deterministic pseudo-random fitness in [0, 1) for a canonical key."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) / 16**12


def run_fake(algorithm, n: int, fitness=hashed_fitness) -> list:
    """Ask and tell `n` trials in order with a fake evaluator; return the trials."""
    trials = []
    for _ in range(n):
        trial = algorithm.ask()
        algorithm.tell(trial.trial_id, {algorithm.objective: fitness(trial.genotype.key())})
        trials.append(trial)
    return trials


@pytest.fixture(scope="session")
def shared_dir() -> str:
    path = os.environ.get("AMOEBA_SHARED", os.path.join(REPO, "..", "shared"))
    if not os.path.isdir(os.path.join(path, "data")):
        pytest.skip(f"shared test data not found at {path} (set AMOEBA_SHARED)")
    return path
