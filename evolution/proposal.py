"""The proposal of evolution, in small parts composed one way (PyGlove's `Random(S) >> Top(1) >>
mutator`): draw a tournament sample from the population, take its top member by a `Ranking`, and
mutate it. Regularized and Pareto evolution differ only in the ranking:

- `LikeWithLike`: the objective, compared at the highest rung every member of the sample reached
  (a 200-epoch accuracy always beats a 12-epoch one, whatever the cells).
- `NonDominated`: each member's non-dominated rank within the whole population, ties broken by the
  larger crowding distance (NSGA-II's crowded-comparison order, Deb et al. 2002), with every member
  compared at the highest rung all of the population reached.

Ties go to the member drawn first. The only random numbers are the sample's draws and the
mutation's, in that order (tests/golden pins them).

`LimitTournament` is Pareto evolution's other tournament: each child is aimed at a limit on a cost
goal (drawn at a random quantile of the first population's costs), its parent is the best member
within the limit by the first goal, a child over the limit is drawn again when the cost is known
before training (a size measure), and of `offspring` children the one an additive model of the
evaluated cells predicts best is trained (evolution/surrogate.py).

Pure Python: no TensorFlow, no Ray, no global random state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from evolution.pareto import crowding_distances, non_dominated_ranks, nsga2_order_key
from evolution.records import Trial
from evolution.steps import draw_sample
from evolution.surrogate import features, fit_additive

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
        parent = algorithm.trials[parent_id].genotype
        if algorithm.race is not None and algorithm.race.screen_children > 1:  # evolution/target_race.py
            child, description, others = algorithm.race.screened(algorithm, parent)
            return Trial(trial_id, child, parent_id, description, screened=tuple(others))
        child, description = algorithm.space.mutate(parent, algorithm.rng)
        return Trial(trial_id, child, parent_id, description)


def evaluated(algorithm: "SearchAlgorithm") -> list[int]:
    """The trials that ever joined the population: told `ok`, in the order told, then (with rungs)
    the others with a first rung's result (not told yet, or failed at a later rung: members all the
    same). Never empty while the population is not: under the promotion rule the population fills
    with paused trials before any is told."""
    ok = [t for t, o in algorithm.outcomes.items() if o.status == "ok"]
    told = set(ok)
    return ok + [t for t in algorithm.rung_results if t not in told]


REDRAWS = 10  # mutations drawn for a child over its limit before one over it is taken
SURROGATE_ROWS = 300  # the latest successful trials the additive model is fitted to


@dataclass(frozen=True)
class LimitTournament:
    """Pareto evolution aimed at the best cell under each limit. For each child: a cost goal (one
    of the goals after the first, drawn when there are several) and a limit on it, the goal's value
    at a uniformly drawn quantile of the first `population_size` successful trials (the random
    population: the space's own spread of that cost; with rungs, a first rung's result is a
    success, so the population may fill before any trial is told). The tournament draws
    `sample_size` members within the limit (none: the member best on that goal) and takes the best
    by the first goal, like with like. Each of `offspring` children is drawn again, up to REDRAWS
    times, while a size measure says it is over the limit; with more than one, the child the
    additive model of the successful trials' first goal predicts best is trained (the first among
    equals; the model sees the latest SURROGATE_ROWS of them), among the children not tried before
    when there are any (an identity mutation would otherwise win, predicted as good as its parent)."""

    population_size: int
    sample_size: int
    offspring: int = 1

    def __call__(self, algorithm: "SearchAlgorithm", trial_id: int) -> Trial:
        if len(algorithm.population) < self.population_size:
            return Trial(trial_id, algorithm.space.sample(algorithm.rng), None, "random")
        costs = algorithm.goals[1:]
        goal = costs[algorithm.rng.randrange(len(costs))] if len(costs) > 1 else costs[0]
        cost = lambda member: goal.signed(algorithm.metrics_at(member, 0))  # noqa: E731 - larger is better
        spread = sorted(cost(t) for t in sorted(evaluated(algorithm))[:self.population_size])
        limit = spread[min(len(spread) - 1, int(algorithm.rng.random() * len(spread)))]
        within = [m for m in algorithm.population if cost(m) >= limit] or [max(algorithm.population, key=cost)]
        sample = draw_sample(within, self.sample_size, algorithm.rng)
        parent_id = top(sample, LikeWithLike().keys(algorithm, sample))
        parent = algorithm.trials[parent_id].genotype
        children = [self._child(algorithm, parent, goal, limit) for _ in range(self.offspring)]
        if len(children) > 1:
            tried = {trial.genotype.key() for trial in algorithm.trials.values()}
            children = [c for c in children if c[0].key() not in tried] or children  # the model is for new cells
            scored = evaluated(algorithm)[-SURROGATE_ROWS:]
            predict = fit_additive([features(algorithm.trials[t].genotype) for t in scored],
                                   [algorithm.value_at(t, 0) for t in scored])
            predicted = [predict(features(child)) for child, _ in children]
            children = [children[predicted.index(max(predicted))]]
        child, description = children[0]
        return Trial(trial_id, child, parent_id, description)

    @staticmethod
    def _child(algorithm: "SearchAlgorithm", parent: Any, goal: Any, limit: float) -> tuple[Any, str]:
        for _ in range(REDRAWS):
            child, description = algorithm.space.mutate(parent, algorithm.rng)
            figures = algorithm._figures(child)
            if goal.metric not in figures or goal.signed(figures) >= limit:
                break
        return child, description
