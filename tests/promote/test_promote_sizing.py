"""Sizing cells for a promote: the filters that match a baseline's parameters (found in a few
builds, refused when out of reach) and when a promote sizes cells to its first baseline."""

from __future__ import annotations

import os

import pytest


def test_match_filters_at_imagenet_size_starts_at_the_stems_minimum():
    import dataclasses

    import random

    from searchspace import NasNetSpace
    from trainer.models import ModelSpec, count_params, match_filters

    genotype = NasNetSpace(num_blocks=2).sample(random.Random(0))  # small cells: each count a quicker build
    spec = ModelSpec("genotype", num_classes=4, image_size=128, num_cells=1, genotype=genotype)
    target = count_params(dataclasses.replace(spec, filters=12))
    assert match_filters(spec, target) == (12, target)


def test_closest_filters_matches_a_scan_in_a_few_builds():
    """Each count is a network built (2-4 s): the search must find what a scan of every F finds,
    in a handful of calls, on growths like a NASNet's (about F squared, with rounding steps) and
    unlike it (linear, cubic)."""
    from trainer.models import closest_filters

    growths = {"nasnet-like": lambda f: 700 * f * f + 900 * f + 4000 + 37 * (f % 2),
               "linear": lambda f: 5000 * f + 300, "cubic": lambda f: 9 * f ** 3 + 50 * f}
    for name, growth in growths.items():
        for target in [10, 20_000, 269_332, 853_018, 1_727_962, 5_000_000, 40_000_000]:
            calls = []

            def sized(f: int) -> int:
                calls.append(f)
                return growth(f)

            scanned = min(range(2, 1 << 14), key=lambda f: (abs(growth(f) - target), f))
            assert closest_filters(sized, target, 2) == (scanned, growth(scanned)), (name, target)
            assert len(calls) == len(set(calls)) <= 6, (name, target, calls)  # the old bisection: 8 to 24
    with pytest.raises(ValueError, match="no F up to 16384 reaches"):
        closest_filters(lambda f: f, 10**9, 2)


def test_match_filters_refuses_a_size_it_cannot_reach():
    from searchspace.references import REFERENCES
    from trainer.models import ModelSpec, match_filters

    spec = ModelSpec("genotype", num_classes=4, image_size=16, num_cells=1, genotype=REFERENCES["amoebanet_a"])
    with pytest.raises(ValueError, match="more than 10% off the target 10"):
        match_filters(spec, 10)


def test_cells_are_sized_to_the_first_baseline_unless_told_otherwise_or_planned_before(tmp_path):
    from experiments.promote.promote_plan import default_match_params
    from core.storage import write_json

    out = str(tmp_path / "p")
    match, note = default_match_params(out, ("resnet20", "resnet56"), True, False)
    assert match == "resnet20" and "comparing at equal size" in note
    assert default_match_params(out, ("resnet20",), True, True) == (None, None)  # --filters given
    assert default_match_params(out, ("resnet20",), False, False) == (None, None)  # baselines only
    write_json(os.path.join(out, "promote_plan.json"), {"settings": {"match_params": None}, "models": []})
    assert default_match_params(out, ("resnet20",), True, False) == (None, None)  # an older plan resumes as made
