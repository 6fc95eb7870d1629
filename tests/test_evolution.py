import json
import logging
import os
import random
import shutil
from collections import Counter, deque

import pytest

from evolution import RandomSearch, RegularizedEvolution, resume
from evolution.steps import age_out, tournament_select
from searchspace import NasNetSpace
from tests.conftest import hashed_fitness, run_fake

SPACE = NasNetSpace()
GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "re_seed7_p20_s5.json")


def test_tournament_draws_with_replacement_and_returns_the_fittest():
    population = list(range(10))
    rng = random.Random(0)
    wins = Counter(tournament_select(population, 3, rng, fitness=float) for _ in range(20000))
    # The best member wins when drawn at least once: 1 - (9/10)^3 = 0.271.
    assert abs(wins[9] / 20000 - 0.271) < 0.015
    # With replacement, the worst member still wins when it is drawn three times: 0.001.
    assert 0 < wins[0] < 60
    assert tournament_select([5], 25, rng, fitness=float) == 5


def test_age_out_removes_the_oldest():
    population = deque([3, 1, 2, 9])
    assert age_out(population, 2) == [3, 1]
    assert list(population) == [2, 9]


def test_population_never_exceeds_p_and_the_oldest_leaves_even_when_best():
    algorithm = RegularizedEvolution(SPACE, population_size=5, sample_size=2, seed=0)
    told = []
    for i in range(30):
        trial = algorithm.ask()
        # Trial 0 is by far the best, yet it must age out after 5 more successes.
        algorithm.tell(trial.trial_id, {"val_accuracy": 1.0 if i == 0 else 0.1 + i / 1000})
        told.append(trial.trial_id)
        assert len(algorithm.population) <= 5
        assert list(algorithm.population) == told[-5:]
    assert algorithm.best()[0].trial_id == 0


def test_samples_at_random_until_p_results_then_mutates():
    algorithm = RegularizedEvolution(SPACE, population_size=4, sample_size=2, seed=1)
    first = [algorithm.ask() for _ in range(6)]  # nothing told yet: all random
    assert all(t.mutation == "random" and t.parent_id is None for t in first)
    for t in first[:4]:
        algorithm.tell(t.trial_id, {"val_accuracy": 0.5})
    child = algorithm.ask()
    assert child.parent_id in {t.trial_id for t in first[:4]} and child.mutation != "random"


def test_failed_trials_never_enter_the_population():
    algorithm = RegularizedEvolution(SPACE, population_size=3, sample_size=2, seed=2)
    for i in range(10):
        trial = algorithm.ask()
        if i % 2:
            algorithm.tell(trial.trial_id, error="out of memory")
        else:
            algorithm.tell(trial.trial_id, {"val_accuracy": float("nan")})
    assert not algorithm.population and algorithm.best() is None
    reasons = {o.error for o in algorithm.outcomes.values()}
    assert "out of memory" in reasons and "objective 'val_accuracy' is nan" in reasons


def test_tell_is_idempotent(caplog):
    algorithm = RegularizedEvolution(SPACE, population_size=3, sample_size=2, seed=3)
    trial = algorithm.ask()
    assert algorithm.tell(trial.trial_id, {"val_accuracy": 0.5})
    with caplog.at_level(logging.WARNING):
        assert not algorithm.tell(trial.trial_id, {"val_accuracy": 0.9})
        assert not algorithm.tell(999, {"val_accuracy": 0.9})
    assert "duplicate" in caplog.text and "unknown trial 999" in caplog.text
    assert algorithm.outcomes[trial.trial_id].metrics["val_accuracy"] == 0.5
    assert list(algorithm.population) == [trial.trial_id]


def test_objective_and_direction_are_configurable():
    algorithm = RegularizedEvolution(SPACE, population_size=2, sample_size=2, seed=4, objective="loss", mode="min")
    losses = [0.9, 0.2, 0.5]
    for loss in losses:
        algorithm.tell(algorithm.ask().trial_id, {"loss": loss})
    assert algorithm.best()[1].metrics["loss"] == 0.2


def test_bad_parameters_fail_at_once():
    with pytest.raises(ValueError, match="sample_size"):
        RegularizedEvolution(SPACE, population_size=5, sample_size=6)
    with pytest.raises(ValueError, match="mode"):
        RandomSearch(SPACE, mode="up")


def test_golden_proposal_sequence():
    """Pins the first 200 proposals' canonical keys for seed 7 (P=20, S=5, hashed fitness)."""
    algorithm = RegularizedEvolution(SPACE, population_size=20, sample_size=5, seed=7)
    keys = [t.genotype.key() for t in run_fake(algorithm, 200)]
    if os.environ.get("AMOEBA_REGEN_GOLDEN"):
        with open(GOLDEN, "w") as f:
            json.dump(keys, f, indent=0)
    with open(GOLDEN) as f:
        assert keys == json.load(f)


def _proposals(algorithm, n):
    return [(t.trial_id, t.parent_id, t.genotype.key()) for t in run_fake(algorithm, n)]


@pytest.mark.parametrize("cls", [RegularizedEvolution, RandomSearch])
def test_resume_reproduces_an_uninterrupted_run(tmp_path, cls):
    kwargs = {"population_size": 10, "sample_size": 3} if cls is RegularizedEvolution else {}
    reference = _proposals(cls(SPACE, seed=5, **kwargs), 120)
    rng = random.Random(0)
    for attempt in range(3):
        path = str(tmp_path / f"journal{attempt}.jsonl")
        algorithm = cls(SPACE, seed=5, journal_path=path, **kwargs)
        got = []
        while len(got) < 120:
            got += _proposals(algorithm, min(rng.randrange(1, 50), 120 - len(got)))
            algorithm.close()
            algorithm = resume(path)
        assert got == reference
        assert algorithm.completed() == 120


def test_resumed_state_equals_uninterrupted_state(tmp_path):
    path = str(tmp_path / "j.jsonl")
    live = RegularizedEvolution(SPACE, population_size=10, sample_size=3, seed=6, journal_path=path)
    run_fake(live, 57)
    replayed = resume(path, read_only=True)  # the live one still holds the journal
    assert replayed.rng.getstate() == live.rng.getstate()
    assert list(replayed.population) == list(live.population)
    assert replayed.trials == live.trials and replayed.outcomes == live.outcomes


def test_in_flight_trials_are_reissued_once_with_same_id_and_genotype(tmp_path):
    path = str(tmp_path / "j.jsonl")
    algorithm = RegularizedEvolution(SPACE, population_size=3, sample_size=2, seed=8, journal_path=path)
    run_fake(algorithm, 4)
    in_flight = [algorithm.ask(), algorithm.ask()]
    algorithm.close()

    resumed = resume(path)
    again = [resumed.ask(), resumed.ask()]
    assert again == in_flight
    fresh = resumed.ask()
    assert fresh.trial_id == 6  # a new trial, not a third hand-out
    # After another restart, every trial still untold is handed out again, in id order.
    resumed.close()
    second = resume(path)
    assert [second.ask().trial_id for _ in range(4)] == [4, 5, 6, 7]


def _target_fitness(target):
    target_elements = {
        (name, b, e): (blk.inputs[e], blk.ops[e])
        for name in ("normal", "reduction")
        for b, blk in enumerate(target.cell(name).blocks)
        for e in (0, 1)
    }

    def fitness(genotype):
        matches = sum(
            (blk.inputs[e], blk.ops[e]) == target_elements[(name, b, e)]
            for name in ("normal", "reduction")
            for b, blk in enumerate(genotype.cell(name).blocks)
            for e in (0, 1)
        )
        return matches / len(target_elements)

    return fitness


def test_regularized_evolution_beats_random_search_on_a_synthetic_landscape():
    """Fitness = share of the 20 (input, op) elements equal to a hidden target's, plus noise."""
    budget, seeds = 400, range(8)
    best = {"re": [], "random": []}
    for seed in seeds:
        target = SPACE.sample(random.Random(1000 + seed))
        fitness = _target_fitness(target)
        noise = random.Random(seed)
        for name, algorithm in (
            ("re", RegularizedEvolution(SPACE, population_size=30, sample_size=8, seed=seed)),
            ("random", RandomSearch(SPACE, seed=seed)),
        ):
            for _ in range(budget):
                trial = algorithm.ask()
                algorithm.tell(trial.trial_id, {"val_accuracy": fitness(trial.genotype) + noise.gauss(0, 0.02)})
            best[name].append(fitness(algorithm.best()[0].genotype))
    mean_re = sum(best["re"]) / len(seeds)
    mean_random = sum(best["random"]) / len(seeds)
    print(f"best fitness: RE {mean_re:.3f}, random {mean_random:.3f}")
    assert mean_re > mean_random + 0.15, (mean_re, mean_random)
    assert sum(r > q for r, q in zip(best["re"], best["random"])) == len(seeds)


def test_resume_with_trials_in_flight_continues_exactly_like_the_live_run(tmp_path):
    path = str(tmp_path / "j.jsonl")
    live = RegularizedEvolution(SPACE, population_size=5, sample_size=2, seed=13, journal_path=path)
    in_flight = []
    for _ in range(40):  # asynchronous: three trials in flight at any time
        in_flight.append(live.ask())
        if len(in_flight) > 3:
            done = in_flight.pop(0)
            live.tell(done.trial_id, {"val_accuracy": hashed_fitness(done.genotype.key())})
    copy = str(tmp_path / "copy.jsonl")
    shutil.copy(path, copy)
    resumed = resume(copy)
    assert resumed.rng.getstate() == live.rng.getstate()
    assert list(resumed.population) == list(live.population)
    assert resumed.trials == live.trials and resumed.outcomes == live.outcomes
    assert resumed.pending() == [t.trial_id for t in in_flight]

    assert [resumed.ask() for _ in in_flight] == in_flight  # re-issued: same ids and genotypes
    for algorithm in (live, resumed):
        for trial in in_flight:
            algorithm.tell(trial.trial_id, {"val_accuracy": hashed_fitness(trial.genotype.key())})
    assert _proposals(resumed, 60) == _proposals(live, 60)


def test_initial_genotypes_come_first_are_journaled_and_replay(tmp_path):
    from searchspace.references import AMOEBANET_A, AMOEBANET_D

    path = str(tmp_path / "j.jsonl")
    algorithm = RegularizedEvolution(SPACE, population_size=3, sample_size=2, seed=2, journal_path=path,
                                     initial=[AMOEBANET_A, AMOEBANET_D.to_json()])
    run_fake(algorithm, 5)
    trials = list(algorithm.trials.values())
    assert [t.genotype for t in trials[:2]] == [AMOEBANET_A, AMOEBANET_D] and trials[0].mutation == "initial"
    assert trials[2].mutation == "random" and trials[3].parent_id is not None  # then random, then evolution
    algorithm.close()
    replayed = resume(path, read_only=True)
    assert replayed.trials == algorithm.trials and replayed.initial == (AMOEBANET_A, AMOEBANET_D)
    with pytest.raises(ValueError, match=r"initial\[0\]: not a genotype of the nasnet space"):
        RegularizedEvolution(SPACE, initial=[{"depth": 2}])


def test_initial_last_seeds_close_the_first_population_outlive_the_random_ones_and_replay(tmp_path):
    from searchspace.references import AMOEBANET_A

    path = str(tmp_path / "j.jsonl")
    algorithm = RegularizedEvolution(SPACE, population_size=4, sample_size=2, seed=2, journal_path=path,
                                     initial=[AMOEBANET_A], initial_last=True)
    run_fake(algorithm, 7)
    mutations = [t.mutation for t in algorithm.trials.values()]
    assert mutations[:4] == ["random"] * 3 + ["initial"] and algorithm.trials[3].genotype == AMOEBANET_A
    assert 3 in algorithm.population and 0 not in algorithm.population  # the random ones left first
    algorithm.close()
    replayed = resume(path, read_only=True)
    assert replayed.trials == algorithm.trials and replayed.initial_last
    assert replayed.population == algorithm.population


def _choice_search(tmp_path, repeats, **kwargs):
    from searchspace import ChoiceSpace

    space = ChoiceSpace({"a": [0, 1, 2], "b": [0, 1, 2], "c": [0, 1]})
    return RegularizedEvolution(space, population_size=4, sample_size=2, seed=1, repeats=repeats,
                                journal_path=str(tmp_path / f"{repeats}.jsonl"), **kwargs)


def _score(trial):
    return {"val_accuracy": sum(trial.genotype.values.values()) / 5}


def test_reuse_takes_an_evaluated_networks_result_and_charges_nothing_for_it(tmp_path):
    search = _choice_search(tmp_path, "reuse")
    while search.completed() < 14:
        trial = search.ask()
        search.tell(trial.trial_id, _score(trial))
    charged = [t for t, o in search.outcomes.items() if o.reused_from is None]
    reused = {t: o for t, o in search.outcomes.items() if o.reused_from is not None}
    keys = [search.trials[t].genotype.key() for t in charged]
    assert len(charged) == 14 and len(set(keys)) == 14  # 14 networks trained, each once
    assert reused and search.reused() == len(reused) and search.completed() == 14
    for t, outcome in reused.items():  # the same network's result, from an earlier trial that trained it
        source = outcome.reused_from
        assert source < t and source in charged and search.outcomes[source].metrics == outcome.metrics
        assert search.trials[source].genotype.key() == search.trials[t].genotype.key()
    search.close()
    replayed = resume(str(tmp_path / "reuse.jsonl"), read_only=True)
    assert {t: (o.status, o.reused_from) for t, o in replayed.outcomes.items()} == \
        {t: (o.status, o.reused_from) for t, o in search.outcomes.items()}
    assert replayed.config()["repeats"] == "reuse"

    train = _choice_search(tmp_path, "train")  # the paper's way: repeats are trained, and charged
    while train.completed() < 14:
        trial = train.ask()
        train.tell(trial.trial_id, _score(trial))
    assert train.reused() == 0 and len({train.trials[t].genotype.key() for t in train.outcomes}) < 14


def test_under_reuse_a_twin_of_a_running_trial_is_held_until_it_ends_and_takes_its_result(tmp_path):
    from evolution.rungs import Rungs
    from searchspace import ChoiceGenotype

    twin = ChoiceGenotype({"a": 2, "b": 2, "c": 1})
    search = _choice_search(tmp_path, "reuse", initial=[twin, twin])
    first, second = search.ask(), search.ask()
    assert first.trial_id == 0 and second.trial_id == 2  # trial 1, the twin, is held back
    assert search.pending() == [0, 1, 2]
    search.tell(0, _score(first))
    assert search.outcomes[1].reused_from == 0 and search.outcomes[1].metrics == search.outcomes[0].metrics
    assert search.ask().trial_id == 3

    train = _choice_search(tmp_path, "train", initial=[twin, twin])  # the paper's: both train, at once
    assert [train.ask().trial_id, train.ask().trial_id] == [0, 1]
    with pytest.raises(ValueError, match="repeats: 'reuse' takes a finished result"):
        _choice_search(tmp_path / "r", "reuse", rungs=Rungs((1, 3), 3))


def test_under_reuse_each_held_twin_takes_the_result_once_and_the_search_resumes(tmp_path):
    """Issue 34, defect 1: reusing the first held twin reused the others from inside `_record`, and the
    outer loop reused them again: the population was [0, 1, 2, 2], the journal told trial 2 twice, a
    resume stopped at it and a read-only replay skipped it, ending with another population."""
    from searchspace import ChoiceGenotype

    twin = ChoiceGenotype({"a": 2, "b": 2, "c": 1})
    search = _choice_search(tmp_path, "reuse", initial=[twin, twin, twin])
    first, other = search.ask(), search.ask()
    assert (first.trial_id, other.trial_id) == (0, 3)  # trials 1 and 2, the twins, are held back
    search.tell(0, _score(first))
    assert list(search.population) == [0, 1, 2]
    search.close()
    with open(tmp_path / "reuse.jsonl") as f:
        tells = [e["trial_id"] for e in map(json.loads, f) if e["event"] == "tell"]
    assert tells == [0, 1, 2]
    assert list(resume(str(tmp_path / "reuse.jsonl"), read_only=True).population) == [0, 1, 2]  # as live
    resumed = resume(str(tmp_path / "reuse.jsonl"))
    assert list(resumed.population) == [0, 1, 2] and resumed.pending() == [3]
    resumed.close()
