"""Shared test helpers: fake evaluators and the location of ../shared test data."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The `amoeba` command in a fresh process (subcommand flags are per-process state).
AMOEBA = [sys.executable, "-c", "from experiments.cli import run; run()"]
QUIET_TF = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def amoeba(*args: str, check: bool = True, timeout: float = 900, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess:
    """Run `amoeba ARGS...` (with `env` added to the environment); with `check`, a non-zero exit
    fails the test with its output."""
    result = subprocess.run(AMOEBA + list(args), capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}, cwd=REPO)
    if check and result.returncode != 0:
        raise AssertionError(f"amoeba {args} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def wait_for_text(path: str, text: str, proc: subprocess.Popen, timeout: float = 300, poll: float = 0.2) -> None:
    """Wait until the file at `path` holds `text`, `proc` has ended, or `timeout` seconds passed."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(path) and text in open(path).read():
            return
        time.sleep(poll)


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gcs_emulator(monkeypatch):
    """A local gcp-storage-emulator holding bucket `amoeba-test`; google-cloud-storage (in this
    process and in `amoeba` subprocesses) reaches it through STORAGE_EMULATOR_HOST."""
    port = _free_port()
    exe = os.path.join(os.path.dirname(sys.executable), "gcp-storage-emulator")
    proc = subprocess.Popen([exe, "start", "--host=127.0.0.1", f"--port={port}", "--in-memory",
                             "--default-bucket=amoeba-test", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    from core import storage

    storage._client.cache_clear()
    yield "gs://amoeba-test"
    proc.terminate()
    proc.wait()
    storage._client.cache_clear()


@pytest.fixture(scope="session")
def shared_dir() -> str:
    path = os.environ.get("AMOEBA_SHARED", os.path.join(REPO, "..", "shared"))
    if not os.path.isdir(os.path.join(path, "data")):
        pytest.skip(f"shared test data not found at {path} (set AMOEBA_SHARED)")
    return path


@pytest.fixture(scope="session")
def cifar_mini(shared_dir, tmp_path_factory):
    """../shared's cifar10-mini (1,000 train, 200 eval JPEGs) prepared once: (CSV dir, data dir)."""
    src = os.path.join(shared_dir, "data", "cifar10-mini")
    out = str(tmp_path_factory.mktemp("data") / "cifar")
    amoeba("prepare", f"--train_csv={src}/train_set.csv", f"--eval_csv={src}/eval_set.csv",
           f"--labels={src}/labels.txt", f"--output_dir={out}")
    return src, out
