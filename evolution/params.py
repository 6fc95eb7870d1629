"""Each algorithm's own parameters, declared once: a frozen dataclass per algorithm whose fields
carry the default and, in `metadata["help"]`, the text a command-line flag shows. The constructor,
`params()` (what the journal's start event stores), `param_names` and the commands' defaults all
derive from it.

Plain values only: this module must not import TensorFlow or Ray.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from evolution.objectives import Goal, parse_goals


@dataclass(frozen=True)
class NoParams:
    """An algorithm without parameters of its own (random search)."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def pick(cls, values: dict[str, Any]) -> "NoParams":
        """The parameters among `values`, taken out of it; the rest stays."""
        return cls(**{name: values.pop(name) for name in cls.names() if name in values})

    def to_config(self) -> dict[str, Any]:
        """As the journal stores them (tuples as lists)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class EvolutionParams(NoParams):
    """Regularized evolution's P and S (Real et al. 2019 used 100 and 25 for 20,000 trials; these
    defaults suit searches of tens to hundreds of trials)."""

    population_size: int = field(default=10, metadata={
        "help": "P: the successful trials kept in the population; the oldest leaves."})
    sample_size: int = field(default=3, metadata={
        "help": "S: members drawn (with replacement) into each tournament; the fittest is the parent."})
    initial_last: bool = field(default=False, metadata={
        "help": "The initial genotypes close the first population instead of opening it: the oldest leaves "
                "first, so a seed then stands in the tournaments of P children, not of one."})

    def __post_init__(self) -> None:
        if self.population_size < 1:
            raise ValueError(f"population_size: must be at least 1, got {self.population_size}")
        if not 1 <= self.sample_size <= self.population_size:
            raise ValueError(f"sample_size: must be in 1..population_size ({self.population_size}), "
                             f"got {self.sample_size}")


TOURNAMENTS = ("nsga2", "limit")


@dataclass(frozen=True)
class ParetoParams(EvolutionParams):
    """Pareto evolution's P and S, and the goals it searches (the first is the objective)."""

    objectives: tuple[str, ...] = field(default=("val_accuracy:max", "latency_ms:min"), metadata={
        "help": "MEASURE:max|min goals, at least two; the first is the objective rungs and the pick use."})
    tournament: str = field(default="nsga2", metadata={
        "help": "Pareto evolution's tournament: nsga2 (non-dominated rank, then crowding) or limit (each child "
                "aimed at a limit on a cost goal at a random quantile: the best within it is the parent; "
                "evolution/proposal.py).", "choices": TOURNAMENTS})
    offspring: int = field(default=1, metadata={
        "help": "With --tournament=limit: children drawn per proposal; the one an additive model of the "
                "evaluated cells predicts best is trained."})

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "objectives", tuple(self.objectives))
        if len(self.goals) < 2:
            raise ValueError(f"objectives: Pareto evolution needs at least two, got {list(self.objectives)}")
        if self.tournament not in TOURNAMENTS:
            raise ValueError(f"tournament: one of {list(TOURNAMENTS)}, got {self.tournament!r}")
        if self.offspring < 1 or (self.offspring > 1 and self.tournament != "limit"):
            raise ValueError(f"offspring: 1, or more with --tournament=limit; got {self.offspring}")

    @property
    def goals(self) -> tuple[Goal, ...]:
        return parse_goals(list(self.objectives))


def help_of(params: type[NoParams]) -> Mapping[str, str]:
    """Each parameter's help text, by name."""
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(params)}
