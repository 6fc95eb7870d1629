"""The whole network as a genotype (`--space=nasnet_macro`): NASNet cells plus a macro part.

The paper's space (searchspace/nasnet.py) searches only the two cells; N (cells per stack) and F
(the first stack's filters) are fixed by the proxy, and every network is 3 stacks of N cells with
the searched reduction cell between them. On a CPU a cell network's step time follows its count of
small ops, not its multiply-adds, so what wins there may be a shallower or plainer network than
any of those: ResNet-9 is mostly plain 3x3 convolutions with a max pool. The macro part makes that
reachable, each choice a small set:

- `cells_per_stack` (0-3 each) and the number of stacks (3 or 4, that is 2 or 3 reductions; the
  length of `cells_per_stack`): depth where it pays; 0 is a stack of only its reduction (ResNet-9's
  second stage); a fourth stack halves the resolution once more, as ResNet-9's third reduction does
  (to 4x4 at 32 px), where width is cheap in time;
- `filters` F (8 to 64): the width that fits the machine; widths double at each reduction;
- blocks per cell (1-5, both cells, the length of their block lists): a 1- or 2-block cell of a
  3x3 conv beside `none` is a residual block;
- `reduction`: the searched reduction cell ("cell"), or a fixed cheap one: ReLU-3x3 conv-BN then
  a 2x2 max pool ("conv_pool", ResNet-9's), or a stride-2 ReLU-3x3 conv-BN ("strided_conv");
- `projection`: "conv_1x1" projects each cell's input with ReLU-1x1-BN as the paper does; "none"
  does so only where its width differs (the projection is a third of a small cell's ops).

The stem is a 3x3 conv of F filters and BN (trainer/nasnet_macro.py builds the network). A
mutation changes one macro choice (with probability `macro_prob`; ordinal ones by one step) or one
element of a cell the network uses, as the paper's space changes it; one that would leave the network
as it was is drawn again. The key is the network's: two genotypes that build the same network (an
unused cell aside, or h1 where h1 and h0 are one tensor) share it, so results, dedup and promote see
one network. Pure Python: no TensorFlow, Ray or global random state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from searchspace.mutations import draw
from searchspace.nasnet import CELL_NAMES, Block, NasNetGenotype, NasNetSpace, make_cell
from searchspace.ops import NASNET_SEARCH_OPS

STACKS = (3, 4)  # stacks in a network: the paper's 3 (2 reductions), or 4 as ResNet-9 has
MACRO_FILTERS = (8, 12, 16, 24, 32, 48, 64)
REDUCTIONS = ("cell", "conv_pool", "strided_conv")
PROJECTIONS = ("conv_1x1", "none")
NOOP_REDRAWS = 20  # draws of a mutation that must change the network before the last one is taken as it is


@dataclass(frozen=True)
class Macro:
    """The network around the cells: normal cells per stack, F, the reduction and the projection."""

    cells_per_stack: tuple[int, ...]
    filters: int
    reduction: str = "cell"
    projection: str = "conv_1x1"

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells_per_stack", tuple(self.cells_per_stack))
        cells = self.cells_per_stack
        if len(cells) not in STACKS or any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in cells):
            raise ValueError(f"macro, cells_per_stack: 3 or 4 counts (one per stack) of 0 or more, got {list(cells)}")
        if not isinstance(self.filters, int) or isinstance(self.filters, bool) or self.filters < 2:
            raise ValueError(f"macro, filters: a whole number of 2 or more, got {self.filters!r}")
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"macro, reduction: unknown {self.reduction!r}; known: {list(REDUCTIONS)}")
        if self.projection not in PROJECTIONS:
            raise ValueError(f"macro, projection: unknown {self.projection!r}; known: {list(PROJECTIONS)}")

    def key(self) -> str:
        cells = ".".join(map(str, self.cells_per_stack))
        return f"cells={cells};F={self.filters};reduction={self.reduction};projection={self.projection}"

    def to_json(self) -> dict[str, Any]:
        return {"cells_per_stack": list(self.cells_per_stack), "filters": self.filters,
                "reduction": self.reduction, "projection": self.projection}

    @classmethod
    def from_json(cls, data: Any) -> "Macro":
        if not isinstance(data, dict):
            raise ValueError(f"macro: a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - {"cells_per_stack", "filters", "reduction", "projection"})
        if unknown or "cells_per_stack" not in data or "filters" not in data:
            raise ValueError(f"macro: needs cells_per_stack and filters (reduction, projection optional); "
                             f"unknown fields {unknown}")
        if not isinstance(data["cells_per_stack"], list):
            raise ValueError("macro, cells_per_stack: a list")
        return cls(**data)


@dataclass(frozen=True)
class MacroGenotype(NasNetGenotype):
    """NASNet cells (the same number of blocks in both) and the `macro` part; a NasNetGenotype, so
    what shows or draws cells takes it, and NasNetGenotype.from_json reads it back."""

    macro: Macro = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.macro, Macro):
            raise ValueError("macro: missing")
        if len(self.normal.blocks) != len(self.reduction.blocks):
            raise ValueError(f"macro genotype: both cells have the same number of blocks, got "
                             f"{len(self.normal.blocks)} and {len(self.reduction.blocks)}")

    @property
    def num_blocks(self) -> int:
        return len(self.normal.blocks)

    def key(self) -> str:
        """The network's key: genotypes that build the same network share it. A cell the network
        does not use is `unused` (the normal cell without normal cells, the reduction cell under a
        fixed reduction), so is the projection without cells; where every normal cell reads one
        tensor as both inputs, its h1 is written h0."""
        macro = self.macro
        has_normal = any(macro.cells_per_stack)
        has_reduction_cell = macro.reduction == "cell"
        normal = self.normal
        if has_normal and self.one_input_everywhere():
            normal = make_cell([Block(tuple(0 if i == 1 else i for i in b.inputs), b.ops) for b in normal.blocks],
                               normal.concat)
        projection = macro.projection if has_normal or has_reduction_cell else "unused"
        cells = ".".join(map(str, macro.cells_per_stack))
        return (f"normal[{normal.key() if has_normal else 'unused'}]|"
                f"reduction[{self.reduction.key() if has_reduction_cell else 'unused'}]|"
                f"macro[cells={cells};F={macro.filters};reduction={macro.reduction};projection={projection}]")

    def one_input_everywhere(self) -> bool:
        """Whether every normal cell reads one tensor as both its inputs (trainer/nasnet_macro.py):
        each is the first of its stack, its stack starts from the stem or a fixed reduction, and
        nothing projects the tensor (projection "none"; its width is the stack's)."""
        macro = self.macro
        cells = macro.cells_per_stack
        fresh_starts = macro.reduction != "cell" or not any(cells[1:])
        return macro.projection == "none" and max(cells) <= 1 and fresh_starts

    def __str__(self) -> str:
        return f"{self.macro.key()} | {super().__str__()}"

    def describe(self) -> str:
        m = self.macro
        return (f"network: {'/'.join(map(str, m.cells_per_stack))} normal cells per stack, F={m.filters}, "
                f"reduction {m.reduction}, input projection {m.projection}\n{super().describe()}")

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "macro": self.macro.to_json()}

    @classmethod
    def from_json(cls, data: Any) -> "MacroGenotype":
        cells = NasNetGenotype.cells_from_json(data)
        return cls(*cells, macro=Macro.from_json(data.get("macro")))

    def resized(self, filters: int | None = None, cells: int | None = None) -> "MacroGenotype":
        """The same network at another F, or with `cells` normal cells in every stack."""
        macro = self.macro
        if filters:
            macro = replace(macro, filters=filters)
        if cells is not None:
            macro = replace(macro, cells_per_stack=(cells,) * len(macro.cells_per_stack))
        return replace(self, macro=macro)


def _step(values: tuple, current: Any, rng: random.Random) -> Any:
    """A neighbour of `current` in the ordered `values` (the nearest one when it is not there)."""
    i = min(range(len(values)), key=lambda j: abs(values[j] - current)) if current not in values \
        else values.index(current)
    moves = [j for j in (i - 1, i + 1) if 0 <= j < len(values) and values[j] != current]
    return values[rng.choice(moves)]


def _cells(space: "NasNetMacroSpace", g: MacroGenotype, rng: random.Random) -> tuple[MacroGenotype, str]:
    stack = rng.randrange(len(g.macro.cells_per_stack))
    counts = list(g.macro.cells_per_stack)
    old = counts[stack]
    counts[stack] = _step(tuple(range(space.max_cells_per_stack + 1)), old, rng)
    return replace(g, macro=replace(g.macro, cells_per_stack=tuple(counts))), \
        f"macro stack {stack} cells {old} -> {counts[stack]}"


def _filters(space: "NasNetMacroSpace", g: MacroGenotype, rng: random.Random) -> tuple[MacroGenotype, str]:
    new = _step(space.filters, g.macro.filters, rng)
    return replace(g, macro=replace(g.macro, filters=new)), f"macro F {g.macro.filters} -> {new}"


def _blocks(space: "NasNetMacroSpace", g: MacroGenotype, rng: random.Random) -> tuple[MacroGenotype, str]:
    """One block more (drawn as sampling draws it) or fewer (the last) in both cells."""
    old = g.num_blocks
    new = _step(tuple(range(1, space.max_blocks + 1)), old, rng)
    cells = {}
    for name in CELL_NAMES:
        blocks = list(g.cell(name).blocks[:new])
        if new > old:
            blocks.append(space.cell_space(new).sample_block(old, rng))
        cells[name] = make_cell(blocks)
    return replace(g, **cells), f"macro blocks {old} -> {new}"


def _stacks(space: "NasNetMacroSpace", g: MacroGenotype, rng: random.Random) -> tuple[MacroGenotype, str]:
    """One stack more (its cell count drawn as sampling draws it) or fewer (the last)."""
    counts = g.macro.cells_per_stack
    new = _step(space.stacks, len(counts), rng)
    counts = counts[:new] + tuple(rng.randint(0, space.max_cells_per_stack) for _ in range(new - len(counts)))
    return replace(g, macro=replace(g.macro, cells_per_stack=counts)), \
        f"macro stacks {len(g.macro.cells_per_stack)} -> {new}"


def _choice(field_name: str, options: str) -> Callable[..., tuple[MacroGenotype, str]]:
    def mutate(space: "NasNetMacroSpace", g: MacroGenotype, rng: random.Random) -> tuple[MacroGenotype, str]:
        old = getattr(g.macro, field_name)
        new = rng.choice([v for v in getattr(space, options) if v != old])
        return replace(g, macro=replace(g.macro, **{field_name: new})), f"macro {field_name} {old} -> {new}"
    return mutate


# One entry per mutation of the macro part: (space, genotype, rng) -> (child, what changed).
MACRO_MUTATIONS: dict[str, Callable[..., tuple[MacroGenotype, str]]] = {
    "cells": _cells, "filters": _filters, "blocks": _blocks,
    "reduction": _choice("reduction", "reductions"), "projection": _choice("projection", "projections"),
    "stacks": _stacks,
}
# The space's field of options a macro mutation needs two or more of (the others always apply).
MUTATION_OPTIONS = {"reduction": "reductions", "projection": "projections", "stacks": "stacks"}


@dataclass(frozen=True)
class NasNetMacroSpace:
    """Uniform sampling of the macro choices and the cells; one mutation per child."""

    ops: tuple[str, ...] = NASNET_SEARCH_OPS
    identity_prob: float = 0.05
    macro_prob: float = 0.5  # a mutation changes the macro part with this probability, else one cell element
    filters: tuple[int, ...] = MACRO_FILTERS
    max_cells_per_stack: int = 3
    max_blocks: int = 5
    reductions: tuple[str, ...] = REDUCTIONS
    projections: tuple[str, ...] = PROJECTIONS
    stacks: tuple[int, ...] = STACKS
    name: str = field(default="nasnet_macro", init=False)

    def __post_init__(self) -> None:
        for name in ("ops", "filters", "reductions", "projections", "stacks"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        self.cell_space(1)  # validates ops and identity_prob
        if not 0.0 <= self.macro_prob <= 1.0:
            raise ValueError(f"macro_prob: must be in [0, 1], got {self.macro_prob}")
        if len(self.filters) < 2 or sorted(set(self.filters)) != list(self.filters) or self.filters[0] < 2:
            raise ValueError(f"filters: two or more increasing widths of 2 or more, got {list(self.filters)}")
        if self.max_cells_per_stack < 1 or self.max_blocks < 1:
            raise ValueError("max_cells_per_stack and max_blocks: at least 1")
        for name, known in (("reductions", REDUCTIONS), ("projections", PROJECTIONS), ("stacks", STACKS)):
            values = getattr(self, name)
            if not values or any(v not in known for v in values) or len(set(values)) < len(values):
                raise ValueError(f"{name}: one or more distinct of {list(known)}, got {list(values)}")

    def cell_space(self, num_blocks: int) -> NasNetSpace:
        return NasNetSpace(num_blocks=num_blocks, ops=self.ops, identity_prob=self.identity_prob)

    def to_config(self) -> dict[str, Any]:
        return {"name": self.name, "ops": list(self.ops), "identity_prob": self.identity_prob,
                "macro_prob": self.macro_prob, "filters": list(self.filters),
                "max_cells_per_stack": self.max_cells_per_stack, "max_blocks": self.max_blocks,
                "reductions": list(self.reductions), "projections": list(self.projections),
                "stacks": list(self.stacks)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "NasNetMacroSpace":
        """The space a journal recorded; one written before 4 stacks were searchable has 3 only."""
        return cls(**{"stacks": (3,), **{k: v for k, v in config.items() if k != "name"}})

    def genotype_from_json(self, data: Any) -> MacroGenotype:
        """A macro genotype (any known op, as NasNetSpace allows); a cell genotype without a macro
        part is refused, naming it."""
        if isinstance(data, dict) and "macro" not in data:
            raise ValueError("macro: missing; a genotype of space nasnet_macro has a 'macro' part (cells_per_stack, "
                             "filters, reduction, projection) beside its cells")
        return MacroGenotype.from_json(data)

    def sample(self, rng: random.Random) -> MacroGenotype:
        # no draw for one stack count: a 3-stack space samples as it did before 4 stacks existed
        stacks = rng.choice(self.stacks) if len(self.stacks) > 1 else self.stacks[0]
        macro = Macro(tuple(rng.randint(0, self.max_cells_per_stack) for _ in range(stacks)),
                      rng.choice(self.filters), rng.choice(self.reductions), rng.choice(self.projections))
        cells = self.cell_space(rng.randint(1, self.max_blocks)).sample(rng)
        return MacroGenotype(cells.normal, cells.reduction, macro=macro)

    def mutate(self, parent: MacroGenotype, rng: random.Random) -> tuple[MacroGenotype, str]:
        """Identity with `identity_prob`; else one change to the network: one macro choice with
        `macro_prob` (drawn uniformly from MACRO_MUTATIONS), else one element of a cell the network
        uses (the reduction cell only when it reduces, the normal cell only when a stack has one) as
        NasNetSpace.mutate changes it. A change that leaves the network as it was (the same key: h0
        for h1 where both are one tensor) is drawn again, up to NOOP_REDRAWS times."""
        if rng.random() < self.identity_prob:
            return parent, "identity"
        for _ in range(NOOP_REDRAWS):
            child, what = self._change(parent, rng)
            if child.key() != parent.key():
                break
        return child, what

    def _change(self, parent: MacroGenotype, rng: random.Random) -> tuple[MacroGenotype, str]:
        used = [name for name, on in (("normal", any(parent.macro.cells_per_stack)),
                                      ("reduction", parent.macro.reduction == "cell")) if on]
        if rng.random() < self.macro_prob or not used:
            name = draw(tuple(m for m in MACRO_MUTATIONS
                              if m not in MUTATION_OPTIONS or len(getattr(self, MUTATION_OPTIONS[m])) > 1), rng)
            return MACRO_MUTATIONS[name](self, parent, rng)
        child, what = self.cell_space(parent.num_blocks).mutate_cell(parent, rng.choice(used), rng)
        return MacroGenotype(child.normal, child.reduction, macro=parent.macro), what
