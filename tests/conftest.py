"""Shared test helpers: fake evaluators and the location of ../shared test data."""

from __future__ import annotations

import hashlib
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
