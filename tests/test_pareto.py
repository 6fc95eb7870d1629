"""Pareto tools: dominance, NSGA-II ranks and crowding, hypervolume, checked by hand and by brute force."""

import itertools
import math
import random

import pytest

from evolution.pareto import (
    _ranks_2d,
    _ranks_any,
    crowding_distances,
    dominates,
    front,
    hypervolume,
    non_dominated_ranks,
    nsga2_order_key,
)

INF = math.inf


def peeled_ranks(points):
    """Ranks by the definition: peel off the points no remaining point dominates, again and again."""
    ranks = [None] * len(points)
    remaining = set(range(len(points)))
    rank = 0
    while remaining:
        layer = {i for i in remaining if not any(dominates(points[j], points[i]) for j in remaining)}
        assert layer, "no point is left undominated: dominance is not a strict order"
        for i in layer:
            ranks[i] = rank
        remaining -= layer
        rank += 1
    return ranks


def inclusion_exclusion_volume(points, reference):
    """Hypervolume as the alternating sum of the volumes of all intersections of boxes."""
    boxes = [p for p in points if all(x > r for x, r in zip(p, reference))]
    total = 0.0
    for size in range(1, len(boxes) + 1):
        for subset in itertools.combinations(boxes, size):
            corner = [min(column) for column in zip(*subset)]
            total += (-1) ** (size + 1) * math.prod(c - r for c, r in zip(corner, reference))
    return total


def grid_volume(points, reference, top):
    """Hypervolume of integer points as the number of unit cells [c, c + 1] some box covers."""
    ranges = [range(r, top) for r in reference]
    return sum(any(all(x >= c + 1 for x, c in zip(p, cell)) for p in points)
               for cell in itertools.product(*ranges))


def random_points(rng, n, d, values):
    return [tuple(float(rng.choice(values)) for _ in range(d)) for _ in range(n)]


def test_dominance_needs_no_worse_everywhere_and_better_somewhere():
    assert dominates((2, 1), (1, 1)) and dominates((2, 2), (1, 1))
    assert not dominates((1, 1), (1, 1))  # equal
    assert not dominates((2, 0), (1, 1)) and not dominates((1, 1), (2, 0))  # incomparable
    assert not dominates((1, 1), (2, 1))
    with pytest.raises(ValueError, match="objectives"):
        dominates((1, 2), (1, 2, 3))


def test_ranks_of_three_fronts_with_a_tie():
    points = [(1, 5), (3, 3), (5, 1), (2, 2), (1, 1), (3, 3), (4, 1), (0, 6)]
    # front 0: (1,5) (3,3) (5,1) (3,3) (0,6); front 1: (2,2) (4,1); front 2: (1,1)
    assert non_dominated_ranks(points) == [0, 0, 0, 1, 2, 0, 1, 0]
    assert _ranks_any(points) == [0, 0, 0, 1, 2, 0, 1, 0]
    assert front(points) == [0, 1, 2, 5, 7]


def test_ranks_of_nothing_one_objective_and_three():
    assert non_dominated_ranks([]) == [] and front([]) == []
    assert non_dominated_ranks([(2,), (5,), (2,), (1,)]) == [1, 0, 1, 2]
    assert non_dominated_ranks([(1, 1, 1), (0, 0, 0), (1, 0, 2), (0, 0, 1)]) == [0, 2, 0, 1]
    with pytest.raises(ValueError, match="objectives"):
        non_dominated_ranks([(1, 2), (1, 2, 3)])


@pytest.mark.parametrize("d", [2, 3])
def test_ranks_match_peeling_fronts_on_random_sets_with_ties(d):
    rng = random.Random(d)
    for _ in range(150):
        points = random_points(rng, rng.randrange(0, 25), d, range(5))
        assert non_dominated_ranks(points) == peeled_ranks(points), points


def test_two_objective_path_matches_the_general_sort():
    rng = random.Random(7)
    for values in (range(3), range(20), [rng.random() for _ in range(400)]):
        for _ in range(20):
            points = random_points(rng, rng.randrange(0, 200), 2, values)
            assert _ranks_2d(points) == _ranks_any(points)


def test_crowding_is_computed_within_each_front():
    points = [(0, 10), (1, 6), (4, 3), (10, 0),  # front 0, ranges 10 and 10
              (0, 5), (1, 1), (3, 0),  # front 1, ranges 3 and 5
              (0, 0), (-1, -2), (-2, -1)]  # fronts 2 (one point) and 3 (two)
    ranks = non_dominated_ranks(points)
    assert ranks == [0, 0, 0, 0, 1, 1, 1, 2, 3, 3]
    # (1,6): (4-0)/10 + (10-3)/10; (4,3): (10-1)/10 + (6-0)/10; (1,1): (3-0)/3 + (5-0)/5
    assert crowding_distances(points, ranks) == pytest.approx(
        [INF, 1.1, 1.5, INF, INF, 2.0, INF, INF, INF, INF])


def test_a_constant_objective_adds_no_crowding():
    points = [(0, 2, 5), (1, 1, 5), (2, 0, 5)]
    assert crowding_distances(points, [0, 0, 0]) == [INF, 2.0, INF]
    assert crowding_distances([(1, 1)] * 3, [0, 0, 0]) == [0.0, 0.0, 0.0]
    assert crowding_distances([(1, 1)] * 2, [0, 0]) == [INF, INF]  # a front of two: ends regardless
    assert crowding_distances([], []) == []
    with pytest.raises(ValueError, match="ranks"):
        crowding_distances([(1, 1)], [0, 0])


def test_crowded_order_puts_low_ranks_then_wide_spacing_first():
    members = [(1, INF), (0, 0.5), (2, 9.0), (0, INF), (1, 0.1), (0, 2.0)]
    ordered = sorted(members, key=lambda m: nsga2_order_key(*m))
    assert ordered == [(0, INF), (0, 2.0), (0, 0.5), (1, INF), (1, 0.1), (2, 9.0)]


def test_two_objective_hypervolume_of_a_staircase():
    assert hypervolume([(1, 3), (2, 2), (3, 1)], (0, 0)) == 3 + 2 + 1
    # a dominated point, one on the reference's edge and one below it add nothing
    assert hypervolume([(3, 1), (1, 1), (2, 2), (5, 0), (1, 3), (-1, 9)], (0, 0)) == 6
    assert hypervolume([(2, 4), (3, 3), (4, 2)], (1, 1)) == 6
    assert hypervolume([(0.5, 2.5)], (-1, 0.5)) == pytest.approx(1.5 * 2.0)


def test_three_objective_hypervolume_of_two_overlapping_boxes():
    # 2*3*4 + 4*2*1 - the shared box 2*2*1
    assert hypervolume([(2, 3, 4), (4, 2, 1)], (0, 0, 0)) == 24 + 8 - 4
    assert hypervolume([(3, 4, 5), (5, 3, 2)], (1, 1, 1)) == 28


def test_hypervolume_of_nothing_and_of_one_objective():
    assert hypervolume([], (0, 0)) == 0.0
    assert hypervolume([(0, 0), (1, -1)], (0, 0)) == 0.0
    assert hypervolume([(3,), (5,), (0,)], (1,)) == 4
    with pytest.raises(ValueError, match="objectives"):
        hypervolume([(1, 2, 3)], (0, 0))


@pytest.mark.parametrize("d", [2, 3, 4])
def test_hypervolume_matches_inclusion_exclusion(d):
    rng = random.Random(10 + d)
    for _ in range(60):
        points = [tuple(rng.uniform(-0.2, 1) for _ in range(d)) for _ in range(rng.randrange(1, 7))]
        if rng.random() < 0.3:
            points.append(points[0])  # a duplicate
        assert hypervolume(points, (0.0,) * d) == pytest.approx(inclusion_exclusion_volume(points, (0.0,) * d))


@pytest.mark.parametrize("d", [2, 3])
def test_hypervolume_of_integer_points_matches_a_grid_count(d):
    rng = random.Random(20 + d)
    reference = (-1,) * d
    for _ in range(40):
        points = [tuple(rng.randrange(-2, 5) for _ in range(d)) for _ in range(rng.randrange(0, 12))]
        assert hypervolume(points, reference) == grid_volume(points, reference, 5)
