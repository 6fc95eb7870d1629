"""The NASNet cell search space of Real et al. 2019 (AmoebaNet): genotypes, sampling, mutation.

A cell has two inputs, hidden states h0 (the previous cell's output) and h1 (the one before), and
B pairwise blocks. Block i reads two hidden states from {h0 .. h(i+1)}, applies one op to each, and
sums them into h(i+2). The cell's output concatenates the hidden states listed in `concat`.
A mutation changes one element with one of the NASNET_MUTATIONS the space's `mutations` names.

Pure Python value objects: this module must not import TensorFlow or Ray, and must not use a
global random state (every random choice comes from the `random.Random` passed in).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from searchspace.mutations import check_mutations, draw, mutations_config
from searchspace.ops import NASNET_OP_SPECS, NASNET_SEARCH_OPS

CELL_NAMES = ("normal", "reduction")


@dataclass(frozen=True)
class Block:
    """Two (input hidden state, op) elements whose results are summed."""

    inputs: tuple[int, int]
    ops: tuple[str, str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "ops", tuple(self.ops))

    def key(self) -> str:
        """Order-free key: swapping the two elements gives the same key."""
        return "+".join(sorted(f"{op}(h{i})" for i, op in zip(self.inputs, self.ops)))


@dataclass(frozen=True)
class Cell:
    blocks: tuple[Block, ...]
    concat: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", tuple(self.blocks))
        object.__setattr__(self, "concat", tuple(self.concat))

    def key(self) -> str:
        blocks = ",".join(b.key() for b in self.blocks)
        return f"{blocks};concat={'.'.join(map(str, self.concat))}"

    def __str__(self) -> str:
        parts = [
            f"h{i + 2}={b.ops[0]}(h{b.inputs[0]})+{b.ops[1]}(h{b.inputs[1]})"
            for i, b in enumerate(self.blocks)
        ]
        parts.append("out=concat(" + ",".join(f"h{h}" for h in self.concat) + ")")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "blocks": [{"inputs": list(b.inputs), "ops": list(b.ops)} for b in self.blocks],
            "concat": list(self.concat),
        }


def unused_outputs(blocks: Sequence[Block]) -> tuple[int, ...]:
    """The paper's concat rule: every block output that no block of the cell consumes."""
    consumed = {i for b in blocks for i in b.inputs}
    return tuple(i + 2 for i in range(len(blocks)) if i + 2 not in consumed)


def make_cell(blocks: Sequence[Block], concat: Sequence[int] | None = None) -> Cell:
    """A cell whose concat list is `concat`, or the paper's rule when it is None."""
    blocks = tuple(blocks)
    return Cell(blocks, unused_outputs(blocks) if concat is None else tuple(concat))


def _validate_cell(cell: Cell, name: str) -> None:
    if not cell.blocks:
        raise ValueError(f"{name} cell: needs at least one block")
    for i, block in enumerate(cell.blocks):
        where = f"{name} cell, block {i}"
        if len(block.inputs) != 2 or len(block.ops) != 2:
            raise ValueError(f"{where}: needs exactly two inputs and two ops")
        for j, (h, op) in enumerate(zip(block.inputs, block.ops)):
            if not isinstance(h, int) or isinstance(h, bool) or not 0 <= h <= i + 1:
                raise ValueError(
                    f"{where}, inputs[{j}]: {h!r} is not a hidden state before the block "
                    f"(allowed 0..{i + 1})"
                )
            if op not in NASNET_OP_SPECS:
                raise ValueError(f"{where}, ops[{j}]: unknown op {op!r}; known: {list(NASNET_OP_SPECS)}")
    last = len(cell.blocks) + 1
    if not cell.concat:
        raise ValueError(f"{name} cell, concat: must name at least one hidden state")
    for h in cell.concat:
        if not isinstance(h, int) or isinstance(h, bool) or not 0 <= h <= last:
            raise ValueError(f"{name} cell, concat: {h!r} is not a hidden state (allowed 0..{last})")
    if len(set(cell.concat)) != len(cell.concat):
        raise ValueError(f"{name} cell, concat: repeats a hidden state: {list(cell.concat)}")


@dataclass(frozen=True)
class NasNetGenotype:
    """A normal cell and a reduction cell; validated at construction."""

    normal: Cell
    reduction: Cell

    def __post_init__(self) -> None:
        _validate_cell(self.normal, "normal")
        _validate_cell(self.reduction, "reduction")

    def cell(self, name: str) -> Cell:
        return self.normal if name == "normal" else self.reduction

    def key(self) -> str:
        """Canonical key: equal for genotypes that differ only in element order inside blocks."""
        return f"normal[{self.normal.key()}]|reduction[{self.reduction.key()}]"

    def __str__(self) -> str:
        return f"normal: {self.normal} | reduction: {self.reduction}"

    def describe(self) -> str:
        """A multi-line listing: one line per block, one per cell output."""
        lines = []
        for name in CELL_NAMES:
            cell = self.cell(name)
            lines.append(f"{name} cell:")
            for i, block in enumerate(cell.blocks):
                (a, b), (op_a, op_b) = block.inputs, block.ops
                lines.append(f"  h{i + 2} = {op_a}(h{a}) + {op_b}(h{b})")
            lines.append(f"  output = concat({', '.join(f'h{h}' for h in cell.concat)})")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"normal": self.normal.to_json(), "reduction": self.reduction.to_json()}

    @classmethod
    def from_json(cls, data: Any) -> "NasNetGenotype":
        """Parse `to_json()` output; a malformed document raises ValueError naming the field
        (searchspace.genotype_from_json also reads a MacroGenotype's and a ConvNetGenotype's)."""
        return cls(*cls.cells_from_json(data))

    @staticmethod
    def cells_from_json(data: Any) -> list["Cell"]:
        """The normal and reduction cells of a genotype's JSON."""
        if not isinstance(data, dict):
            raise ValueError(f"a NASNet genotype is a JSON object, got {type(data).__name__}")
        cells = []
        for name in CELL_NAMES:
            cell = data.get(name)
            if not isinstance(cell, dict):
                raise ValueError(f"{name} cell: missing or not an object")
            if not isinstance(cell.get("blocks"), list) or not isinstance(cell.get("concat"), list):
                raise ValueError(f"{name} cell: needs a 'blocks' list and a 'concat' list")
            blocks = []
            for i, b in enumerate(cell["blocks"]):
                if not isinstance(b, dict):
                    raise ValueError(f"{name} cell, block {i}: not an object")
                for field_name in ("inputs", "ops"):
                    if not isinstance(b.get(field_name), list) or len(b[field_name]) != 2:
                        raise ValueError(f"{name} cell, block {i}, {field_name}: needs a list of two")
                blocks.append(Block(tuple(b["inputs"]), tuple(b["ops"])))
            cells.append(Cell(tuple(blocks), tuple(cell["concat"])))
        return cells


class NasNetMutation(Protocol):
    """A change to element `e` (0 or 1) of block `b` of a cell: `apply` returns the new block and
    what changed (the journal and the results show it after "<cell> block <b> element <e>: ")."""

    def apply(self, space: "NasNetSpace", block: Block, b: int, e: int,
              rng: random.Random) -> tuple[Block, str]: ...


class HiddenStateMutation:
    """The element reads another hidden state of those its block may read (h0 .. h(b+1)), uniformly."""

    def apply(self, space: "NasNetSpace", block: Block, b: int, e: int,
              rng: random.Random) -> tuple[Block, str]:
        inputs = list(block.inputs)
        old = inputs[e]
        inputs[e] = rng.choice([h for h in range(b + 2) if h != old])
        return Block(tuple(inputs), block.ops), f"hidden state h{old} -> h{inputs[e]}"


class OpMutation:
    """The element applies another of the space's ops, uniformly."""

    def apply(self, space: "NasNetSpace", block: Block, b: int, e: int,
              rng: random.Random) -> tuple[Block, str]:
        ops = list(block.ops)
        old = ops[e]
        ops[e] = rng.choice([op for op in space.ops if op != old])
        return Block(block.inputs, tuple(ops)), f"op {old} -> {ops[e]}"


# One entry per mutation of a NASNet cell element; a space draws from those its `mutations` names.
NASNET_MUTATIONS: dict[str, NasNetMutation] = {"hidden_state": HiddenStateMutation(), "op": OpMutation()}
PAPER_MUTATIONS = ("hidden_state", "op")  # Real et al. 2019: each with probability 1/2


@dataclass(frozen=True)
class NasNetSpace:
    """Uniform sampling and the paper's single-element mutation over NASNet cells; `mutations`
    names the entries of NASNET_MUTATIONS a mutation draws from."""

    num_blocks: int = 5
    ops: tuple[str, ...] = NASNET_SEARCH_OPS
    identity_prob: float = 0.05
    mutations: tuple[str, ...] = PAPER_MUTATIONS
    name: str = field(default="nasnet", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "mutations", check_mutations(self.mutations, NASNET_MUTATIONS))
        if self.num_blocks < 1:
            raise ValueError(f"num_blocks: must be at least 1, got {self.num_blocks}")
        unknown = [op for op in self.ops if op not in NASNET_OP_SPECS]
        if unknown or len(self.ops) < 2:
            raise ValueError(f"ops: need two or more known ops, got {list(self.ops)}")
        if not 0.0 <= self.identity_prob <= 1.0:
            raise ValueError(f"identity_prob: must be in [0, 1], got {self.identity_prob}")

    def to_config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "num_blocks": self.num_blocks,
            "ops": list(self.ops),
            "identity_prob": self.identity_prob,
            **mutations_config(self.mutations, PAPER_MUTATIONS),
        }

    def genotype_from_json(self, data: Any) -> NasNetGenotype:
        """The genotype of `data`; a ValueError when its cells' block count is not this space's. Any known op
        is allowed (a seed such as AmoebaNet-D's may use ops mutation does not draw)."""
        if isinstance(data, dict) and "macro" in data:
            raise ValueError("macro: a genotype of space nasnet has no macro part (that is space nasnet_macro's)")
        genotype = NasNetGenotype.from_json(data)
        for kind, cell in (("normal", genotype.normal), ("reduction", genotype.reduction)):
            if len(cell.blocks) != self.num_blocks:
                raise ValueError(f"{kind} cell: {len(cell.blocks)} blocks, this space's cells have {self.num_blocks}")
        return genotype

    def sample_block(self, i: int, rng: random.Random) -> Block:
        """Block i of a sampled cell: two hidden states of h0 .. h(i+1), two ops, uniformly."""
        return Block((rng.randrange(i + 2), rng.randrange(i + 2)), (rng.choice(self.ops), rng.choice(self.ops)))

    def _sample_cell(self, rng: random.Random) -> Cell:
        return make_cell([self.sample_block(i, rng) for i in range(self.num_blocks)])

    def sample(self, rng: random.Random) -> NasNetGenotype:
        return NasNetGenotype(self._sample_cell(rng), self._sample_cell(rng))

    def mutate(self, parent: NasNetGenotype, rng: random.Random) -> tuple[NasNetGenotype, str]:
        """One mutation: identity with `identity_prob`, else exactly one element changed.

        Picks the normal or reduction cell, one of its blocks and one of the block's two elements
        uniformly; then draws one of `mutations` uniformly (by default the paper's two: a different
        input hidden state or a different op) and applies it to that element.
        """
        if rng.random() < self.identity_prob:
            return parent, "identity"
        return self.mutate_cell(parent, rng.choice(CELL_NAMES), rng)

    def mutate_cell(self, parent: NasNetGenotype, cell_name: str, rng: random.Random) -> tuple[NasNetGenotype, str]:
        """One element of cell `cell_name` changed: a block and an element uniformly, then a mutation."""
        cell = parent.cell(cell_name)
        b = rng.randrange(len(cell.blocks))
        e = rng.randrange(2)
        mutation = NASNET_MUTATIONS[draw(self.mutations, rng)]
        blocks = list(cell.blocks)
        blocks[b], what = mutation.apply(self, blocks[b], b, e, rng)
        new_cell = make_cell(blocks)
        cells = {"normal": parent.normal, "reduction": parent.reduction, cell_name: new_cell}
        return NasNetGenotype(cells["normal"], cells["reduction"]), f"{cell_name} block {b} element {e}: {what}"
