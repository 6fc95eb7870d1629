"""Search spaces: immutable, validated, JSON-serialisable genotypes and seeded sampling/mutation.

Pure Python: nothing in this package may import TensorFlow, Ray or another package of ours (all of
them import this one).
"""

from __future__ import annotations

import json
import random
from typing import Any, Protocol

from searchspace.choice import ChoiceGenotype, ChoiceSpace
from searchspace.convnet import CONVNET_REFERENCES, ConvNetGenotype, ConvNetSpace, Stage, convnet_space
from searchspace.nasbench201 import NasBench201Genotype, NasBench201Space
from searchspace.nasnet import Block, Cell, NasNetGenotype, NasNetSpace, make_cell
from searchspace.nasnet_macro import Macro, MacroGenotype, NasNetMacroSpace


class Genotype(Protocol):
    """A point of a space: frozen, with a canonical `key()` (equal genotypes, equal keys) and a JSON
    form its space's `genotype_from_json` reads back. `str()` is what tables and logs show."""

    def key(self) -> str: ...

    def to_json(self) -> Any: ...


class SearchSpace(Protocol):
    """What every search algorithm needs of a space, so any space that provides it is searched,
    journaled and resumed like the built-in ones once `register_space` knows it by `name`.

    - `sample(rng)`: a random genotype, drawn from `rng` only (a seeded `random.Random`).
    - `mutate(parent, rng)`: `(child, description)`, one change to the parent (the paper's "one
      mutation per child"); the description is what results and progress lines show.
    - `genotype_from_json(data)`: the genotype whose `to_json()` gave `data`; a ValueError naming
      the field for anything else.
    - `to_config()`: a JSON dict with the space's `name` and its settings; the journal stores it and
      `space_from_config` rebuilds the space with the class's `from_config(config)` when it has one,
      else `cls(**settings)`.

    A runnable example: bit strings of a given length.

    >>> import dataclasses, random
    >>> from evolution import RegularizedEvolution
    >>> @dataclasses.dataclass(frozen=True)
    ... class Bits:
    ...     bits: tuple[int, ...]
    ...     def key(self): return "".join(map(str, self.bits))
    ...     def to_json(self): return list(self.bits)
    ...     def __str__(self): return self.key()
    >>> @dataclasses.dataclass(frozen=True)
    ... class BitSpace:
    ...     length: int = 8
    ...     name = "bits"
    ...     def sample(self, rng): return Bits(tuple(rng.randrange(2) for _ in range(self.length)))
    ...     def mutate(self, parent, rng):
    ...         i = rng.randrange(self.length)
    ...         flipped = list(parent.bits); flipped[i] = 1 - flipped[i]
    ...         return Bits(tuple(flipped)), f"bit {i} flipped"
    ...     def genotype_from_json(self, data):
    ...         if not (isinstance(data, list) and len(data) == self.length and set(data) <= {0, 1}):
    ...             raise ValueError(f"a genotype of BitSpace({self.length}) is a list of {self.length} bits")
    ...         return Bits(tuple(data))
    ...     def to_config(self): return {"name": self.name, "length": self.length}
    >>> register_space(BitSpace)
    >>> search = RegularizedEvolution(BitSpace(), population_size=4, sample_size=2, seed=0)
    >>> for _ in range(20):
    ...     trial = search.ask()
    ...     _ = search.tell(trial.trial_id, {"val_accuracy": sum(trial.genotype.bits) / 8})
    >>> search.best()[1].metrics["val_accuracy"] > 0.5
    True
    """

    name: str

    def sample(self, rng: random.Random) -> Any: ...

    def mutate(self, parent: Any, rng: random.Random) -> tuple[Any, str]: ...

    def genotype_from_json(self, data: Any) -> Any: ...

    def to_config(self) -> dict[str, Any]: ...


SPACES: dict[str, type] = {"nasnet": NasNetSpace, "nasnet_macro": NasNetMacroSpace, "nasbench201": NasBench201Space,
                           "choice": ChoiceSpace, "convnet": ConvNetSpace}


def genotype_from_json(data: Any) -> NasNetGenotype | ConvNetGenotype:
    """The genotype of a network's JSON document (a search's best_genotype.json, a promote plan's
    entry, a train_config.json's): a ConvNetGenotype for `"space": "convnet"`, a MacroGenotype when
    it has a "macro" part, else a NasNetGenotype."""
    if isinstance(data, dict) and data.get("space") == "convnet":
        return ConvNetGenotype.from_json(data)
    if isinstance(data, dict) and "macro" in data:
        return MacroGenotype.from_json(data)
    return NasNetGenotype.from_json(data)


def space_of(genotype: Any) -> str:
    """The name of the built-in space a network genotype is of: convnet, nasnet_macro or nasnet."""
    if isinstance(genotype, ConvNetGenotype):
        return "convnet"
    return "nasnet_macro" if isinstance(genotype, MacroGenotype) else "nasnet"


def register_space(space_class: type, name: str | None = None) -> None:
    """Make `space_class` known by `name` (default: its `name` attribute), so journals of its
    searches resume. Registering another class under a taken name is an error; the same one again
    is not (a script run twice, a notebook cell rerun)."""
    name = name or getattr(space_class, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_space: {space_class!r} needs a name (a `name` attribute or name=)")
    known = SPACES.get(name)
    if known is not None and (known.__module__, known.__qualname__) != (space_class.__module__,
                                                                         space_class.__qualname__):
        raise ValueError(f"register_space: the name {name!r} is taken by {known.__qualname__}")
    SPACES[name] = space_class


class RecordedGenotype:
    """A genotype of a space this process does not know, as its journal recorded it (its JSON)."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def key(self) -> str:
        return json.dumps(self.data, sort_keys=True, separators=(",", ":"))

    def to_json(self) -> Any:
        return self.data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RecordedGenotype) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __str__(self) -> str:
        if isinstance(self.data, dict):
            return ", ".join(f"{k}={v}" for k, v in self.data.items())
        return json.dumps(self.data)


class RecordedSpace:
    """Stands in for an unregistered space when a search is only read (`amoeba results`, `amoeba
    report`): its genotypes are what the journal wrote; it cannot propose new ones."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = dict(config)
        self.name = str(config.get("name"))

    def to_config(self) -> dict[str, Any]:
        return dict(self.config)

    def genotype_from_json(self, data: Any) -> RecordedGenotype:
        return RecordedGenotype(data)

    def sample(self, rng: random.Random) -> Any:
        raise NotImplementedError(f"space {self.name!r} is not registered here: register it with "
                                  "searchspace.register_space to go on with its search")

    def mutate(self, parent: Any, rng: random.Random) -> tuple[Any, str]:
        return self.sample(rng)


def space_from_config(config: dict[str, Any], recorded: bool = False) -> SearchSpace:
    """Rebuild a space from its `to_config()` dict (as stored in a journal). With `recorded`, a space
    this process does not know comes back as a RecordedSpace (for reading its search)."""
    config = dict(config)
    name = config.pop("name", None)
    if name not in SPACES and recorded:
        return RecordedSpace({"name": name, **config})
    if name not in SPACES:
        raise ValueError(f"space name: unknown {name!r}; known: {sorted(SPACES)} (a space of your own must be "
                         "registered with searchspace.register_space before its search resumes)")
    cls = SPACES[name]
    if hasattr(cls, "from_config"):
        return cls.from_config({"name": name, **config})
    if "ops" in config:
        config["ops"] = tuple(config["ops"])
    return cls(**config)


__all__ = [
    "Block",
    "CONVNET_REFERENCES",
    "Cell",
    "ChoiceGenotype",
    "ChoiceSpace",
    "ConvNetGenotype",
    "ConvNetSpace",
    "Genotype",
    "Macro",
    "MacroGenotype",
    "NasBench201Genotype",
    "NasBench201Space",
    "NasNetGenotype",
    "NasNetMacroSpace",
    "NasNetSpace",
    "Stage",
    "convnet_space",
    "SPACES",
    "SearchSpace",
    "make_cell",
    "genotype_from_json",
    "register_space",
    "space_of",
    "space_from_config",
]
