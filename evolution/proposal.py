"""The proposal of evolution, in small parts composed one way (PyGlove's `Random(S) >> Top(1) >>
mutator`): draw a tournament sample from the population, take its top member by a `Ranking`, and
mutate it. Regularized and Pareto evolution differ only in the ranking:

- `LikeWithLike`: the objective, compared at the highest rung every member of the sample reached
  (a 200-epoch accuracy always beats a 12-epoch one, whatever the cells).
- `NonDominated`: each member's non-dominated rank within the whole population, ties broken by the
  larger crowding distance (NSGA-II's crowded-comparison order, Deb et al. 2002), with every member
  compared at the highest rung all of the population reached.

Ties go to the member drawn first. The only random numbers are the sample's draws and the
mutation's, in that order (tests/golden pins them). Pure Python: no TensorFlow, no Ray, no global
random state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from evolution.pareto import crowding_distances, non_dominated_ranks, nsga2_order_key
from evolution.records import Trial
from evolution.steps import draw_sample

if TYPE_CHECKING:  # the algorithm is only passed in: no import at run time
    from evolution.base import SearchAlgorithm


class Ranking(Protocol):
    def keys(self, algorithm: "SearchAlgorithm", sample: Sequence[int]) -> dict[int, Any]:
        """A sort key for each member of `sample` (trial ids): smaller is better."""


class LikeWithLike:
    """The objective (signed larger-better) at the highest rung all of the sample reached."""

    def keys(self, algorithm: "SearchAlgorithm", sample: Sequence[int]) -> dict[int, Any]:
        common = min(algorithm.highest_rung(member) for member in sample)
        return {member: -algorithm.value_at(member, common) for member in sample}


class NonDominated:
    """NSGA-II's order of the whole population over the algorithm's goals."""

    def keys(self, algorithm: "SearchAlgorithm", sample: Sequence[int]) -> dict[int, Any]:
        members = list(algorithm.population)
        common = min(algorithm.highest_rung(member) for member in members)
        points = [tuple(g.signed(algorithm.metrics_at(m, common)) for g in algorithm.goals) for m in members]
        ranks = non_dominated_ranks(points)
        crowding = crowding_distances(points, ranks)
        return {m: nsga2_order_key(ranks[i], crowding[i]) for i, m in enumerate(members)}


def top(sample: Sequence[int], keys: dict[int, Any]) -> int:
    """Top(1): the member with the smallest key; the first drawn among equals."""
    return min(sample, key=keys.__getitem__)


@dataclass(frozen=True)
class Tournament:
    """Random(S) >> Top(1) >> mutate: the child of the best of `sample_size` members drawn with
    replacement; a random genotype until the population holds `population_size` members."""

    population_size: int
    sample_size: int
    ranking: Ranking

    def parent(self, algorithm: "SearchAlgorithm") -> int:
        sample = draw_sample(algorithm.population, self.sample_size, algorithm.rng)
        return top(sample, self.ranking.keys(algorithm, sample))

    def __call__(self, algorithm: "SearchAlgorithm", trial_id: int) -> Trial:
        if len(algorithm.population) < self.population_size:
            return Trial(trial_id, algorithm.space.sample(algorithm.rng), None, "random")
        parent_id = self.parent(algorithm)
        child, description = algorithm.space.mutate(algorithm.trials[parent_id].genotype, algorithm.rng)
        return Trial(trial_id, child, parent_id, description)
