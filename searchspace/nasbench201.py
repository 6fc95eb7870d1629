"""NAS-Bench-201's cell space (Dong & Yang 2020): 4 nodes, 6 edges, one op per edge.

The string form is NAS-Bench-201's own: `|op~0|+|op~0|op~1|+|op~0|op~1|op~2|`, where `op~j` on
the group of node i is the op on the edge from node j to node i.

Pure Python: this module must not import TensorFlow or Ray, nor use a global random state.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from searchspace.mutations import check_mutations, draw, mutations_config
from searchspace.ops import NASBENCH201_OPS

# (to_node, from_node) for the six edges, in the order of the string form.
EDGES: tuple[tuple[int, int], ...] = ((1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2))


@dataclass(frozen=True)
class NasBench201Genotype:
    ops: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))
        if len(self.ops) != len(EDGES):
            raise ValueError(f"NAS-Bench-201 cell: needs {len(EDGES)} edge ops, got {len(self.ops)}")
        for (to, frm), op in zip(EDGES, self.ops):
            if op not in NASBENCH201_OPS:
                raise ValueError(
                    f"NAS-Bench-201 cell, edge {frm}->{to}: unknown op {op!r}; "
                    f"known: {list(NASBENCH201_OPS)}"
                )

    def key(self) -> str:
        return self._key

    @cached_property
    def _key(self) -> str:  # a search asks for it at every proposal, of every trial (not a field: not compared)
        return str(self)

    def features(self) -> list[str]:
        """One token per edge, "from->to=op" (evolution/surrogate.py)."""
        return [f"{frm}->{to}={op}" for (to, frm), op in zip(EDGES, self.ops)]

    def __str__(self) -> str:
        groups = []
        for node in (1, 2, 3):
            groups.append(
                "|" + "|".join(f"{op}~{frm}" for (to, frm), op in zip(EDGES, self.ops) if to == node) + "|"
            )
        return "+".join(groups)

    def to_json(self) -> dict[str, Any]:
        return {"arch": str(self)}

    @classmethod
    def from_string(cls, text: str) -> "NasBench201Genotype":
        """Parse `|op~0|+|op~0|op~1|+|op~0|op~1|op~2|`; errors say what is wrong where."""
        groups = text.strip().split("+")
        if len(groups) != 3:
            raise ValueError(f"NAS-Bench-201 arch {text!r}: expected 3 node groups joined by '+'")
        ops = []
        for node, group in enumerate(groups, start=1):
            if not (group.startswith("|") and group.endswith("|")):
                raise ValueError(f"NAS-Bench-201 arch {text!r}: node {node} group {group!r} not in |..|")
            items = group[1:-1].split("|")
            if len(items) != node:
                raise ValueError(f"NAS-Bench-201 arch {text!r}: node {node} needs {node} edges")
            for frm, item in enumerate(items):
                op, _, src = item.partition("~")
                if src != str(frm):
                    raise ValueError(
                        f"NAS-Bench-201 arch {text!r}: node {node} edge {item!r} must come from node {frm}"
                    )
                ops.append(op)
        return cls(tuple(ops))

    @classmethod
    def from_json(cls, data: Any) -> "NasBench201Genotype":
        if not isinstance(data, dict) or not isinstance(data.get("arch"), str):
            raise ValueError("a NAS-Bench-201 genotype is a JSON object with an 'arch' string")
        return cls.from_string(data["arch"])


class EdgeMutation(Protocol):
    """A change to edge `e` (an index into EDGES) of a cell's ops: `apply` returns the new ops and
    what changed (shown after "edge <from>-><to>: ")."""

    def apply(self, space: "NasBench201Space", ops: tuple[str, ...], e: int,
              rng: random.Random) -> tuple[tuple[str, ...], str]: ...


class EdgeOpMutation:
    """The edge applies another of the space's ops, uniformly."""

    def apply(self, space: "NasBench201Space", ops: tuple[str, ...], e: int,
              rng: random.Random) -> tuple[tuple[str, ...], str]:
        new = list(ops)
        old = new[e]
        new[e] = rng.choice([op for op in space.ops if op != old])
        return tuple(new), f"op {old} -> {new[e]}"


# One entry per mutation of an edge; a space draws from those its `mutations` names.
NASBENCH201_MUTATIONS: dict[str, EdgeMutation] = {"op": EdgeOpMutation()}
DEFAULT_MUTATIONS = ("op",)


@dataclass(frozen=True)
class NasBench201Space:
    """Uniform sampling; a mutation picks one edge uniformly and applies one of `mutations` (names
    in NASBENCH201_MUTATIONS; by default "op": a different op)."""

    ops: tuple[str, ...] = NASBENCH201_OPS
    identity_prob: float = 0.0
    mutations: tuple[str, ...] = DEFAULT_MUTATIONS
    name: str = field(default="nasbench201", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "mutations", check_mutations(self.mutations, NASBENCH201_MUTATIONS))
        unknown = [op for op in self.ops if op not in NASBENCH201_OPS]
        if unknown or len(self.ops) < 2:
            raise ValueError(f"ops: need two or more NAS-Bench-201 ops, got {list(self.ops)}")
        if not 0.0 <= self.identity_prob <= 1.0:
            raise ValueError(f"identity_prob: must be in [0, 1], got {self.identity_prob}")

    def to_config(self) -> dict[str, Any]:
        return {"name": self.name, "ops": list(self.ops), "identity_prob": self.identity_prob,
                **mutations_config(self.mutations, DEFAULT_MUTATIONS)}

    def genotype_from_json(self, data: Any) -> NasBench201Genotype:
        return NasBench201Genotype.from_json(data)

    def sample(self, rng: random.Random) -> NasBench201Genotype:
        return NasBench201Genotype(tuple(rng.choice(self.ops) for _ in EDGES))

    def mutate(self, parent: NasBench201Genotype, rng: random.Random) -> tuple[NasBench201Genotype, str]:
        if rng.random() < self.identity_prob:
            return parent, "identity"
        e = rng.randrange(len(EDGES))
        mutation = NASBENCH201_MUTATIONS[draw(self.mutations, rng)]
        ops, what = mutation.apply(self, parent.ops, e, rng)
        to, frm = EDGES[e]
        return NasBench201Genotype(ops), f"edge {frm}->{to}: {what}"

    def all_genotypes(self) -> list[NasBench201Genotype]:
        """Every cell of the space (5^6 = 15,625 with the default ops)."""
        return [NasBench201Genotype(ops) for ops in itertools.product(self.ops, repeat=len(EDGES))]
