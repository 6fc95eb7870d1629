"""Pareto tools for multi-objective search: dominance, NSGA-II ranks and crowding, hypervolume.

Every point is a sequence of floats where LARGER IS BETTER in every component; callers negate
the objectives they minimize. Pure Python, standard library only: this module must not import
numpy, TensorFlow or Ray.
"""

from __future__ import annotations

import math
from typing import Sequence

Point = Sequence[float]


def _dimension(points: Sequence[Point]) -> int:
    """The common length of `points` (0 when there are none); a ValueError if they differ."""
    if not points:
        return 0
    d = len(points[0])
    for p in points:
        if len(p) != d:
            raise ValueError(f"pareto: points of {d} and {len(p)} objectives mixed")
    return d


def dominates(a: Point, b: Point) -> bool:
    """Whether `a` is >= `b` in every component and > in at least one."""
    if len(a) != len(b):
        raise ValueError(f"pareto: points of {len(a)} and {len(b)} objectives compared")
    strictly = False
    for x, y in zip(a, b):
        if x < y:
            return False
        if x > y:
            strictly = True
    return strictly


def _ranks_any(points: Sequence[Point]) -> list[int]:
    """Fast non-dominated sort (Deb et al. 2002) for any number of objectives: O(M N^2)."""
    n = len(points)
    dominated_by: list[list[int]] = [[] for _ in range(n)]  # i -> those i dominates
    count = [0] * n  # i -> how many dominate i
    for i in range(n):
        a = points[i]
        for j in range(i + 1, n):
            b = points[j]
            a_better = b_better = False
            for x, y in zip(a, b):
                if x > y:
                    a_better = True
                elif x < y:
                    b_better = True
            if a_better and not b_better:
                dominated_by[i].append(j)
                count[j] += 1
            elif b_better and not a_better:
                dominated_by[j].append(i)
                count[i] += 1
    ranks = [0] * n
    current = [i for i in range(n) if count[i] == 0]
    rank = 0
    while current:
        following = []
        for i in current:
            ranks[i] = rank
            for j in dominated_by[i]:
                count[j] -= 1
                if count[j] == 0:
                    following.append(j)
        current = following
        rank += 1
    return ranks


def _ranks_2d(points: Sequence[Point]) -> list[int]:
    """The same ranks as `_ranks_any` for 2 objectives, in O(N log N).

    Visited best-first by (f0, f1), each front's members have f1 non-decreasing, so front k
    dominates a point iff its latest member has f1 >= the point's and is not equal to it; that
    holds for the fronts below the point's rank and for none above, so a binary search finds it.
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]), reverse=True)
    ranks = [0] * len(points)
    latest: list[tuple[float, float]] = []  # front k -> its latest member
    for i in order:
        p = (points[i][0], points[i][1])
        lo, hi = 0, len(latest)
        while lo < hi:
            mid = (lo + hi) // 2
            q = latest[mid]
            if q[1] >= p[1] and q != p:
                lo = mid + 1
            else:
                hi = mid
        if lo == len(latest):
            latest.append(p)
        else:
            latest[lo] = p
        ranks[i] = lo
    return ranks


def non_dominated_ranks(points: Sequence[Point]) -> list[int]:
    """NSGA-II front of each point: 0 for the non-dominated ones, 1 once those are removed, ...

    Equal points get the same rank.
    """
    if _dimension(points) == 2:
        return _ranks_2d(points)
    return _ranks_any(points)


def crowding_distances(points: Sequence[Point], ranks: Sequence[int]) -> list[float]:
    """NSGA-II crowding distance of each point within its rank's front.

    Per objective the front is sorted by it; the two ends get infinity and each interior member
    adds (next - previous) / (max - min). An objective constant over the front adds nothing (its
    ends get no infinity either). Every member of a front of 1 or 2 gets infinity.
    """
    if len(ranks) != len(points):
        raise ValueError(f"pareto: {len(points)} points but {len(ranks)} ranks")
    d = _dimension(points)
    fronts: dict[int, list[int]] = {}
    for i, rank in enumerate(ranks):
        fronts.setdefault(rank, []).append(i)
    distances = [0.0] * len(points)
    for members in fronts.values():
        if len(members) <= 2:
            for i in members:
                distances[i] = math.inf
            continue
        for m in range(d):
            ordered = sorted(members, key=lambda i: points[i][m])
            lo, hi = points[ordered[0]][m], points[ordered[-1]][m]
            if hi == lo:
                continue
            distances[ordered[0]] = distances[ordered[-1]] = math.inf
            for k in range(1, len(ordered) - 1):
                i = ordered[k]
                distances[i] += (points[ordered[k + 1]][m] - points[ordered[k - 1]][m]) / (hi - lo)
    return distances


def nsga2_order_key(rank: int, crowding: float) -> tuple[int, float]:
    """Sort key for the crowded-comparison order: lower rank first, then larger crowding."""
    return (rank, -crowding)


def front(points: Sequence[Point]) -> list[int]:
    """Indices of the non-dominated points (rank 0), in input order."""
    return [i for i, rank in enumerate(non_dominated_ranks(points)) if rank == 0]


def _volume(boxes: list[tuple[float, ...]]) -> float:
    """Measure of the union of the boxes [0, b] (all b > 0, one length d >= 1)."""
    d = len(boxes[0])
    if d == 1:
        return max(b[0] for b in boxes)
    if d == 2:
        area, top = 0.0, 0.0
        for x, y in sorted(boxes, reverse=True):  # x falling: each taller box adds a strip
            if y > top:
                area += x * (y - top)
                top = y
        return area
    # slice by the last objective: between consecutive heights, the boxes above cover a (d-1)-box union
    ordered = sorted(boxes, key=lambda b: b[-1], reverse=True)
    volume = 0.0
    for k, b in enumerate(ordered):
        below = ordered[k + 1][-1] if k + 1 < len(ordered) else 0.0
        if b[-1] > below:
            volume += _volume([c[:-1] for c in ordered[: k + 1]]) * (b[-1] - below)
    return volume


def hypervolume(points: Sequence[Point], reference: Point) -> float:
    """Exact measure of the union of the boxes [reference, p] over the points p.

    Points not strictly above `reference` in every component add nothing.
    """
    d = len(reference)
    if d == 0:
        raise ValueError("pareto: a hypervolume needs at least one objective")
    if points and _dimension(points) != d:
        raise ValueError(f"pareto: points of {len(points[0])} objectives, reference of {d}")
    boxes = [tuple(float(x) - float(r) for x, r in zip(p, reference)) for p in points
             if all(x > r for x, r in zip(p, reference))]
    return _volume(boxes) if boxes else 0.0
