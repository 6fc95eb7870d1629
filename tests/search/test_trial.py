"""The trial worker's hang watchdog, in a real process."""

import subprocess
import sys
import time

from experiments.search.trial import HANG_EXIT_CODE
from tests.conftest import REPO

HANGS = "from experiments.search.trial import start_watchdog; import time; start_watchdog(0.5, 'trial 3'); time.sleep(60)"
FINISHES = ("from experiments.search.trial import start_watchdog; import time; "
            "done = start_watchdog(0.5, 'trial 3'); done.set(); time.sleep(1.5)")


def test_a_hung_trial_ends_its_worker_with_the_reason():
    t0 = time.time()
    result = subprocess.run([sys.executable, "-c", HANGS], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == HANG_EXIT_CODE
    assert "amoeba watchdog: trial 3 still running after 0.5 s; ending its worker" in result.stderr
    assert time.time() - t0 < 50


def test_a_finished_trial_is_left_alone():
    result = subprocess.run([sys.executable, "-c", FINISHES], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0 and "watchdog" not in result.stderr


def _tune_checks(searcher, result):
    """Ray Tune's strict metric check, as its controller runs it on every result: raises ValueError
    when the result lacks the searcher's metric."""
    from types import SimpleNamespace

    from ray.tune.execution.tune_controller import TuneController
    from ray.tune.schedulers import FIFOScheduler

    TuneController._validate_result_metrics(SimpleNamespace(_metric=None, _scheduler_alg=FIFOScheduler(),
                                                            _search_alg=searcher), result)


def _pareto_trial(monkeypatch, **proxy):
    """A Pareto search's first trial, as Tune's searcher hands it out, and what it reports."""
    from evolution import make_algorithm
    from evolution.tune_searcher import EvolutionSearcher
    from experiments.search import trial
    from searchspace import NasNetSpace
    from core.proxy_config import ProxyConfig

    algorithm = make_algorithm("pareto_evolution", NasNetSpace(num_blocks=1),
                               {"population_size": 2, "sample_size": 1,
                                "objectives": ["latency_ms:min", "val_accuracy:max"]}, seed=0)
    searcher = EvolutionSearcher(algorithm, budget=1)
    reported = []
    monkeypatch.setattr(trial.tune, "report", reported.append)
    monkeypatch.setattr(trial, "worker_facts", lambda t_start: {"trial_seconds": time.perf_counter() - t_start})
    config = searcher.suggest("tune_trial_0")
    settings = ProxyConfig(epochs=1, filters=4, threads=1, **proxy).to_dict()
    return algorithm, searcher, config, settings, reported


def test_a_pareto_trial_reports_every_goal_it_measured_where_tune_checks_for_the_metric(monkeypatch):
    """Defect 3: the searcher's metric is the first objective (latency_ms), but a trial reported
    only val_accuracy at the top level, so Ray Tune's strict metric check ended the search."""
    import json

    from evolution.tune_searcher import METRICS_KEY
    from experiments.search.trial import run_trial

    algorithm, searcher, config, proxy, reported = _pareto_trial(monkeypatch)
    assert searcher.metric == "latency_ms"
    run_trial(config, proxy, algorithm.space.to_config())  # as experiments/search/driver.py calls it
    result = reported[-1]
    _tune_checks(searcher, result)
    metrics = json.loads(result[METRICS_KEY])
    assert metrics["error"] == "" and 0 < result["latency_ms"] == metrics["latency_ms"]
    assert result["val_accuracy"] == metrics["val_accuracy"] > 0.1 and result["params"] == metrics["params"]
    assert {"step_ms", "images_per_sec", "multiply_adds"} <= set(result)  # every cost measure it measured
    searcher.on_trial_complete("tune_trial_0", result)
    assert algorithm.outcomes[config["trial_id"]].status == "ok"


def test_a_failed_trial_still_names_every_objective_so_the_search_goes_on(monkeypatch):
    from experiments.search.trial import run_trial

    algorithm, searcher, config, proxy, reported = _pareto_trial(monkeypatch, learning_rate=1e30)
    run_trial(config, proxy, algorithm.space.to_config(), objectives=[g.metric for g in algorithm.goals])
    _tune_checks(searcher, reported[-1])
    searcher.on_trial_complete("tune_trial_0", reported[-1])
    outcome = algorithm.outcomes[config["trial_id"]]
    assert outcome.status == "failed" and outcome.error.startswith("NaN loss")


def test_a_rung_trial_reports_each_rung_with_the_objective_at_the_top_level(monkeypatch, tmp_path):
    import json
    import random

    from evolution.tune_searcher import METRICS_KEY
    from experiments.search import trial
    from searchspace import NasNetSpace
    from core.proxy_config import ProxyConfig

    reported = []
    monkeypatch.setattr(trial.tune, "report", reported.append)
    monkeypatch.setattr(trial, "worker_facts", lambda t_start: {})
    space = NasNetSpace(num_blocks=1)
    config = {"trial_id": 4, "genotype": space.sample(random.Random(0)).to_json(), "rungs": [1, 2], "start_rung": 0,
              "checkpoint_dir": str(tmp_path)}
    trial.run_trial(config, ProxyConfig(filters=4, threads=1).to_dict(), space.to_config(), objectives=["val_loss"])
    rungs = [json.loads(r[METRICS_KEY]) for r in reported]
    assert [(m["rung"], m["epochs"], m["error"]) for m in rungs] == [(0, 1, ""), (1, 2, "")]
    assert all(r["val_loss"] == m["val_loss"] and r["latency_ms"] == m["latency_ms"] for r, m in zip(reported, rungs))
    assert all(m["load_seconds"] > 0 and m["import_seconds"] >= 0 for m in rungs)


def test_a_reissued_trial_clears_the_progress_file_its_dead_run_left_at_once(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from experiments.search import trial

    state_dir = tmp_path / "trial_3"
    state_dir.mkdir()
    (state_dir / "progress.json").write_text('{"phase": "training", "step": 120, "total_steps": 264}')
    monkeypatch.setattr(trial.tune, "report", lambda result: None)
    monkeypatch.setattr(trial, "worker_facts", lambda t_start: {})
    notes = SimpleNamespace(get=lambda trial_id: "timeout: hung")  # the quickest way through a trial
    trial.run_trial({"trial_id": 3, "genotype": None, "checkpoint_dir": str(state_dir)}, {}, {}, notes=notes)
    assert not (state_dir / "progress.json").exists()
