"""The search algorithms, and `ALGORITHMS`, the table of them by name.

Each is the shared bookkeeping (evolution/base.py, with rungs in evolution/fidelity.py), its own
parameters declared once (evolution/params.py) and a proposal (evolution/proposal.py):
- `RegularizedEvolution` (Real et al. 2019): Random(S) >> Top(1) >> mutate over an aging
  population, ranked by the objective, like with like across rungs.
- `ParetoEvolution`: the same proposal ranked by non-dominated rank and crowding distance over
  several goals (NSGA-II's order) instead of one score.
- `RandomSearch`: the paper's control.

The names other code imports from here (`Trial`, `Outcome`, `as_json`, `genotype_of`,
`SearchAlgorithm`) are re-exported; `resume` lives in evolution/replay.py. Pure Python: this module
must not import TensorFlow or Ray.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Mapping

from evolution.base import JOURNAL_VERSION, MAX_REJECTIONS, SearchAlgorithm
from evolution.objectives import Goal
from evolution.params import EvolutionParams, NoParams, ParetoParams
from evolution.proposal import LikeWithLike, LimitTournament, NonDominated, Ranking, Tournament
from evolution.records import Measure, Outcome, Trial, as_json, genotype_of
from evolution.steps import age_out
from searchspace import SearchSpace

__all__ = ["ALGORITHMS", "JOURNAL_VERSION", "MAX_REJECTIONS", "Measure", "Outcome", "ParetoEvolution",
           "RandomSearch", "RegularizedEvolution", "SearchAlgorithm", "Trial", "as_json", "genotype_of",
           "make_algorithm"]


class RegularizedEvolution(SearchAlgorithm):
    """Algorithm 1 of Real et al. 2019, asynchronous.

    Until the population holds `population_size` successful trials, `ask` samples at random.
    Afterwards it draws `sample_size` members with replacement, takes the fittest as parent and
    mutates it once. The population is the most recent successful trials; the oldest leaves.
    """

    name = "regularized_evolution"
    Params = EvolutionParams
    ranking: Ranking = LikeWithLike()

    def __init__(self, space: SearchSpace, **kwargs: Any) -> None:
        self.population: deque[int] = deque()
        super().__init__(space, **kwargs)
        self.proposal = Tournament(self.settings.population_size, self.settings.sample_size, self.ranking)

    def _propose(self, trial_id: int) -> Trial:
        return self.proposal(self, trial_id)

    def _accept(self, trial_id: int) -> None:
        self.population.append(trial_id)
        age_out(self.population, self.settings.population_size)


class ParetoEvolution(RegularizedEvolution):
    """Regularized evolution over several goals (`objectives`, e.g. val_accuracy:max,latency_ms:min):
    the same aging population, sample with replacement and one mutation per child, but the
    tournament's winner is the member of the sample with the lowest non-dominated rank within the
    population, ties broken by the larger crowding distance (NSGA-II's crowded-comparison order,
    Deb et al. 2002), then by draw order. Each member is judged against the whole population, not
    by a score of its own (`tournament` "nsga2"; "limit" aims each child at a limit on a cost goal
    instead: evolution/proposal.py LimitTournament). With rungs, the population is compared at the
    highest rung all of it reached, and the rung rule and the pick go by the first goal (the one
    training changes; costs are the cell's). `best()` is the best by the first goal; `front()` the cells no other beats on
    every goal."""

    name = "pareto_evolution"
    Params = ParetoParams
    ranking = NonDominated()

    def __init__(self, space: SearchSpace, **kwargs: Any) -> None:
        goals = ParetoParams(**{k: kwargs[k] for k in ParetoParams.names() if k in kwargs}).goals
        if kwargs.get("reward"):
            raise ValueError("pareto_evolution: a reward is for one objective; give --objectives only")
        kwargs.update(objective=goals[0].metric, mode=goals[0].mode)
        super().__init__(space, **kwargs)
        if self.settings.tournament == "limit":
            self.proposal = LimitTournament(self.settings.population_size, self.settings.sample_size,
                                            self.settings.offspring)

    @property
    def goals(self) -> tuple[Goal, ...]:
        return self.settings.goals


class RandomSearch(SearchAlgorithm):
    """Uniform random sampling: the paper's control."""

    name = "random"
    Params = NoParams

    def _propose(self, trial_id: int) -> Trial:
        return Trial(trial_id, self.space.sample(self.rng), None, "random")


ALGORITHMS: dict[str, type[SearchAlgorithm]] = {
    RegularizedEvolution.name: RegularizedEvolution,
    RandomSearch.name: RandomSearch,
    ParetoEvolution.name: ParetoEvolution,
}


def make_algorithm(name: str, space: SearchSpace, params: Mapping[str, Any] | None = None,
                   **kwargs: Any) -> SearchAlgorithm:
    """The algorithm `name`, given those of `params` it takes (P and S mean nothing to random)."""
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm: unknown {name!r}; known: {sorted(ALGORITHMS)}")
    cls = ALGORITHMS[name]
    return cls(space, **{k: v for k, v in (params or {}).items() if k in cls.param_names}, **kwargs)
