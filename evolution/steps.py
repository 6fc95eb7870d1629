"""The small steps regularized evolution is made of: tournament selection and aging.

Sampling and mutation belong to the search space. Pure Python: no TensorFlow, no Ray, no
global random state.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def tournament_select(
    population: Sequence[T], sample_size: int, rng: random.Random, fitness: Callable[[T], float]
) -> T:
    """Draw `sample_size` members uniformly WITH replacement (as the paper); return the fittest.

    Ties go to the member drawn first.
    """
    if not population:
        raise ValueError("tournament_select: the population is empty")
    n = len(population)
    best = population[rng.randrange(n)]
    best_fitness = fitness(best)
    for _ in range(sample_size - 1):
        member = population[rng.randrange(n)]
        member_fitness = fitness(member)
        if member_fitness > best_fitness:
            best, best_fitness = member, member_fitness
    return best


def age_out(population: deque[T], size: int) -> list[T]:
    """Remove the OLDEST members until at most `size` remain (never the worst); return them."""
    removed = []
    while len(population) > size:
        removed.append(population.popleft())
    return removed
