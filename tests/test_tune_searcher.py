"""The Ray Tune adapter, driven the way Tune drives it (no cluster needed)."""

import json
import logging
import pickle

import pytest

from evolution import RegularizedEvolution, resume
from evolution.tune_searcher import EvolutionSearcher
from ray.tune.search import Searcher
from searchspace import NasNetSpace


def make(tmp_path, budget=3):
    algorithm = RegularizedEvolution(NasNetSpace(), population_size=2, sample_size=2, seed=0,
                                     journal_path=str(tmp_path / "j.jsonl"))
    told = []
    return algorithm, EvolutionSearcher(algorithm, budget, on_tell=lambda a, t: told.append(t)), told


def test_suggest_hands_out_the_algorithms_trials_up_to_the_budget(tmp_path):
    algorithm, searcher, _ = make(tmp_path)
    configs = [searcher.suggest(f"tune_{i}") for i in range(3)]
    assert [c["trial_id"] for c in configs] == [0, 1, 2]
    assert configs[0]["genotype"] == algorithm.trials[0].genotype.to_json()
    assert searcher.suggest("tune_3") == Searcher.FINISHED


def test_results_errors_and_crashes_are_told(tmp_path):
    algorithm, searcher, told = make(tmp_path, budget=4)
    for i in range(3):
        searcher.suggest(f"tune_{i}")
    searcher.on_trial_complete("tune_0", {"val_accuracy": 0.9, "error": "", "params": 10,
                                          "target_curve": [[1.5, 0.9]], "sizes": [1, 2],  # only a curve is kept
                                          "config/trial_id": 0, "config/mutation": "random",
                                          "time_total_s": 3.0, "trial_id": "tune_0"})
    searcher.on_trial_complete("tune_1", {"val_accuracy": float("nan"), "error": "timeout: over 5 s"})
    searcher.on_trial_complete("tune_2", None, error=True)  # its worker was lost: re-issued once
    assert told == [0, 1] and algorithm.pending() == [2]
    assert searcher.suggest("tune_3")["trial_id"] == 2
    searcher.on_trial_complete("tune_3", None, error=True)  # lost again: failed
    assert told == [0, 1, 2]
    assert dict(algorithm.outcomes[0].metrics) == {"val_accuracy": 0.9, "params": 10, "target_curve": [[1.5, 0.9]]}
    assert algorithm.outcomes[1].error == "timeout: over 5 s"
    assert "failed twice: see error.txt of Tune trial tune_3" in algorithm.outcomes[2].error
    assert [e["event"] for e in map(json.loads, open(tmp_path / "j.jsonl"))].count("reissue") == 1


def test_a_stopped_trial_stays_in_flight_and_a_lost_worker_gets_its_written_reason(tmp_path):
    algorithm = RegularizedEvolution(NasNetSpace(), population_size=2, sample_size=2, seed=0)
    stop = []
    searcher = EvolutionSearcher(algorithm, 5, failure_reason=lambda ours, theirs: f"timeout: trial {ours} hung",
                                 should_stop=lambda: bool(stop))
    for i in range(3):
        searcher.suggest(f"tune_{i}")
    searcher.on_trial_complete("tune_0", None)  # stopped by Tune before it reported anything
    searcher.on_trial_complete("tune_1", {"time_total_s": 1.0})
    searcher.on_trial_complete("tune_2", None, error=True)
    assert algorithm.pending() == [0, 1] and algorithm.outcomes[2].error == "timeout: trial 2 hung"
    stop.append(True)
    assert searcher.suggest("tune_3") == Searcher.FINISHED


def test_a_repeated_completion_is_ignored(tmp_path, caplog):
    algorithm, searcher, told = make(tmp_path)
    searcher.suggest("tune_0")
    searcher.on_trial_complete("tune_0", {"val_accuracy": 0.5})
    with caplog.at_level(logging.WARNING):
        searcher.on_trial_complete("tune_0", {"val_accuracy": 0.7})
    assert told == [0] and algorithm.outcomes[0].metrics["val_accuracy"] == 0.5
    assert "did not issue" in caplog.text


def test_tune_checkpoint_is_a_json_pointer_to_the_journal(tmp_path):
    algorithm, searcher, _ = make(tmp_path)
    searcher.suggest("tune_0")
    searcher.save(str(tmp_path / "ckpt"))
    assert json.load(open(tmp_path / "ckpt"))["journal"].endswith("j.jsonl")
    # What Tune pickles holds no algorithm state, and cannot be restored by mistake.
    data = pickle.dumps(searcher)
    assert b"RegularizedEvolution" not in data and b"j.jsonl" in data
    with pytest.raises(NotImplementedError, match="journal"):
        pickle.loads(data)
    algorithm.close()
    assert resume(str(tmp_path / "j.jsonl")).pending() == [0]


def test_a_rung_rule_that_pauses_trials_is_refused_through_tune(tmp_path):
    """The promotion rule pauses trials, which the Tune adapter cannot continue: refused, not silently run."""
    from evolution import Rungs
    from evolution.tune_searcher import RungScheduler

    algorithm = RegularizedEvolution(NasNetSpace(), population_size=2, sample_size=2, seed=0,
                                     rungs=Rungs((1, 3)), rung_rule="promotion")
    for adapter in (lambda: EvolutionSearcher(algorithm, 3), lambda: RungScheduler(algorithm)):
        with pytest.raises(ValueError, match="rung_rule: the 'promotion' rule pauses"):
            adapter()
