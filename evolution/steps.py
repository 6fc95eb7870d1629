"""The small steps regularized evolution is made of: tournament selection and aging.

Sampling and mutation belong to the search space. Pure Python: no TensorFlow, no Ray, no
global random state.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def draw_sample(population: Sequence[T], sample_size: int, rng: random.Random) -> list[T]:
    """`sample_size` members drawn uniformly WITH replacement (as the paper), in draw order."""
    if not population:
        raise ValueError("tournament: the population is empty")
    n = len(population)
    return [population[rng.randrange(n)] for _ in range(sample_size)]


def fittest(sample: Sequence[T], fitness: Callable[[T], float]) -> T:
    """The fittest member of `sample`; ties go to the one drawn first."""
    best = sample[0]
    best_fitness = fitness(best)
    for member in sample[1:]:
        member_fitness = fitness(member)
        if member_fitness > best_fitness:
            best, best_fitness = member, member_fitness
    return best


def tournament_select(
    population: Sequence[T], sample_size: int, rng: random.Random, fitness: Callable[[T], float]
) -> T:
    """Draw `sample_size` members uniformly WITH replacement (as the paper); return the fittest.

    Ties go to the member drawn first.
    """
    return fittest(draw_sample(population, sample_size, rng), fitness)


def age_out(population: deque[T], size: int) -> list[T]:
    """Remove the OLDEST members until at most `size` remain (never the worst); return them."""
    removed = []
    while len(population) > size:
        removed.append(population.popleft())
    return removed
