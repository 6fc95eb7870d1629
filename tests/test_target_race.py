"""A time-to-target search's race (issue 55, evolution/target_race.py): the stops a candidate is
given from the results so far, their replay over recorded curves, and the screen of children."""

import pytest

from evolution import RegularizedEvolution
from evolution.records import Outcome
from evolution.target_race import TargetRace, kendall_tau, miss_bounds, replay_stops, stop_point
from searchspace.convnet import AIRBENCH94, convnet_space
from tests.conftest import race_metrics

HITS = [[[10, 0.30], [20, 0.50], [30, 0.62]], [[10, 0.35], [20, 0.45], [30, 0.55], [40, 0.63]]]
MISS = [[10, 0.20], [20, 0.30], [30, 0.40], [40, 0.45]]


def outcomes(*results: dict) -> dict:
    return {i: Outcome("ok", metrics) for i, metrics in enumerate(results)}


def test_stops_follow_the_incumbent_and_every_hits_curve():
    race = TargetRace(stop_margin=1.25, miss_slack=0.05, min_hits=2)
    assert race.stops({}) == {}  # nothing known: the candidate gets its whole time
    results = outcomes({"time_to_target_s": 30.0, "target_curve": HITS[0]},
                       {"time_to_target_s": 40.0, "target_curve": HITS[1]},
                       {"time_to_target_s": None, "target_curve": MISS})
    stops = race.stops(results)
    assert stops["stop_after_s"] == 37.5  # the incumbent's 30 s x 1.25
    assert stops["stop_below"] == [0.25, 0.40, 0.50]  # the lower hit at each evaluation less 0.05; 2 hits each
    assert miss_bounds(HITS, 0.0, 1) == [0.30, 0.45, 0.55, 0.63]  # one hit is enough at min_hits 1
    assert stop_point(MISS, stops, 0.6) == (10, "predicted miss")  # 0.20 < 0.25 at its first evaluation
    assert stop_point(HITS[1], {"stop_after_s": 35.0}, 0.6) == (35.0, "past the incumbent")  # its hit is at 40 s
    assert stop_point(HITS[1], {"stop_after_s": 45.0}, 0.6) is None  # it hits first
    assert TargetRace().stops(results) == {}  # both rules off


def test_replayed_over_recorded_curves_the_stops_count_false_stops_and_seconds_saved():
    results = [{"time_to_target_s": 30.0, "target_curve": HITS[0]},
               {"time_to_target_s": 40.0, "target_curve": HITS[1]},
               {"time_to_target_s": None, "target_curve": MISS},
               {"time_to_target_s": 40.0, "target_curve": HITS[1]}]
    rows = replay_stops(results, TargetRace(stop_margin=1.0, miss_slack=0.0, min_hits=1), target=0.6)
    assert [r["stopped"] for r in rows] == [False, True, True, True]
    # a false stop: a hit under the first hit's 0.50 at its second evaluation (0.45)
    assert rows[1]["hit"] and rows[1]["rule"] == "predicted miss" and rows[1]["saved_s"] == 20.0
    past = replay_stops(results, TargetRace(stop_margin=1.0), target=0.6)
    assert past[1]["rule"] == "past the incumbent" and past[1]["saved_s"] == 10.0  # stopped at 30 s of its 40
    assert rows[2]["rule"] == "predicted miss" and rows[2]["saved_s"] == 30.0  # stopped after its first
    assert not replay_stops(results, TargetRace(stop_margin=1.5), target=0.6)[1]["stopped"]


def widths(genotype) -> dict:
    """A size measure: the sum of the stage widths, as `params`."""
    return {"params": sum(stage["width"] for stage in genotype.to_json()["stages"])}


@pytest.mark.parametrize("score", ["params", "surrogate"])
def test_a_screen_trains_the_child_its_score_predicts_fastest_and_journals_the_others(tmp_path, score):
    space = convnet_space(32, ("width",))
    race = TargetRace(screen_children=4, screen_score=score)
    algorithm = RegularizedEvolution(space, population_size=3, sample_size=2, seed=3, objective="seconds_to_target",
                                     mode="min", race=race, initial=[AIRBENCH94] * 3, repeats="reuse",
                                     journal_path=str(tmp_path / "journal.jsonl"), measure=widths)
    for _ in range(12):
        trial = algorithm.ask()
        algorithm.tell(trial.trial_id, race_metrics(trial.genotype.key(), trial.stops))
    screened = [t for t in algorithm.trials.values() if t.screened]
    assert screened and algorithm.screened_out == sum(len(t.screened) for t in screened)
    if score == "params":  # the trained child is the smallest of its draw (among those not tried before)
        for trial in screened:
            assert all(other["score"] >= widths(trial.genotype)["params"] for other in trial.screened)
    journal = (tmp_path / "journal.jsonl").read_text()
    assert '"screened"' in journal and '"score"' in journal
    with pytest.raises(ValueError, match="screen_score: unknown"):
        TargetRace(screen_score="synflow")
    with pytest.raises(ValueError, match="stop_margin: 0 .off. or at least 1"):
        TargetRace(stop_margin=0.9)


def test_kendall_tau_is_scipys_tau_b():
    from scipy.stats import kendalltau

    xs, ys = [1, 2, 2, 3, 5, 4, 7], [2, 1, 3, 3, 6, 5, 4]
    assert kendall_tau(xs, ys) == pytest.approx(kendalltau(xs, ys).statistic)
    assert kendall_tau([1, 1], [1, 2]) != kendall_tau([1, 1], [1, 2])  # NaN: one constant


def test_a_time_to_target_search_hands_its_stops_to_the_trial_and_other_searches_have_none(tmp_path):
    from evolution.tune_searcher import EvolutionSearcher
    from experiments.search.search_config import SearchConfig

    plain = SearchConfig(output_dir=str(tmp_path / "plain"))
    assert plain.race() is None and plain.new_algorithm().config()["race"] is None
    config = SearchConfig(output_dir=str(tmp_path / "race"), proxy_space="convnet", stop_margin=1.2,
                          miss_slack=0.0, screen_children=2,
                          proxy=plain.proxy.__class__(target_accuracy=0.5, target_seconds=40.0, timeout_s=100.0))
    algorithm = config.new_algorithm()
    assert algorithm.config()["race"] == {"stop_margin": 1.2, "miss_slack": 0.0, "min_hits": 3,
                                          "screen_children": 2, "screen_score": "step_ms"}
    first = algorithm.ask()
    algorithm.tell(first.trial_id, race_metrics("hit", target=0.1))
    searcher = EvolutionSearcher(algorithm, budget=2)
    assert searcher.suggest("tune-1")["stops"] == {"stop_after_s": 12.0}  # the hit's 10 s x 1.2


def test_a_reused_result_is_no_second_hit_and_a_bound_stays_under_1():
    """Second reader: one network reused met min_hits by itself; hits at 1.0 made a bound ProxyConfig refuses."""
    from core.proxy_config import ProxyConfig

    one = {"time_to_target_s": 30.0, "target_curve": [[10, 1.0]]}
    results = {0: Outcome("ok", one), 1: Outcome("ok", one, reused_from=0)}
    race = TargetRace(miss_slack=0.0, min_hits=2)
    assert race.stops(results) == {}  # one hit, not two
    results[2] = Outcome("ok", {"time_to_target_s": 20.0, "target_curve": [[10, 1.0]]})
    bounds = race.stops(results)["stop_below"]
    assert bounds == [0.999999]
    ProxyConfig(target_accuracy=0.5, target_seconds=10.0, stop_below=tuple(bounds))  # a trial can take it


def test_a_search_made_before_the_race_resumes_only_with_it_off_and_says_so(tmp_path):
    from dataclasses import replace

    from core.proxy_config import ProxyConfig
    from experiments.search.output_dir import resume_differences
    from experiments.search.search_config import SearchConfig

    proxy = ProxyConfig(target_accuracy=0.5, target_seconds=40.0, timeout_s=100.0)
    off = SearchConfig(output_dir=str(tmp_path), proxy_space="convnet", proxy=proxy, stop_margin=0.0,
                       miss_slack=-1.0, screen_children=1)
    assert off.race() is None and off.new_algorithm().config()["race"] is None  # none acts: no race
    made = off.new_algorithm()
    assert resume_differences(off, made, None) == []
    now = replace(off, stop_margin=1.1)
    said = resume_differences(now, made, None)
    assert any("resume it with --stop_margin=0 --miss_slack=-1 --screen_children=1" in line for line in said)
    assert SearchConfig(output_dir=str(tmp_path), algorithm="random", proxy=proxy, stop_margin=0.0, miss_slack=-1.0,
                        screen_children=4).race() is None  # random search has no parent to screen children of

