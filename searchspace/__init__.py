"""Search spaces: immutable, validated, JSON-serialisable genotypes and seeded sampling/mutation.

Pure Python: nothing in this package may import TensorFlow or Ray.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from searchspace.nasbench201 import NasBench201Genotype, NasBench201Space
from searchspace.nasnet import Block, Cell, NasNetGenotype, NasNetSpace, make_cell


class Genotype(Protocol):
    def key(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


class SearchSpace(Protocol):
    """What a search algorithm needs of a space."""

    name: str

    def sample(self, rng: random.Random) -> Any: ...

    def mutate(self, parent: Any, rng: random.Random) -> tuple[Any, str]: ...

    def genotype_from_json(self, data: Any) -> Any: ...

    def to_config(self) -> dict[str, Any]: ...


_SPACES = {"nasnet": NasNetSpace, "nasbench201": NasBench201Space}


def space_from_config(config: dict[str, Any]) -> SearchSpace:
    """Rebuild a space from its `to_config()` dict (as stored in a journal)."""
    config = dict(config)
    name = config.pop("name", None)
    if name not in _SPACES:
        raise ValueError(f"space name: unknown {name!r}; known: {sorted(_SPACES)}")
    if "ops" in config:
        config["ops"] = tuple(config["ops"])
    return _SPACES[name](**config)


__all__ = [
    "Block",
    "Cell",
    "Genotype",
    "NasBench201Genotype",
    "NasBench201Space",
    "NasNetGenotype",
    "NasNetSpace",
    "SearchSpace",
    "make_cell",
    "space_from_config",
]
