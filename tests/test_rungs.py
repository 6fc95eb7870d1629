"""Multi-fidelity evolution: the rung rule, its journal and replay, and the simulated clock."""

import json

import numpy as np
import pytest

from evolution import RandomSearch, RegularizedEvolution, resume
from evolution.rungs import CONTINUE, PAUSE, STOP, PausingPromotions, PayoffPromotions, Promotions, Rungs
from experiments.simulate.simulator import Fidelities, parse_fidelities, run_time_benchmark, simulate
from experiments.simulate.tabular import load_table, run_once, write_synthetic_table
from searchspace import NasBench201Space
from tests.conftest import amoeba, hashed_fitness


def test_geometric_rungs_continue_the_top_third_within_the_cost_cap():
    rule = Promotions(Rungs((1, 3, 9)))
    assert rule.fraction(0) == pytest.approx(1 / 3) and rule.fraction(1) == pytest.approx(1 / 3)
    decisions = [rule.decide(0, v, 1.0) for v in range(30)]  # rising values: each the best so far
    # a continuation costs 2 epochs; rung 1 may receive a third of rung 0's spend
    assert decisions.count(CONTINUE) == 5 and decisions[:5] == [STOP, STOP, STOP, STOP, STOP]
    assert rule.spent[1] <= rule.spent[0] / 3
    assert rule.decide(2, 5.0, 1.0) == STOP  # the top rung ends a trial


def test_an_expensive_rung_continues_only_the_leader():
    rule = Promotions(Rungs((12, 200)))
    assert rule.fraction(0) < 0.01
    # 188 extra epochs are paid for by 47 x 12 epochs at rung 0 (a third of their spend)
    assert all(rule.decide(0, float(v), 1.0) == STOP for v in range(45))  # leaders, cap short
    assert rule.decide(0, 4.5, 1.0) == STOP  # the 46th: not the best
    assert rule.decide(0, 99.0, 1.0) == CONTINUE  # the 47th, the leader: the cap allows it
    assert rule.decide(0, 100.0, 1.0) == STOP  # the leader again, but the cap is spent


@pytest.mark.parametrize("bad", [(), (0, 3), (3, 3), (9, 3)])
def test_rungs_are_validated(bad):
    with pytest.raises(ValueError, match="rungs"):
        Rungs(bad)


def drive(algorithm, n, rungs, fitness=hashed_fitness):
    """Trials two at a time; each reports at every rung it is told to reach."""
    while algorithm.completed() < n:
        trials = [algorithm.ask() for _ in range(2)]
        for trial in trials:
            key = trial.genotype.key()
            for rung, epochs in enumerate(rungs):
                metrics = {"val_accuracy": fitness(key) + 0.01 * epochs}
                if algorithm.report(trial.trial_id, rung, metrics) == STOP:
                    break
            algorithm.tell(trial.trial_id, algorithm.rung_results[trial.trial_id][-1])


def test_rung_decisions_are_journaled_and_replayed(tmp_path):
    journal = str(tmp_path / "journal.jsonl")
    rungs = Rungs((1, 3, 9))
    algorithm = RegularizedEvolution(NasBench201Space(), population_size=8, sample_size=3, seed=4,
                                     journal_path=journal, rungs=rungs)
    drive(algorithm, 120, rungs.epochs)
    algorithm.close()
    events = [json.loads(line) for line in open(journal)]
    assert events[0]["rungs"] == {"epochs": [1, 3, 9], "reduction_factor": 3.0}
    decided = [e for e in events if e["event"] == "rung"]
    assert {e["rung"] for e in decided} == {0, 1, 2} and any(e["decision"] == CONTINUE for e in decided)
    replayed = resume(journal, read_only=True)
    assert replayed.decisions == algorithm.decisions and replayed.rung_results == algorithm.rung_results
    assert replayed.rng.getstate() == algorithm.rng.getstate()
    assert replayed.best()[0] == algorithm.best()[0]
    assert replayed.highest_rung(replayed.best()[0].trial_id) >= 1  # promoted: rung 1's leader


def test_a_trial_decided_but_not_told_is_finished_on_resume(tmp_path):
    journal = str(tmp_path / "journal.jsonl")
    algorithm = RandomSearch(NasBench201Space(), seed=1, journal_path=journal, rungs=Rungs((1, 3)))
    first, second = algorithm.ask(), algorithm.ask()
    assert algorithm.report(first.trial_id, 0, {"val_accuracy": 0.5}) == STOP  # too soon: the cap
    assert algorithm.report(second.trial_id, 0, {"val_accuracy": 0.6}) == STOP
    algorithm.tell(second.trial_id, algorithm.rung_results[second.trial_id][-1])
    algorithm.close()  # the driver ends before telling the first
    resumed = resume(journal)
    assert resumed.outcomes[first.trial_id].metrics["val_accuracy"] == 0.5 and not resumed.pending()
    assert resumed.report(second.trial_id, 0, {"val_accuracy": 0.6}) == STOP  # told: not in flight
    resumed.close()


def test_the_tournament_compares_like_with_like():
    algorithm = RegularizedEvolution(NasBench201Space(), population_size=2, sample_size=2, seed=0,
                                     rungs=Rungs((1, 100), reduction_factor=2))
    low, high = algorithm.ask(), algorithm.ask()
    algorithm.report(high.trial_id, 0, {"val_accuracy": 0.9})
    algorithm.report(low.trial_id, 0, {"val_accuracy": 0.1})
    algorithm.decisions[low.trial_id][0] = CONTINUE  # as if promoted: a far higher rung-1 value
    algorithm.rung_results[low.trial_id].append({"val_accuracy": 0.95})
    algorithm.decisions[low.trial_id].append(STOP)
    parents = [algorithm.ask().parent_id for _ in range(400)]
    # like with like, `low` wins only a sample of itself alone (1 in 4); compared at each one's own
    # highest rung it would win every sample it is in (3 in 4)
    assert parents.count(high.trial_id) > 2 * parents.count(low.trial_id) > 0


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("t") / "nb201.csv"
    write_synthetic_table(str(path))
    frame = path.read_text().splitlines()
    rows = [frame[0] + ",hi,cost"] + [f"{line},{float(line.split(',')[2]) + 1:.5f},{1 + i % 3}"
                                      for i, line in enumerate(frame[1:])]
    path.write_text("\n".join(rows) + "\n")
    return load_table(str(path), "nasbench201", "arch", "val", "test", ["hi", "cost"])


def test_one_worker_at_unit_cost_is_the_evaluation_count(table):
    times, picks, started = simulate(table, "nasbench201", "regularized_evolution", Fidelities({1: "val"}), None,
                                     budget_s=60, workers=1, seed=3, mode="max",
                                     params={"population_size": 10, "sample_size": 3})
    curve, _ = run_once(table, "nasbench201", "regularized_evolution", 60, 3, "max",
                        {"population_size": 10, "sample_size": 3}, dedup=False)
    np.testing.assert_array_equal(times, np.arange(1, 61))
    np.testing.assert_array_equal(picks, curve)
    assert started == 61  # the worker took its next trial at t=60; it would finish after the budget


def test_asynchronous_workers_deliver_results_in_finishing_order(table):
    fidelities = Fidelities({1: "val", 4: "hi"}, rungs=(1, 4), reduction_factor=2)
    times, picks, started = simulate(table, "nasbench201", "regularized_evolution", fidelities, "cost",
                                     budget_s=400, workers=8, seed=0, mode="max",
                                     params={"population_size": 10, "sample_size": 3})
    assert np.all(np.diff(times) >= 0) and times[-1] <= 400 and not np.isnan(picks).any()
    # 8 busy workers, each trial at least 1 s: about 8 results a simulated second at most
    assert 8 * 400 / 3 <= len(times) + started <= 2 * 8 * 400


def test_time_benchmark_summary_and_command(table, tmp_path):
    result = run_time_benchmark(table, "nasbench201", ["regularized_evolution", "random"],
                                Fidelities(parse_fidelities(["1:val", "4:hi"]), (1, 4)), "cost", 300, 4, 20, 0,
                                "max", {"population_size": 10, "sample_size": 3})
    re_final, random_final = (result["summary"][a]["1"] for a in ("regularized_evolution", "random"))
    assert re_final["mean"] > random_final["mean"] and re_final["n"] == 20 and re_final["ci95"] > 0
    assert result["curves"]["random"].shape == (20, 200)
    with pytest.raises(ValueError, match="not among the fidelities"):
        Fidelities({1: "val"}, rungs=(1, 4))
    with pytest.raises(ValueError, match="EPOCHS:COLUMN"):
        parse_fidelities(["val"])


def test_the_payoff_rule_buys_a_rung_only_while_it_changes_the_lead_as_often_as_the_rung_below():
    """12 -> 200 epochs: a promotion costs 188 / 12 = 15.7 rung-0 results. With the prior (1 lead
    change in 2 results at the top rung), a new leader goes on only if it took 32 results to arrive;
    the stopping rule promotes it as soon as the cost cap allows."""
    payoff, stopping = PayoffPromotions(Rungs((12, 200))), Promotions(Rungs((12, 200)))
    values = [float(v) for v in range(50)]  # a new leader at every result: the rung below still pays
    assert [payoff.decide(0, v, 1.0, i) for i, v in enumerate(values)] == [STOP] * 50
    assert [stopping.decide(0, v, 1.0, i) for i, v in enumerate(values)].count(CONTINUE) == 1
    for i in range(50, 80):  # 30 results without a new leader ...
        payoff.decide(0, 0.5, 1.0, i)
    assert payoff.decide(0, 60.0, 1.0, 80) == STOP  # ... the 31st takes the lead: 31 x 1/2 < 15.7
    for i in range(81, 112):
        payoff.decide(0, 0.5, 1.0, i)
    assert payoff.decide(0, 70.0, 1.0, 112) == CONTINUE  # 32 results for this lead change: bought
    assert payoff.decide(1, 70.0, 1.0, 112) == STOP and payoff.compared[1] == 0  # alone at the top: no record

    def rung0(rule, values, start):  # the rule's decision for the last of `values`, trial ids from `start`
        return [rule.decide(0, v, 1.0, t) for t, v in enumerate(values, start=start)][-1]

    for lead_at_rung_1, bought in ((3.0, False), (1.0, True)):  # a cheap rung: a promotion is 2 results' worth;
        # each new leader below beats all before it, the others are in no top third
        rule = PayoffPromotions(Rungs((1, 3)))
        assert rung0(rule, [1.0, 0.5, 0.4, 0.3, 0.2, 0.1, 2.0], 0) == CONTINUE  # 6 results for the lead: 6 x 1/2 >= 2
        rule.decide(1, 2.0, 1.0, 6)
        assert rung0(rule, [-1.0, -2.0, -3.0, -4.0, -5.0, 3.0], 7) == CONTINUE
        rule.decide(1, lead_at_rung_1, 1.0, 12)  # the rungs agree (3.0 leads both) or not (1.0 < 2.0 at rung 1)
        assert (rule.disagreed[1], rule.compared[1]) == (0 if not bought else 1, 1)
        # 5 results for the next lead: 5 x 1/3 < 2 where the rung agreed, 5 x 2/3 >= 2 where it changed the lead
        assert rung0(rule, [-6.0, -7.0, -8.0, -9.0, 4.0], 13) == (CONTINUE if bought else STOP)


def test_payoff_decisions_are_journaled_and_replayed_and_amoeba_search_takes_the_rule(tmp_path):
    from experiments.search.search_config import SearchConfig

    journal = str(tmp_path / "journal.jsonl")
    algorithm = RegularizedEvolution(NasBench201Space(), population_size=8, sample_size=3, seed=4,
                                     journal_path=journal, rungs=Rungs((1, 3, 9)), rung_rule="payoff")
    drive(algorithm, 80, (1, 3, 9))
    algorithm.close()
    assert any(CONTINUE in d for d in algorithm.decisions.values())
    replayed = resume(journal, read_only=True)
    assert replayed.rung_rule.name == "payoff" and replayed.decisions == algorithm.decisions
    assert replayed.rung_rule.compared == algorithm.rung_rule.compared
    config = SearchConfig(output_dir=str(tmp_path / "s"), rungs=(1, 3), rung_rule="payoff")
    assert config.new_algorithm().rung_rule.name == "payoff"
    with pytest.raises(ValueError, match="rung_rule: 'payoff' needs --rungs"):
        SearchConfig(output_dir=str(tmp_path / "s"), rung_rule="payoff")
    with pytest.raises(ValueError, match="for amoeba benchmark only"):
        SearchConfig(output_dir=str(tmp_path / "s"), rungs=(1, 3), rung_rule="promotion")


def test_the_rung_rule_is_chosen_by_name_and_named_in_the_journal(tmp_path):
    from evolution import RUNG_RULES

    assert set(RUNG_RULES) >= {"stopping", "promotion"}
    journal = str(tmp_path / "journal.jsonl")
    algorithm = RegularizedEvolution(NasBench201Space(), population_size=4, sample_size=2, seed=0,
                                     journal_path=journal, rungs=Rungs((1, 3)), rung_rule="promotion")
    algorithm.close()
    assert json.loads(open(journal).readline())["rung_rule"] == "promotion"
    assert resume(journal, read_only=True).rung_rule.name == "promotion"
    with pytest.raises(ValueError, match="rung_rule: unknown 'nope'"):
        RegularizedEvolution(NasBench201Space(), rungs=Rungs((1, 3)), rung_rule="nope")


def test_a_journal_without_a_rule_name_replays_as_the_stopping_rule(tmp_path):
    journal = str(tmp_path / "journal.jsonl")
    algorithm = RegularizedEvolution(NasBench201Space(), population_size=8, sample_size=3, seed=4,
                                     journal_path=journal, rungs=Rungs((1, 3, 9)))
    drive(algorithm, 60, (1, 3, 9))
    algorithm.close()
    lines = open(journal).read().splitlines()
    start = json.loads(lines[0])
    del start["rung_rule"]  # as written before rules had names
    (tmp_path / "old.jsonl").write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    replayed = resume(str(tmp_path / "old.jsonl"), read_only=True)
    assert replayed.rung_rule.name == "stopping" and replayed.decisions == algorithm.decisions


def test_the_promotion_rule_pauses_and_promotes_the_best_paused_when_the_share_allows():
    rule = PausingPromotions(Rungs((12, 200)))
    # like the stopping rule's test: 188 extra epochs need 47 x 12 epochs at rung 0
    assert all(rule.decide(0, float(v), 1.0, v) == PAUSE for v in range(46))
    assert rule.promotion() is None  # the leader (45) waits: the share is not there yet
    assert rule.decide(0, 1.5, 1.0, 46) == PAUSE
    assert rule.promotion() == (45, 0)  # the 47th result paid for it: the best paused goes on
    rule.promote(45, 0)
    assert rule.promotion() is None and rule.decide(1, 50.0, 1.0, 45) == STOP  # the top rung ends a trial


def test_a_rung_leader_after_a_spent_share_waits_instead_of_being_stopped():
    """The stopping rule's limit: a leader that arrives just after a promotion spent the share is
    stopped for good; the promotion rule lets it go on once the share allows."""
    stopping, promotion = Promotions(Rungs((1, 3))), PausingPromotions(Rungs((1, 3)))
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 0.1, 0.2, 0.3, 0.4, 0.5]  # a continuation costs 2 of 6
    decisions = [stopping.decide(0, v, 1.0) for v in values]
    assert decisions[5] == CONTINUE and decisions[6:] == [STOP] * 6  # the leader 7.0, right after: stopped
    promoted = []
    for trial_id, value in enumerate(values):
        promotion.decide(0, value, 1.0, trial_id)
        while (chosen := promotion.promotion()) is not None:
            promotion.promote(*chosen)
            promoted.append(chosen[0])
    assert promoted == [5, 6]  # 7.0 went on once the rung had paid for it


def drive_pausing(algorithm, n, rungs, fitness=hashed_fitness):
    """One trial at a time; a paused trial frees its worker untold, a continuation goes on from its rung."""
    handed = []
    while algorithm.completed() < n:
        trial = algorithm.ask()
        handed.append((trial.trial_id, trial.start_rung))
        for rung in range(trial.start_rung, len(rungs)):
            decision = algorithm.report(trial.trial_id, rung, {"val_accuracy": fitness(trial.genotype.key()) + 0.01 * rung})
            if decision != CONTINUE:
                break
        if decision == STOP:
            algorithm.tell(trial.trial_id, algorithm.rung_results[trial.trial_id][-1])
    return handed


def test_continuations_are_journaled_and_replayed(tmp_path):
    journal = str(tmp_path / "journal.jsonl")
    algorithm = RegularizedEvolution(NasBench201Space(), population_size=8, sample_size=3, seed=4,
                                     journal_path=journal, rungs=Rungs((1, 3, 9)), rung_rule="promotion")
    handed = drive_pausing(algorithm, 15, (1, 3, 9))
    continued = [(t, r) for t, r in handed if r > 0]
    assert continued and all(algorithm.trials[t].trial_id == t for t, _ in continued)
    events = [json.loads(line) for line in open(journal)]
    assert [(e["trial_id"], e["rung"] + 1) for e in events if e["event"] == "continue"] == continued
    assert algorithm.paused() and not set(algorithm.paused()) & set(algorithm.pending())
    algorithm.close()
    resumed = resume(journal)
    assert resumed.decisions == algorithm.decisions and resumed.rng.getstate() == algorithm.rng.getstate()
    assert resumed.paused() == algorithm.paused() and resumed.waiting_reissue() == 0
    assert resumed.report(continued[0][0], continued[0][1] - 1, {"val_accuracy": 0.0}) == CONTINUE  # decided before
    reference = RegularizedEvolution(NasBench201Space(), population_size=8, sample_size=3, seed=4,
                                     rungs=Rungs((1, 3, 9)), rung_rule="promotion")
    drive_pausing(reference, 15, (1, 3, 9))
    assert drive_pausing(resumed, 40, (1, 3, 9)) == drive_pausing(reference, 40, (1, 3, 9))
    resumed.close()


@pytest.mark.parametrize("rule", ["stopping", "payoff", "promotion"])
def test_the_simulator_drives_either_rule(table, rule):
    fidelities = Fidelities({1: "val", 4: "hi"}, rungs=(1, 4), reduction_factor=2, rule=rule)
    times, picks, started = simulate(table, "nasbench201", "regularized_evolution", fidelities, "cost",
                                     budget_s=400, workers=4, seed=0, mode="max",
                                     params={"population_size": 10, "sample_size": 3})
    assert np.all(np.diff(times) >= 0) and not np.isnan(picks[-1]) and started > 50
    with pytest.raises(ValueError, match="--rung_rule: unknown"):
        Fidelities({1: "val"}, rule="nope")


def test_a_simulated_pareto_search_may_not_read_the_report_column_or_a_higher_fidelity(table):
    """Defect: with --budget_s, Pareto evolution could take the report column (or a fidelity it had
    not paid for) as its first objective and report inflated results."""
    from evolution.objectives import parse_goals
    from experiments.simulate.tabular import TableCosts

    for goals, unpaid in (("test:max,cost:min", "report column"), ("hi:max,cost:min", "higher fidelity")):
        with pytest.raises(ValueError, match=f"--objectives: .*{unpaid}|--objectives: the first"):
            run_time_benchmark(table, "nasbench201", ["pareto_evolution"], Fidelities({1: "val", 4: "hi"}, (1, 4)),
                               "cost", 100, 2, 1, 0, "max", {}, TableCosts(objectives=parse_goals(goals)))
    with pytest.raises(ValueError, match="--objectives: test is the report column"):
        run_time_benchmark(table, "nasbench201", ["pareto_evolution"], Fidelities({1: "val"}), "cost", 100, 2, 1, 0,
                           "max", {}, TableCosts(objectives=parse_goals("val:max,test:max")))


def test_a_trial_put_back_after_its_last_rung_was_decided_is_not_trained_again(tmp_path):
    """Found by tests/test_controller_simulation.py: a trial whose worker was lost after its rung was
    decided STOP (or whose lost worker's late rung result came in before it was handed out again)
    was re-issued to train on past the STOP; one a late result paused was handed out without the
    rule's continuation. Now a stopped one is told that rung's result (as a resume tells it) and a
    paused one waits for the rule."""
    path = str(tmp_path / "j.jsonl")
    search = RandomSearch(NasBench201Space(), seed=0, rungs=Rungs((1, 3)), journal_path=path)
    first = search.ask()
    assert search.report(first.trial_id, 0, {"val_accuracy": 0.5}) == STOP  # the rung's cost share is empty
    assert search.requeue(first.trial_id)  # its worker lost before the tell: handled, told at once
    assert search.outcomes[0].status == "ok" and search.pending() == [] and search.waiting_reissue() == 0
    assert search.ask().trial_id == 1  # not trial 0 again
    assert search.outcomes[0].status == "ok" and search.outcomes[0].metrics["val_accuracy"] == 0.5
    search.close()
    assert resume(path, read_only=True).outcomes[0].metrics == search.outcomes[0].metrics

    paused = RandomSearch(NasBench201Space(), seed=0, rungs=Rungs((1, 3)), rung_rule="promotion")
    trial = paused.ask()
    assert paused.requeue(trial.trial_id)
    assert paused.report(trial.trial_id, 0, {"val_accuracy": 0.5}) == PAUSE  # the lost worker's late result
    assert paused.ask().trial_id == 1 and paused.paused() == [0] and paused.pending() == [1]


def test_a_paused_trial_is_not_in_flight_and_is_not_put_back():
    """A loss reported for a trial paused at a rung (the promotion rule; no worker holds it) was
    taken: the trial counted as waiting to be re-issued, and once continued, its real loss failed it."""
    search = RandomSearch(NasBench201Space(), seed=0, rungs=Rungs((1, 3)), rung_rule="promotion")
    trial = search.ask()
    assert search.report(trial.trial_id, 0, {"val_accuracy": 0.5}) == PAUSE
    assert search.requeue(trial.trial_id) is False
    assert search.waiting_reissue() == 0 and search.paused() == [0] and search.pending() == []
