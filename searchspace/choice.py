"""A space of named discrete choices, for searching anything: a model's settings, a training recipe.

    >>> space = ChoiceSpace({"depth": [2, 4, 8], "width": [16, 32, 64], "act": ["relu", "gelu"]})
    >>> genotype = space.sample(random.Random(0))
    >>> child, description = space.mutate(genotype, random.Random(1))
    >>> sum(child[name] != genotype[name] for name in space.choices)  # one mutation per child
    1

A genotype is a frozen mapping of choice name to value (`genotype.values`, or `genotype["depth"]`);
its JSON is that mapping, so a journal resumes it. Values are JSON scalars (str, int, float, bool,
None), compared as JSON (1, 1.0 and True are three values).

Pure Python: this module must not import TensorFlow or Ray, nor use a global random state.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Protocol, Sequence

from searchspace.mutations import check_mutations, draw, mutations_config

SCALARS = (str, int, float, bool, type(None))


def _as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class ChoiceGenotype:
    """One value per choice, frozen; `key()` is canonical (the same values give the same key)."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", MappingProxyType(dict(values)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a ChoiceGenotype is frozen")

    def __reduce__(self) -> tuple:  # pickle, copy and Ray rebuild it from its values
        return ChoiceGenotype, (dict(self._values),)

    @property
    def values(self) -> Mapping[str, Any]:
        """The choices' values, read-only, in the space's order."""
        return self._values

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def key(self) -> str:
        return json.dumps(dict(self._values), sort_keys=True, separators=(",", ":"))

    def to_json(self) -> dict[str, Any]:
        return dict(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChoiceGenotype) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __str__(self) -> str:
        return ", ".join(f"{name}={value}" for name, value in self._values.items())

    def __repr__(self) -> str:
        return f"ChoiceGenotype({dict(self._values)!r})"


class ChoiceMutation(Protocol):
    """A change to the choice `name` of a genotype: `apply` returns its new value (one of the
    choice's values, not the old one) and what changed (shown after "<name>: ")."""

    def apply(self, space: "ChoiceSpace", parent: ChoiceGenotype, name: str,
              rng: random.Random) -> tuple[Any, str]: ...


class ValueMutation:
    """The choice takes another of its values, uniformly."""

    def apply(self, space: "ChoiceSpace", parent: ChoiceGenotype, name: str,
              rng: random.Random) -> tuple[Any, str]:
        old = parent[name]
        new = rng.choice([v for v in space.choices[name] if _as_json(v) != _as_json(old)])
        return new, f"{old} -> {new}"


class NeighbourMutation:
    """A value next to the old one in the choice's list, either way: a step along an ordered choice."""

    def apply(self, space: "ChoiceSpace", parent: ChoiceGenotype, name: str,
              rng: random.Random) -> tuple[Any, str]:
        values = space.choices[name]
        old = parent[name]
        i = [_as_json(v) for v in values].index(_as_json(old))
        new = values[rng.choice([j for j in (i - 1, i + 1) if 0 <= j < len(values)])]
        return new, f"{old} -> {new}"


# One entry per mutation of a choice; a space draws from those its `mutations` names.
CHOICE_MUTATIONS: dict[str, ChoiceMutation] = {"value": ValueMutation(), "neighbour": NeighbourMutation()}
DEFAULT_MUTATIONS = ("value",)


@dataclass(frozen=True)
class ChoiceSpace:
    """Named choices, each a list of two or more distinct values (a one-value choice is a constant
    and allowed, but at least one choice must have two). Sampling is uniform per choice; a mutation
    picks one choice with alternatives, uniformly, and applies one of `mutations` (names in
    CHOICE_MUTATIONS; by default "value": a different value, uniformly), Real et al.'s one
    mutation per child."""

    choices: Mapping[str, Sequence[Any]]
    mutations: tuple[str, ...] = DEFAULT_MUTATIONS
    name: str = field(default="choice", init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.choices, Mapping) or not self.choices:
            raise ValueError("choices: need a mapping of choice name to a list of values, e.g. {'depth': [2, 4]}")
        frozen = {}
        for name, values in self.choices.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"choices: a choice name must be a non-empty string, got {name!r}")
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
                raise ValueError(f"choice {name!r}: needs a non-empty list of values, got {values!r}")
            bad = [v for v in values if not isinstance(v, SCALARS) or (isinstance(v, float) and v != v)]
            if bad:
                raise ValueError(f"choice {name!r}: values must be JSON scalars (str, int, float, bool, None), "
                                 f"got {bad[0]!r}")
            seen = [_as_json(v) for v in values]
            if len(set(seen)) != len(seen):
                raise ValueError(f"choice {name!r}: values repeat in {list(values)!r}")
            frozen[name] = tuple(values)
        if all(len(values) < 2 for values in frozen.values()):
            raise ValueError("choices: at least one choice needs two or more values, or nothing can mutate")
        object.__setattr__(self, "choices", MappingProxyType(frozen))
        object.__setattr__(self, "mutations", check_mutations(self.mutations, CHOICE_MUTATIONS))

    def __hash__(self) -> int:
        return hash(_as_json(self.to_config()))

    def __eq__(self, other: object) -> bool:  # as JSON: [0, 1] and [False, True] are other spaces
        return isinstance(other, ChoiceSpace) and _as_json(self.to_config()) == _as_json(other.to_config())

    def __reduce__(self) -> tuple:
        return ChoiceSpace, ({name: list(values) for name, values in self.choices.items()}, self.mutations)

    def to_config(self) -> dict[str, Any]:
        return {"name": self.name, "choices": {name: list(values) for name, values in self.choices.items()},
                **mutations_config(self.mutations, DEFAULT_MUTATIONS)}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "ChoiceSpace":
        return cls(config["choices"], config.get("mutations", DEFAULT_MUTATIONS))

    def genotype(self, values: Mapping[str, Any]) -> ChoiceGenotype:
        """A genotype of this space; errors name the choice that is missing, unknown or off its list."""
        if not isinstance(values, Mapping):
            raise ValueError(f"a genotype of this space is a mapping of choice to value, got {values!r}")
        unknown = [name for name in values if name not in self.choices]
        if unknown:
            raise ValueError(f"choice {unknown[0]!r}: not in this space; its choices: {list(self.choices)}")
        for name, allowed in self.choices.items():
            if name not in values:
                raise ValueError(f"choice {name!r}: missing (one of {list(allowed)})")
            if _as_json(values[name]) not in {_as_json(v) for v in allowed}:
                raise ValueError(f"choice {name!r}: {values[name]!r} is not one of {list(allowed)}")
        return ChoiceGenotype({name: values[name] for name in self.choices})

    def genotype_from_json(self, data: Any) -> ChoiceGenotype:
        return self.genotype(data)

    def sample(self, rng: random.Random) -> ChoiceGenotype:
        return ChoiceGenotype({name: rng.choice(values) for name, values in self.choices.items()})

    def mutate(self, parent: ChoiceGenotype, rng: random.Random) -> tuple[ChoiceGenotype, str]:
        name = rng.choice([n for n, values in self.choices.items() if len(values) > 1])
        mutation = CHOICE_MUTATIONS[draw(self.mutations, rng)]
        new, what = mutation.apply(self, parent, name, rng)
        return ChoiceGenotype({**parent.values, name: new}), f"{name}: {what}"

    def size(self) -> int:
        """How many genotypes the space holds."""
        total = 1
        for values in self.choices.values():
            total *= len(values)
        return total
