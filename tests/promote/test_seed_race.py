"""The race at each net's own pace (issue 55, experiments/promote/seed_race.py): steps to the target at
each seed times the step timed interleaved, the pick against each baseline with an interval."""

import math

import pandas as pd
import pytest

from experiments.promote.seed_race import SEED_RUN, ratio_interval, seed_race_sentences, seed_steps


def history(*steps_top1: tuple[int, float]) -> list[dict]:
    return [{"step": s, "top1": a, "wall_seconds": float(s)} for s, a in steps_top1]


TABLE = pd.DataFrame([
    {"name": "s-trial1", "kind": "searched", "status": "ok", "search_rank": 1, "top1": 0.9, "val_top1": 0.9},
    {"name": "airbench94", "kind": "baseline", "status": "ok", "top1": 0.91, "val_top1": 0.91},
    {"name": "s-trial1-seed1", "kind": SEED_RUN, "status": "ok", "top1": 0.9, "val_top1": 0.9},
    {"name": "s-trial1-seed2", "kind": SEED_RUN, "status": "ok", "top1": 0.9, "val_top1": 0.9},
    {"name": "airbench94-seed1", "kind": SEED_RUN, "status": "ok", "top1": 0.9, "val_top1": 0.9},
    {"name": "airbench94-seed2", "kind": SEED_RUN, "status": "ok", "top1": 0.9, "val_top1": 0.9}])
HISTORIES = {"s-trial1": history((10, 0.5), (20, 0.9)), "s-trial1-seed1": history((10, 0.9)),
             "s-trial1-seed2": history((10, 0.5), (20, 0.9)), "airbench94": history((10, 0.5), (20, 0.9)),
             "airbench94-seed1": history((10, 0.5), (20, 0.9)), "airbench94-seed2": history((10, 0.5), (20, 0.88))}


def test_each_contender_has_its_steps_to_the_target_at_each_seed():
    assert seed_steps(TABLE, HISTORIES, 0.9) == {"s-trial1": [20, 10, 20], "airbench94": [20, 20, None]}
    assert seed_steps(TABLE, HISTORIES, 0.85)["airbench94"] == [20, 20, 20]


def test_the_pick_against_a_baseline_at_their_own_pace_with_an_interval_over_seeds_and_rounds():
    steps = {"s-trial1": [20, 10, 20], "airbench94": [20, 20, 20]}
    seconds = {"s-trial1": [0.8, 0.9, 0.85], "airbench94": [1.0, 1.2, 1.0]}
    ratio, low, high = ratio_interval(steps["s-trial1"], seconds["s-trial1"], steps["airbench94"],
                                      seconds["airbench94"])
    assert ratio == pytest.approx((50 / 3 * 0.85) / (20 * 1.0))
    assert low < ratio < high
    assert ratio_interval([20, 20, 20], [1.0, 1.0], [20, 20, 20], [1.0, 1.0]) == (1.0, 1.0, 1.0)
    two = ratio_interval([20, 10], [0.8, 0.9], [20, 20], [1.0, 1.2])  # 1 degree of freedom: wide
    assert two[2] / two[1] > (high / low) ** 2
    assert math.isnan(ratio_interval([20], [0.8, 0.9], [20], [1.0, 1.2])[1])  # one seed: no interval
    said = " ".join(seed_race_sentences(TABLE, HISTORIES, seconds, 0.85))
    assert "takes 0.71x the time of airbench94 [95% interval" in said and "3 seeds" in said and "3 rounds" in said
    missed = " ".join(seed_race_sentences(TABLE, HISTORIES, seconds, 0.9))
    assert "airbench94 did not reach it at every seed (steps [20, 20, None])" in missed
    assert seed_race_sentences(TABLE[TABLE.kind != SEED_RUN], HISTORIES, seconds, 0.9) == []  # no seed runs
