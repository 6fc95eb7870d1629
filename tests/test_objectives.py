"""Cost-aware search in the algorithms: limits (rejected before training, infeasible after), the
MnasNet reward, Pareto evolution's tournament, and the journal replaying all of them."""

import dataclasses
import json
import random

import pytest

from evolution import Limits, MnasReward, ParetoEvolution, RandomSearch, RegularizedEvolution, parse_goals, resume
from evolution.pareto import crowding_distances, non_dominated_ranks
from experiments.search.driver import CircuitBreaker
from searchspace import NasBench201Space
from searchspace.ops import NASBENCH201_OPS

SPACE = NasBench201Space()


_RNG = random.Random(0)
_GAIN = {(e, op): _RNG.random() for e in range(6) for op in NASBENCH201_OPS}
_COST = {k: 0.5 * v + 0.5 * _RNG.random() for k, v in _GAIN.items()}  # accuracy costs, loosely


def accuracy_of(genotype) -> float:
    """A made-up additive landscape (a value per edge and op), so that mutation has something to climb."""
    return sum(_GAIN[(e, op)] for e, op in enumerate(genotype.ops)) / 6


def cost_of(genotype) -> float:
    """A made-up cost in about 1..10 that grows with the accuracy, loosely: a trade-off."""
    return 1 + 1.5 * sum(_COST[(e, op)] for e, op in enumerate(genotype.ops))


def metrics_of(trial) -> dict:
    return {"val_accuracy": accuracy_of(trial.genotype), "latency_ms": cost_of(trial.genotype),
            "params": 1000 * cost_of(trial.genotype)}


def run(algorithm, n: int) -> list:
    trials = []
    for _ in range(n):
        trial = algorithm.ask()
        algorithm.tell(trial.trial_id, metrics_of(trial))
        trials.append(trial)
    return trials


def size_of(genotype) -> dict:
    return {"params": 1000 * cost_of(genotype)}


@pytest.mark.parametrize("limits, side, flag", [({"params": 5000}, 1, "--max_params"),
                                               ({"min_params": 6500}, -1, "--min_params")], ids=["ceiling", "floor"])
def test_a_child_past_a_size_limit_is_rejected_untrained_and_counted(tmp_path, limits, side, flag):
    bound = next(iter(limits.values()))
    path = str(tmp_path / "j.jsonl")
    measured = []
    algorithm = RegularizedEvolution(SPACE, population_size=8, sample_size=3, seed=1, journal_path=path,
                                     limits=limits, measure=lambda g: measured.append(g) or size_of(g))
    trials = run(algorithm, 40)
    assert all(side * size_of(t.genotype)["params"] <= side * bound for t in trials)
    assert algorithm.rejected > 10 and algorithm.completed() == 40  # rejections are not charged
    with open(path) as f:
        rejects = [e for e in map(json.loads, f) if e["event"] == "reject"]
    assert len(rejects) == algorithm.rejected
    assert all(side * e["figures"]["params"] > side * bound and flag in e["reason"] for e in rejects)
    # A replay takes the figures from the journal: it measures nothing, and comes back identical.
    algorithm.close()
    count = len(measured)
    replayed = resume(path, measure=lambda g: pytest.fail("a replay must not measure"))
    assert replayed.rejected == algorithm.rejected and replayed.rng.getstate() == algorithm.rng.getstate()
    assert len(measured) == count and replayed.limits == algorithm.limits
    replayed.close()


def test_resume_of_a_limited_search_continues_as_the_live_run(tmp_path):
    kwargs = dict(population_size=8, sample_size=3, seed=2, limits={"params": 5500}, measure=size_of)
    reference = [t.genotype.key() for t in run(RegularizedEvolution(SPACE, **kwargs), 60)]
    path = str(tmp_path / "j.jsonl")
    algorithm = RegularizedEvolution(SPACE, journal_path=path, **kwargs)
    got = [t.genotype.key() for t in run(algorithm, 25)]
    algorithm.close()
    algorithm = resume(path, measure=size_of)
    got += [t.genotype.key() for t in run(algorithm, 35)]
    assert got == reference


def test_limits_that_leave_no_room_are_a_config_error():
    algorithm = RandomSearch(SPACE, limits={"params": 1}, measure=size_of)
    with pytest.raises(ValueError, match="no candidate fits"):
        algorithm.ask()


def test_a_result_over_a_limit_is_infeasible_not_failed_and_the_breaker_ignores_it():
    algorithm = RegularizedEvolution(SPACE, population_size=4, sample_size=2, seed=0, limits={"latency_ms": 5.5})
    breaker = CircuitBreaker(limit=2)
    statuses = []
    for _ in range(30):
        trial = algorithm.ask()
        metrics = metrics_of(trial)
        if metrics["latency_ms"] > 5.5:  # as a trial reports it: measured, untrained
            metrics = {"val_accuracy": float("nan"), "latency_ms": metrics["latency_ms"]}
        algorithm.tell(trial.trial_id, metrics)
        outcome = algorithm.outcomes[trial.trial_id]
        breaker.record(outcome.status, outcome.error)
        statuses.append(outcome.status)
        if outcome.status == "infeasible":
            assert "latency_ms" in outcome.error and "--max_latency_ms" in outcome.error
            assert trial.trial_id not in algorithm.population
    assert statuses.count("infeasible") > 5 and "failed" not in statuses
    assert not breaker.tripped  # infeasible results in a row are not failures
    best = algorithm.best()[1].metrics
    assert best["latency_ms"] <= 5.5
    breaker.record("failed", "NaN loss")
    breaker.record("infeasible", "latency")
    breaker.record("failed", "NaN loss")
    assert breaker.tripped  # an infeasible one between failures neither resets nor counts


def test_the_mnas_reward_trades_accuracy_for_cost():
    reward = MnasReward("latency_ms", target=10.0, weight=-0.07)
    assert reward.score(0.8, {"latency_ms": 10.0}) == pytest.approx(0.8)
    assert reward.score(0.8, {"latency_ms": 20.0}) == pytest.approx(0.8 * 2 ** -0.07)
    algorithm = RegularizedEvolution(SPACE, population_size=4, sample_size=2, reward=reward)
    slow, fast = algorithm.ask(), algorithm.ask()
    algorithm.tell(slow.trial_id, {"val_accuracy": 0.80, "latency_ms": 40.0})  # 0.80 x 4^-0.07 = 0.7259
    algorithm.tell(fast.trial_id, {"val_accuracy": 0.75, "latency_ms": 5.0})  # 0.75 x 0.5^-0.07 = 0.7873
    assert algorithm.best()[0].trial_id == fast.trial_id
    assert algorithm.score(algorithm.best()[1].metrics) == pytest.approx(0.75 * 0.5 ** -0.07)
    third = algorithm.ask()
    algorithm.tell(third.trial_id, {"val_accuracy": 0.9})  # no cost measured: the reward cannot be scored
    assert algorithm.outcomes[third.trial_id].status == "failed"
    assert "latency_ms" in algorithm.outcomes[third.trial_id].error


def test_goals_parse_with_modes_and_refuse_unknown_measures():
    assert [str(g) for g in parse_goals("val_accuracy:max,latency_ms:min")] == ["val_accuracy:max", "latency_ms:min"]
    from evolution import MEASURES

    assert [g.mode for g in parse_goals(["val_accuracy", "params"], MEASURES)] == ["max", "min"]
    with pytest.raises(ValueError, match="unknown measure 'latency'"):
        parse_goals(["latency:min"], MEASURES)
    with pytest.raises(ValueError, match="max_params"):
        Limits({"params": -1})
    with pytest.raises(ValueError, match="min_latency_ms: a floor can only be put under params, multiply_adds"):
        Limits.from_config({"min_latency_ms": 5})
    with pytest.raises(ValueError, match="min_params: 6000 is over max_params"):
        Limits.from_config({"params": 5000, "min_params": 6000})


def _pareto(**kwargs):
    return ParetoEvolution(SPACE, population_size=20, sample_size=4, seed=3,
                           objectives=["val_accuracy:max", "latency_ms:min"], **kwargs)


def test_the_pareto_tournament_picks_the_lowest_rank_then_the_most_isolated():
    """Every parent is a member of its sample with no lower non-dominated rank (within the whole
    population) than any other, and among equal ranks the largest crowding distance: a tournament
    by the first objective, or by a score of each member, fails this."""
    algorithm = _pareto()
    run(algorithm, 20)
    checked = 0
    for _ in range(300):
        members = list(algorithm.population)
        points = [(algorithm.outcomes[m].metrics["val_accuracy"], -algorithm.outcomes[m].metrics["latency_ms"])
                  for m in members]
        ranks = non_dominated_ranks(points)
        crowding = crowding_distances(points, ranks)
        key = {m: (ranks[i], -crowding[i]) for i, m in enumerate(members)}
        state = algorithm.rng.getstate()
        sample = [members[algorithm.rng.randrange(len(members))] for _ in range(4)]  # the draw it will make
        algorithm.rng.setstate(state)
        trial = algorithm.ask()
        assert key[trial.parent_id] == min(key[m] for m in sample)
        checked += key[trial.parent_id] != min(key[m] for m in sample[:1])  # not merely the first drawn
        algorithm.tell(trial.trial_id, metrics_of(trial))
    assert checked > 100


def test_pareto_evolution_finds_more_of_the_front_than_random_search():
    """On the space's 15,625 cells with made-up accuracy and cost: the share of the true front that
    300 evaluations hit, over 5 seeds."""
    from evolution.pareto import front as front_of

    cells = SPACE.all_genotypes()
    points = [(accuracy_of(g), -cost_of(g)) for g in cells]
    true_front = {cells[i].key() for i in front_of(points)}

    def hits(algorithm):
        return len({t.genotype.key() for t in run(algorithm, 300)} & true_front)

    pareto = sum(hits(ParetoEvolution(SPACE, population_size=30, sample_size=6, seed=s,
                                      objectives=["val_accuracy:max", "latency_ms:min"])) for s in range(5))
    rand = sum(hits(RandomSearch(SPACE, seed=s)) for s in range(5))
    assert pareto > 2 * rand


def test_a_pareto_search_resumes_to_the_same_state(tmp_path):
    reference = _pareto()
    expected = [t.genotype.key() for t in run(reference, 70)]
    path = str(tmp_path / "j.jsonl")
    algorithm = _pareto(journal_path=path)
    got = [t.genotype.key() for t in run(algorithm, 30)]
    pending = algorithm.ask()  # in flight when the driver dies
    algorithm.close()
    algorithm = resume(path)
    assert algorithm.name == "pareto_evolution" and algorithm.rng.getstate() != random.Random(3).getstate()
    assert algorithm.ask().trial_id == pending.trial_id  # re-issued once, same id
    algorithm.tell(pending.trial_id, metrics_of(pending))
    got += [pending.genotype.key()] + [t.genotype.key() for t in run(algorithm, 39)]
    assert got == expected
    assert algorithm.front() == reference.front()
    assert list(algorithm.population) == list(reference.population)


def test_pareto_evolution_refuses_one_objective_and_a_reward():
    with pytest.raises(ValueError, match="at least two"):
        ParetoEvolution(SPACE, objectives=["val_accuracy:max"])
    with pytest.raises(ValueError, match="reward"):
        _pareto(reward=MnasReward("latency_ms", 5.0))


def test_pareto_evolution_with_rungs_ranks_like_with_like_and_resumes(tmp_path):
    """Pareto evolution takes rungs: each member is ranked at the highest rung the whole population
    reached, the rung rule goes by the first goal, and the journal replays to the same state."""
    from evolution import Rungs

    path = str(tmp_path / "j.jsonl")
    algorithm = _pareto(journal_path=path, rungs=Rungs((1, 3)))
    for _ in range(80):
        trial = algorithm.ask()
        metrics = metrics_of(trial)
        for rung in range(trial.start_rung, 2):
            metrics = {**metrics, "val_accuracy": metrics["val_accuracy"] + 0.01 * rung}
            if algorithm.report(trial.trial_id, rung, metrics) != "continue":
                break
        algorithm.tell(trial.trial_id, algorithm.rung_results[trial.trial_id][-1])
    assert any(algorithm.highest_rung(t) == 1 for t in algorithm.trials)
    assert any(t.parent_id is not None for t in algorithm.trials.values())
    algorithm.close()
    replayed = resume(path, read_only=True)
    assert replayed.rng.getstate() == algorithm.rng.getstate() and replayed.front() == algorithm.front()
    assert list(replayed.population) == list(algorithm.population)


def test_the_reward_refuses_an_objective_to_minimise():
    """Defect: with mode=min the reward scaled a loss down for a slower cell, preferring it."""
    with pytest.raises(ValueError, match="larger is better"):
        RegularizedEvolution(SPACE, objective="val_loss", mode="min", reward=MnasReward("latency_ms", 10))


def test_the_reward_of_a_larger_is_better_cost_favours_the_faster_cell():
    """Defect: images_per_sec was taken as a cost, so the reward preferred the slower cell."""
    reward = MnasReward("images_per_sec", 100.0)
    fast = reward.score(0.9, {"images_per_sec": 200.0})
    slow = reward.score(0.9, {"images_per_sec": 50.0})
    assert fast > 0.9 > slow
    latency = MnasReward("latency_ms", 10.0)
    assert latency.score(0.9, {"latency_ms": 5.0}) > 0.9 > latency.score(0.9, {"latency_ms": 20.0})


def _limit_gap(keys, cells, limits) -> float:
    """The mean over `limits` of (the best accuracy of any cell under the limit) - (the best among `keys`)."""
    seen = set(keys)
    gaps = []
    for limit in limits:
        under = [g for g in cells if cost_of(g) <= limit]
        found = [accuracy_of(g) for g in under if g.key() in seen] or [min(accuracy_of(g) for g in under)]
        gaps.append(max(accuracy_of(g) for g in under) - max(found))
    return sum(gaps) / len(gaps)


def test_the_limit_tournament_gets_nearer_the_best_cell_under_each_limit_than_nsga2():
    """Made-up accuracy and cost (the params measure, known before training): the per-limit gap at
    the cost's 5th..95th percentiles after 150 evaluations, summed over 3 seeds."""
    cells = SPACE.all_genotypes()
    costs = sorted(cost_of(g) for g in cells)
    limits = [costs[int(len(costs) * p / 100)] for p in range(5, 100, 10)]
    goals = ["val_accuracy:max", "params:min"]

    def gap(**params) -> float:
        return sum(_limit_gap([t.genotype.key() for t in run(ParetoEvolution(
            SPACE, population_size=30, sample_size=6, seed=s, objectives=goals, measure=size_of, **params), 150)],
            cells, limits) for s in range(3))

    nsga2, limit = gap(), gap(tournament="limit", offspring=4)
    assert limit < 0.5 * nsga2, (limit, nsga2)  # 0.008 against 0.076 when written


def test_a_limit_tournament_search_replays_without_its_measure_and_resumes_as_the_live_run(tmp_path):
    params = dict(population_size=8, sample_size=3, seed=5, objectives=["val_accuracy:max", "params:min"],
                  tournament="limit", offspring=3)
    reference = [t.genotype.key() for t in run(ParetoEvolution(SPACE, measure=size_of, **params), 60)]
    path = str(tmp_path / "j.jsonl")
    algorithm = ParetoEvolution(SPACE, measure=size_of, journal_path=path, **params)
    got = [t.genotype.key() for t in run(algorithm, 40)]
    algorithm.close()
    events = [json.loads(line) for line in open(path)]
    assert any("measured" in e for e in events if e["event"] == "ask")  # the children passed over, journaled
    replayed = resume(path, read_only=True)  # no measure: the journal's figures are enough
    assert [t.genotype.key() for t in replayed.trials.values()] == got
    resumed = resume(path, measure=size_of)
    assert got + [t.genotype.key() for t in run(resumed, 20)] == reference
    resumed.close()
    with pytest.raises(ValueError, match="offspring: 1, or more with --tournament=limit"):
        ParetoEvolution(SPACE, offspring=2)
    from evolution.proposal import LimitTournament
    from experiments.search.search_config import SearchConfig

    config = SearchConfig(output_dir=str(tmp_path / "s"), algorithm="pareto_evolution", tournament="limit",
                          offspring=3)
    assert config.new_algorithm().proposal == LimitTournament(10, 3, 3)  # amoeba search --tournament --offspring
    assert config.size_measure() is None  # latency is measured by the trial: not known before training
    sized = dataclasses.replace(config, objectives=("val_accuracy:max", "params:min"))
    assert sized.size_measure() is not None  # a child's parameters are: it is built before it is trained
    with pytest.raises(ValueError, match="tournament, offspring: Pareto evolution's"):
        SearchConfig(output_dir=str(tmp_path / "s"), tournament="limit")
    with pytest.raises(ValueError, match="tournament: one of"):
        ParetoEvolution(SPACE, tournament="crowded")


@pytest.mark.parametrize("offspring", [1, 3])
def test_the_limit_tournament_with_rungs_draws_its_limit_from_the_first_rung_before_any_tell(tmp_path, offspring):
    """Defect: under the promotion rule every trial pauses at the first rung, so the population
    fills before any trial is told; the limit was drawn from told results only (IndexError), and
    with offspring > 1 the model was fitted to none. Now both read the first rung's results."""
    from evolution import Rungs

    path = str(tmp_path / "j.jsonl")
    algorithm = ParetoEvolution(SPACE, population_size=4, sample_size=2, seed=1, rungs=Rungs((1, 3)),
                                rung_rule="promotion", objectives=["val_accuracy:max", "latency_ms:min"],
                                tournament="limit", offspring=offspring, journal_path=path)
    told_at_first_child = None
    for _ in range(12):
        trial = algorithm.ask()
        if trial.parent_id is not None and told_at_first_child is None:
            told_at_first_child = len(algorithm.outcomes)
        if trial.start_rung == 0:
            assert algorithm.report(trial.trial_id, 0, metrics_of(trial)) == "pause"
        else:
            algorithm.report(trial.trial_id, 1, metrics_of(trial))
            algorithm.tell(trial.trial_id, algorithm.rung_results[trial.trial_id][-1])
    assert told_at_first_child == 0  # children were bred before any trial was told
    assert sum(t.parent_id is not None for t in algorithm.trials.values()) > 4
    algorithm.close()
    replayed = resume(path, read_only=True)
    assert replayed.trials == algorithm.trials and replayed.rng.getstate() == algorithm.rng.getstate()
