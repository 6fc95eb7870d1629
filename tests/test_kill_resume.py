"""Kill a real search process with SIGKILL mid-run, resume from its journal, lose nothing."""

import os
import signal
import subprocess
import sys
import time

import pytest

from evolution import RegularizedEvolution, resume
from searchspace import NasNetSpace
from tests.conftest import REPO, hashed_fitness, race_metrics

CHILD = """
import sys, time
from evolution import RegularizedEvolution
from evolution.target_race import TargetRace
from searchspace import NasNetSpace
from tests.conftest import hashed_fitness, race_metrics
race = TargetRace(1.2, 0.02, 2, 3) if sys.argv[2] == "race" else None
algorithm = RegularizedEvolution(NasNetSpace(), population_size=10, sample_size=3, seed=21,
                                 journal_path=sys.argv[1], race=race,
                                 **({"objective": "seconds_to_target", "mode": "min"} if race else {}))
while True:
    in_flight = [algorithm.ask() for _ in range(2)]  # two trials in flight at a time
    for trial in in_flight:
        time.sleep(0.002)
        algorithm.tell(trial.trial_id, race_metrics(trial.genotype.key(), trial.stops) if race else
                       {"val_accuracy": hashed_fitness(trial.genotype.key())})
"""


def evaluate(trial, race: bool) -> dict:
    key = trial.genotype.key()
    return race_metrics(key, trial.stops) if race else {"val_accuracy": hashed_fitness(key)}


@pytest.mark.parametrize("race", [False, True], ids=["evolution", "time_to_target_race"])
def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path, race):
    """With the race (issue 55) too: each trial's stops and screened children come back the same."""
    journal = str(tmp_path / "journal.jsonl")
    child = subprocess.Popen([sys.executable, "-c", CHILD, journal, "race" if race else "plain"], cwd=REPO,
                             env={**os.environ, "PYTHONPATH": REPO})
    deadline = time.time() + 60
    while time.time() < deadline:
        if os.path.exists(journal) and sum(1 for _ in open(journal)) > 150:
            break
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL

    resumed = resume(journal)
    asked_before_kill = len(resumed.trials)
    assert resumed.completed() > 50
    # Finish the in-flight trials (re-issued with the same ids), then go on to 200 trials.
    while resumed.completed() < 200:
        trial = resumed.ask()
        resumed.tell(trial.trial_id, evaluate(trial, race))
    resumed.close()

    from evolution.target_race import TargetRace

    reference = RegularizedEvolution(NasNetSpace(), population_size=10, sample_size=3, seed=21,
                                     race=TargetRace(1.2, 0.02, 2, 3) if race else None,
                                     **({"objective": "seconds_to_target", "mode": "min"} if race else {}))
    while reference.completed() < 200:
        pair = [reference.ask() for _ in range(2)]
        for trial in pair:
            reference.tell(trial.trial_id, evaluate(trial, race))
    final = resume(journal)
    # Every trial asked before the kill is the one an uninterrupted run asks, and every trial
    # in the journal was told exactly once (a second tell would make replay fail).
    for trial_id in range(asked_before_kill):
        assert final.trials[trial_id] == reference.trials[trial_id]
    assert final.completed() == 200 and not final.pending()
    if race:  # the race acted: stops were set and children screened, and the replay set the same
        assert any(t.stops and t.stops.get("stop_below") for t in final.trials.values())
        assert final.screened_out > 100
