"""Shared test helpers: fake evaluators and the location of ../shared test data."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from typing import Callable

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


def script_here(path: str, *args: str) -> str:
    """`python PATH ARGS...` run in this process as its own __main__ (its folder first on sys.path,
    as Python puts it); its stdout. For scripts whose process is not what a test is about."""
    import contextlib
    import io
    import runpy
    from unittest import mock

    out = io.StringIO()
    search_path = [os.path.dirname(path), *sys.path]
    with mock.patch.object(sys, "argv", [path, *args]), mock.patch.object(sys, "path", search_path), \
            contextlib.redirect_stdout(out):
        runpy.run_path(path, run_name="__main__")
    return out.getvalue()


def amoeba_here(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run `amoeba ARGS...` in this process, as `amoeba` does (flags parsed, the same exit codes),
    with its stdout and stderr captured: for tests that are not about the process itself, saving
    a Python start and a TensorFlow import. Flags are reset before and after."""
    import contextlib
    import importlib
    import io
    import logging

    from experiments.cli import OUR_PACKAGES, run

    command = importlib.import_module(f"experiments.commands.{args[0]}")
    loggers = [logging.getLogger(name) for name in OUR_PACKAGES]
    saved = [(logger.handlers, logger.level, logger.propagate) for logger in loggers]
    out, err, code = io.StringIO(), io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            run(["amoeba", *args])
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
    finally:
        command.FLAGS.unparse_flags()
        for logger, (handlers, level, propagate) in zip(loggers, saved):
            logger.handlers, logger.level, logger.propagate = handlers, level, propagate
    result = subprocess.CompletedProcess(["amoeba", *args], code, out.getvalue(), err.getvalue())
    if check and code != 0:
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


def race_metrics(key: str, stops: dict | None = None, target: float = 0.5) -> dict:
    """A time-to-target trial's metrics, deterministic per key: four evaluations 10 s apart whose
    accuracy climbs to a hashed ceiling, cut where `stops` (evolution/target_race.py) stop it."""
    from evolution.target_race import stop_point

    ceiling = 0.3 + 0.4 * hashed_fitness(key)
    curve = [[10.0 * k, round(ceiling * k / 4, 4)] for k in range(1, 5)]
    reached = next((i for i, (_, accuracy) in enumerate(curve) if accuracy >= target), None)
    stopped = stop_point(curve, stops or {}, target)
    if stopped:
        reached, curve = None, [point for point in curve if point[0] <= stopped[0]] or curve[:1]
    curve = curve[:reached + 1] if reached is not None else curve
    best = max(accuracy for _, accuracy in curve)
    time = curve[-1][0] if reached is not None else None
    return {"seconds_to_target": time if time is not None else 40.0 * (1 + target - best),
            "time_to_target_s": time, "target_curve": curve}


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


@pytest.fixture
def shared_ray():
    """One local Ray for the in-process searches, promotions and examples of this pytest-xdist
    worker: started by the first test that asks and left up for the next one that asks (a search,
    like `amoeba search` in a notebook, uses the Ray it finds), saving a Ray start (7 CPU-seconds
    here) per search. Ended when the next test does not ask for it (an idle Ray still costs 9% of
    a core here: `pytest_runtest_teardown`) or starts its own (`own_ray`)."""
    import ray

    from experiments.search.local_ray import init_ray

    if not ray.is_initialized():
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # what a search's own Ray gives its workers
        init_ray(None)
    yield


def pytest_runtest_teardown(item, nextitem) -> None:
    """End the shared Ray after the last of a run of tests that use it."""
    if "shared_ray" in item.fixturenames and (nextitem is None or "shared_ray" not in nextitem.fixturenames):
        import ray

        ray.shutdown()


@pytest.fixture
def own_ray():
    """For a test that starts a Ray of its own: the shared one (if up in this worker) is ended first."""
    import ray

    ray.shutdown()
    yield


@pytest.fixture(scope="session")
def shared_dir() -> str:
    path = os.environ.get("AMOEBA_SHARED", os.path.join(REPO, "..", "shared"))
    if not os.path.isdir(os.path.join(path, "data")):
        pytest.skip(f"shared test data not found at {path} (set AMOEBA_SHARED)")
    return path


def shared_tmp(tmp_path_factory) -> str:
    """A folder shared by every pytest-xdist worker of this run (each worker's base temp is one
    folder below it), for data made once per run under a file lock (`made_once`)."""
    base = tmp_path_factory.getbasetemp()
    return str(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)


def made_once(tmp_path_factory, name: str, make: Callable[[str], None]) -> str:
    """The folder NAME in `shared_tmp`, made by `make(folder)` once a run for every pytest-xdist
    worker, under a file lock; made again from nothing when a worker died while making it."""
    from filelock import FileLock

    out = os.path.join(shared_tmp(tmp_path_factory), name)
    done = os.path.join(out, ".made")
    with FileLock(out + ".lock"):
        if not os.path.exists(done):
            shutil.rmtree(out, ignore_errors=True)
            make(out)
            open(done, "w").close()
    return out


@pytest.fixture(scope="session")
def cifar_mini(shared_dir, tmp_path_factory):
    """../shared's cifar10-mini (1,000 train, 200 eval JPEGs) prepared once a run, for every
    pytest-xdist worker: (CSV dir, data dir). `amoeba prepare` itself is tested in test_prepare.py."""
    from trainer.prepare import PrepareConfig, prepare

    src = os.path.join(shared_dir, "data", "cifar10-mini")
    out = made_once(tmp_path_factory, "cifar10-mini-prepared", lambda out: prepare(
        PrepareConfig(f"{src}/train_set.csv", f"{src}/eval_set.csv", out, labels=f"{src}/labels.txt"), verbose=False))
    return src, out


def pytest_collection_modifyitems(config, items) -> None:
    """Integration tests first: pytest-xdist hands out tests in this order, so the long ones start
    early and the many short ones fill in around them instead of one long test finishing last;
    among them, those on the shared Ray first, one after another."""
    items.sort(key=lambda item: (item.get_closest_marker("integration") is None,
                                 "shared_ray" not in item.fixturenames))  # a Ray started once serves a run
