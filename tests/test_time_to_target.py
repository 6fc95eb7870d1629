"""Time to target accuracy in a search (--target_accuracy, --target_seconds): what a candidate's clock
counts and how hits and misses rank. The proxy loop's evaluations run on a fake clock here; the
training itself is tests/test_trainer.py's."""

from dataclasses import replace

import pytest

from core.proxy_config import ProxyConfig
from trainer import candidate_loop
from trainer.candidate_loop import ProxyTraining

T = 10.0  # target_seconds
PROXY = ProxyConfig(target_accuracy=0.7, target_seconds=T)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def race(monkeypatch, step_s: float, eval_s: float, accuracies: list[float], proxy: ProxyConfig = PROXY,
         trace_s: float = 0.0, wait_s: float = 0.0, eval_trace_s: float | None = None) -> dict:
    """A candidate evaluated after each step (the k-th evaluation scoring accuracies[k]), each step
    `step_s` and each evaluation `eval_s` long (the first of each `trace_s` longer; the first
    evaluation `eval_trace_s` longer when given), each step after a
    wait of `wait_s` on its input (the wall clock's, not the step's), until the loop stops it: its
    target metrics."""
    clock = Clock()
    monkeypatch.setattr(candidate_loop, "time", clock)
    run = ProxyTraining.__new__(ProxyTraining)  # the loop's state without a network
    run.proxy, run.eval_steps, run.t_train, run.eval_times = proxy, 1, 0.0, []
    run.curve, run.reached_s, run.last_evaluation, run.evaluated_steps, run.stop_reason = [], None, None, -1, ""
    run.first_step_seconds, run.step_seconds, run.sorted_steps = step_s + trace_s, [], []
    scores = iter(accuracies)

    def evaluate() -> dict:
        took = eval_s + ((trace_s if eval_trace_s is None else eval_trace_s) if not run.eval_times else 0.0)
        clock.now += took
        return {"val_accuracy": next(scores), "val_loss": 1.0, "latency_ms_batch": 1.0, "eval_seconds": took}

    run.evaluate = evaluate
    for step in range(1, len(accuracies) + 1):
        clock.now += wait_s + step_s + (trace_s if step == 1 else 0.0)
        if step > 1:
            run.step_seconds.append(step_s)
        if run._target_check(step):
            break
    return run.target_metrics()


def test_every_hit_ranks_ahead_of_every_miss_a_hit_after_the_time_included(monkeypatch):
    in_time = race(monkeypatch, 3.0, 0.0, [0.5, 0.6, 0.71])  # reached at 9 s
    late = race(monkeypatch, 3.0, 0.0, [0.5, 0.6, 0.65, 0.71])  # reached at 12 s, past the 10 s it had
    near_miss = race(monkeypatch, 3.0, 0.0, [0.5, 0.6, 0.65, 0.699])  # lacked 0.001
    far_miss = race(monkeypatch, 3.0, 0.0, [0.5, 0.5, 0.5, 0.5])
    assert in_time["time_to_target_s"] == 9.0 and in_time["seconds_to_target"] == 9.0
    assert late["time_to_target_s"] is None and late["best_val_accuracy"] == 0.71  # not within the time: a miss
    assert near_miss["seconds_to_target"] == pytest.approx(T * 1.001)
    scores = [r["seconds_to_target"] for r in (in_time, late, near_miss, far_miss)]
    assert scores == sorted(scores) and scores[0] < T <= scores[1] < scores[2] < scores[3]


def test_the_time_to_target_counts_the_evaluations_as_promote_does(monkeypatch):
    hit = race(monkeypatch, 2.0, 1.0, [0.5, 0.6, 0.71])  # 3 steps of 2 s, 3 evaluations of 1 s
    assert hit["time_to_target_s"] == 9.0 and hit["seconds_to_target"] == 9.0
    # an evaluation that ends past the time is too late, though it began within it
    late = race(monkeypatch, 2.0, 1.5, [0.5, 0.6, 0.71])  # 10.5 s at the end of the third
    assert late["time_to_target_s"] is None and late["seconds_to_target"] == T
    assert late["evaluations"] == 3  # stopped there: nothing after the time can be a hit


def test_the_clock_starts_once_the_training_pipeline_is_built_as_promotes_does(monkeypatch):
    from types import SimpleNamespace

    clock = Clock()
    monkeypatch.setattr(candidate_loop, "time", clock)

    def built_in_5_s(*args, **kwargs) -> list:
        clock.now += 5.0
        return []

    monkeypatch.setattr(candidate_loop, "train_pipeline", built_in_5_s)
    run = ProxyTraining.__new__(ProxyTraining)  # the loop's state without a network
    run.proxy, run.ends, run.total_steps, run.timed, run.stopped, run.recipe = PROXY, [1], None, False, False, None
    run.steps_per_epoch, run.data = 4, SimpleNamespace(x_train=[], y_train=[])
    run.schedule = SimpleNamespace(steps=SimpleNamespace(assign=lambda value: None))
    run.optimizer = SimpleNamespace(iterations=SimpleNamespace(assign=lambda value: None))
    run.progress = SimpleNamespace(update=lambda *args, **kwargs: None)

    def an_epoch_of_2_s(train_ds, epoch: int, rung_steps: int, deadline: float) -> tuple[float, int]:
        clock.now += 2.0
        return 0.5, 4

    run._train_epoch = an_epoch_of_2_s
    assert run.train_rung(0, 0) == (4, 0.5, 2.0) and run.t_train == 5.0
    assert run._seconds_with_evaluations() == 2.0


def test_the_steady_clock_counts_steps_and_evaluations_at_their_median_leaving_out_the_traces(monkeypatch):
    wall, steady = (ProxyConfig(target_accuracy=0.7, target_seconds=30, target_clock=clock)
                    for clock in ("training_and_evaluations", "steady"))
    # 3 steps of 2 s and 3 evaluations of 1 s, the first step and the first evaluation 5 s longer
    assert race(monkeypatch, 2.0, 1.0, [0.5, 0.6, 0.71], wall, trace_s=5.0)["time_to_target_s"] == 19.0
    assert race(monkeypatch, 2.0, 1.0, [0.5, 0.6, 0.71], steady, trace_s=5.0)["time_to_target_s"] == 9.0
    # a net whose steps cost less ranks first on the steady clock, whatever its trace cost
    slower = race(monkeypatch, 2.5, 1.0, [0.5, 0.6, 0.71], steady)
    assert slower["seconds_to_target"] == 10.5 > 9.0
    with pytest.raises(ValueError, match="target_clock: 'training_only' is not one of"):
        ProxyConfig(target_accuracy=0.7, target_seconds=60, target_clock="training_only")


@pytest.mark.parametrize("accuracies", [[0.5, 0.6, 0.71], [0.5, 0.55, 0.58, 0.69], [0.62, 0.5, 0.71],
                                        [0.5, 0.6, 0.65, 0.71]])
def test_a_trials_curve_scores_a_lower_target_as_a_search_at_that_target_would(monkeypatch, accuracies):
    from dataclasses import replace

    searched = race(monkeypatch, 3.0, 0.5, accuracies)
    evaluated = len(searched["target_curve"])  # each evaluation's end, its steps and evaluations counted
    assert searched["target_curve"] == [[3.5 * k, a] for k, a in enumerate(accuracies[:evaluated], 1)]
    lower = replace(PROXY, target_accuracy=0.6)
    again = lower.seconds_to_target_on(searched["target_curve"])
    at_lower = race(monkeypatch, 3.0, 0.5, accuracies, proxy=lower)
    assert again["seconds_to_target"] == at_lower["seconds_to_target"]
    assert again["time_to_target_s"] == at_lower["time_to_target_s"]
    with pytest.raises(ValueError, match="target_curve: no evaluation"):
        lower.seconds_to_target_on([])


def test_on_the_steady_clock_a_candidate_stops_on_the_steady_clock_not_the_wall(monkeypatch):
    """Issue 52: with --target_clock=steady the limit was on the wall clock while a hit was judged on
    the steady one: a net that waited on its input between steps was stopped by the wall clock
    before its steady hit, and scored a miss."""
    steady = ProxyConfig(target_accuracy=0.7, target_seconds=12, target_clock="steady")
    # steps of 2 s after waits of 2 s, evaluations of 0.5 s: 2.5 s a step on the steady clock, 4.5 s on
    # the wall; the fourth evaluation (0.71) ends at 10 s steady, 18 s wall
    hit = race(monkeypatch, 2.0, 0.5, [0.5, 0.6, 0.65, 0.71], steady, wait_s=2.0)
    assert hit["time_to_target_s"] == 10.0 and hit["evaluations"] == 4  # not cut off at 13 s of wall time
    # its budget is spent on the steady clock: a net that never gets there stops at 12 s steady
    miss = race(monkeypatch, 2.0, 0.5, [0.5] * 10, steady, wait_s=2.0)
    assert miss["time_to_target_s"] is None and miss["evaluations"] == 5  # 12.5 s steady, 22.5 s wall
    assert miss["target_curve"][-2][0] < 12 <= miss["target_curve"][-1][0]
    # the first step's trace does not spend it: the steady clock is not judged before a steady step
    # (evaluation shares the batch-1 latency's inference trace: its first call is not traced)
    traced = race(monkeypatch, 2.0, 0.5, [0.5, 0.6, 0.65, 0.71], steady, trace_s=20.0, eval_trace_s=0.0)
    assert traced["time_to_target_s"] == 10.0
    wall = replace(steady, target_clock="training_and_evaluations")  # the wall clock: its own limit, as before
    assert race(monkeypatch, 2.0, 0.5, [0.5, 0.6, 0.65, 0.71], wall, wait_s=2.0)["evaluations"] == 3


def test_the_calibrations_run_is_evaluated_as_a_candidate_is_and_never_stops(monkeypatch):
    """Issue 52: the calibration's run, timed on the candidates' clock with their evaluations: it
    evaluates every epochs_per_eval, records its curve, and trains to the end (no target, no limit)."""
    calibration = ProxyConfig(calibration=True)
    ran = race(monkeypatch, 2.0, 0.5, [0.5, 0.8, 0.99, 0.9], calibration)
    assert ran["target_curve"] == [[2.5, 0.5], [5.0, 0.8], [7.5, 0.99], [10.0, 0.9]]
    assert "seconds_to_target" not in ran and ran["best_val_accuracy"] == 0.99
    steady = race(monkeypatch, 2.0, 0.5, [0.5, 0.8], replace(calibration, target_clock="steady"), wait_s=3.0)
    assert steady["target_curve"] == [[2.5, 0.5], [5.0, 0.8]]  # the steady clock's, as its candidates'
    for wrong in ({"target_accuracy": 0.5, "target_seconds": 10.0}, {"train_seconds": 5.0}):
        with pytest.raises(ValueError, match="calibration: trains the --epochs schedule to its end"):
            ProxyConfig(calibration=True, **wrong)


def test_the_searchs_stops_end_a_candidate_early_as_a_miss_and_say_why(monkeypatch):
    """Issue 55: past the incumbent's time x the margin (stop_after_s) a candidate cannot win; under
    its curve bound (stop_below) it is predicted to miss. Either stops it, scored by the accuracy it
    lacks, as at its time limit; a hit before either is a hit."""
    past = race(monkeypatch, 3.0, 0.0, [0.5, 0.6, 0.65, 0.71], replace(PROXY, stop_after_s=6.0))
    assert past["stop_reason"] == "past the incumbent" and past["evaluations"] == 2
    assert past["seconds_to_target"] == pytest.approx(T * 1.1)  # lacked 0.1 at its best, 0.6
    below = race(monkeypatch, 3.0, 0.0, [0.5, 0.52, 0.71], replace(PROXY, stop_below=(0.4, 0.55)))
    assert below["stop_reason"] == "predicted miss" and below["evaluations"] == 2
    assert below["seconds_to_target"] == pytest.approx(T * 1.18)
    hit = race(monkeypatch, 3.0, 0.0, [0.5, 0.71], replace(PROXY, stop_after_s=7.0, stop_below=(0.4, 0.55)))
    assert hit["stop_reason"] == "target" and hit["time_to_target_s"] == 6.0
    assert race(monkeypatch, 3.0, 0.0, [0.5] * 5)["stop_reason"] == "time limit"
    late = race(monkeypatch, 3.0, 0.0, [0.5, 0.71], replace(PROXY, stop_after_s=5.0))  # its hit ends at 6 s
    assert late["time_to_target_s"] is None and late["seconds_to_target"] == T  # past the stop: no hit, lacks 0
    for wrong in ({"stop_after_s": 5.0}, {"stop_below": (0.5,)}):
        with pytest.raises(ValueError, match="only with it"):
            ProxyConfig(**wrong)
