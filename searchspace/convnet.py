"""Plain convolutional networks as genotypes (`--space=convnet`): the space of the fast CIFAR-10 nets,
which holds airbench94 and Page's ResNet-9 exactly (their parameters and multiply-adds: tests).

A network is a stem, two to four stages, each halving the map once, and a head:

- `stem`: "conv3x3", a 3x3 conv of `stem_width` filters, BN and the activation (ResNet-9's prep);
  or "whiten2x2", airbench94's 2x2 conv without padding whose frozen kernel is the whitening of the
  training images' 2x2 patches (2 x 4 x channels filters, their number fixed: `stem_width` is 0),
  its bias trained, then the activation (no BN);
- `activation` everywhere: relu, leaky_relu (as cheap on a CPU), gelu (airbench94's, exact), silu;
- each stage: a 3x3 conv of `width` filters that need not double, and a 2x2 max pool, in the
  network's `pool_order`: "conv_pool_bn" (conv, pool, BN, activation: airbench94's, the BN on a
  quarter of the pixels) or "conv_bn_pool" (conv, BN, activation, pool: ResNet-9's); then `convs`
  plain conv-BN-activation layers (airbench94: 1), then, with `residual` 2, a residual branch of two
  (ResNet-9's x + f(x), no activation after the sum);
- `bn_scale`: whether BN learns a scale (ResNet-9) or only its offset (airbench94);
- head: a global `head_pool` (max or mean) and a linear layer without bias, divided by
  `head_divisor` (airbench94: 9, ResNet-9: 8).
Convs have no bias. trainer/convnet.py builds the network. A mutation changes one choice (ordinal
ones by one step); the key is canonical. Pure Python: no TensorFlow, Ray or global random state.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from searchspace.mutations import check_mutations, mutations_config

log = logging.getLogger(__name__)

SPACE_NAME = "convnet"
STEMS = ("conv3x3", "whiten2x2")
ACTIVATIONS = ("relu", "leaky_relu", "gelu", "silu")  # Keras's names
POOL_ORDERS = ("conv_pool_bn", "conv_bn_pool")
HEAD_POOLS = ("max", "mean")
HEAD_DIVISORS = (1, 8, 9)
RESIDUALS = (0, 2)
STEM_WIDTHS = (16, 24, 32, 48, 64, 96, 128)
STAGE_WIDTHS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
STAGE_COUNTS = (2, 3, 4)
MAX_CONVS = 2


def _whole(value: Any, name: str, least: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError(f"convnet, {name}: a whole number of {least} or more, got {value!r}")
    return value


def _one_of(value: Any, name: str, known: tuple) -> Any:
    if value not in known or isinstance(value, bool) != isinstance(known[0], bool):
        raise ValueError(f"convnet, {name}: unknown {value!r}; known: {list(known)}")
    return value


@dataclass(frozen=True)
class Stage:
    """One resolution: a conv of `width` and the 2x2 max pool, `convs` more convs, a residual branch."""

    width: int
    convs: int = 0
    residual: int = 0

    def __post_init__(self) -> None:
        _whole(self.width, "stage width", 1)
        _whole(self.convs, "stage convs", 0)
        _one_of(self.residual, "stage residual", RESIDUALS)

    def key(self) -> str:
        return f"{self.width}c{self.convs}r{self.residual}"

    def to_json(self) -> dict[str, int]:
        return {"width": self.width, "convs": self.convs, "residual": self.residual}


@dataclass(frozen=True)
class ConvNetGenotype:
    """A plain conv network (the module docstring says what each field means); frozen, validated."""

    stem: str
    stem_width: int
    activation: str
    stages: tuple[Stage, ...]
    pool_order: str = "conv_pool_bn"
    bn_scale: bool = False
    head_pool: str = "max"
    head_divisor: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(self.stages))
        _one_of(self.stem, "stem", STEMS)
        if self.stem == "whiten2x2" and self.stem_width != 0:
            raise ValueError(f"convnet, stem_width: 0 with stem whiten2x2 (its width is the data's), got {self.stem_width!r}")
        if self.stem == "conv3x3":
            _whole(self.stem_width, "stem_width", 1)
        _one_of(self.activation, "activation", ACTIVATIONS)
        if not self.stages or not all(isinstance(s, Stage) for s in self.stages):
            raise ValueError("convnet, stages: one or more")
        _one_of(self.pool_order, "pool_order", POOL_ORDERS)
        if not isinstance(self.bn_scale, bool):
            raise ValueError(f"convnet, bn_scale: true or false, got {self.bn_scale!r}")
        _one_of(self.head_pool, "head_pool", HEAD_POOLS)
        _whole(self.head_divisor, "head_divisor", 1)

    def key(self) -> str:
        stem = self.stem if self.stem == "whiten2x2" else f"{self.stem}x{self.stem_width}"
        stages = ".".join(s.key() for s in self.stages)
        return (f"convnet[stem={stem};act={self.activation};stages={stages};order={self.pool_order};"
                f"bn_scale={int(self.bn_scale)};head={self.head_pool}/{self.head_divisor}]")

    def __str__(self) -> str:
        return self.key()

    def describe(self) -> str:
        stem = ("2x2 whitening conv" if self.stem == "whiten2x2" else f"3x3 conv of {self.stem_width}")
        stages = "; ".join(f"{s.width} wide, {1 + s.convs} conv{'s' if s.convs else ''}"
                           f"{', residual of 2' if s.residual else ''}" for s in self.stages)
        return (f"convnet: stem {stem}, {self.activation}; stages: {stages} ({self.pool_order}, BN "
                f"{'with' if self.bn_scale else 'without'} scale); head: global {self.head_pool} pool, linear / "
                f"{self.head_divisor}")

    def to_json(self) -> dict[str, Any]:
        return {"space": SPACE_NAME, "stem": self.stem, "stem_width": self.stem_width, "activation": self.activation,
                "stages": [s.to_json() for s in self.stages], "pool_order": self.pool_order,
                "bn_scale": self.bn_scale, "head_pool": self.head_pool, "head_divisor": self.head_divisor}

    @classmethod
    def from_json(cls, data: Any) -> "ConvNetGenotype":
        if not isinstance(data, dict) or data.get("space") != SPACE_NAME:
            raise ValueError(f"convnet genotype: a JSON object with \"space\": \"{SPACE_NAME}\"")
        fields = {"stem", "stem_width", "activation", "stages", "pool_order", "bn_scale", "head_pool", "head_divisor"}
        unknown, missing = sorted(set(data) - fields - {"space"}), sorted(fields - set(data))
        if unknown or missing:
            raise ValueError(f"convnet genotype: unknown fields {unknown}, missing {missing}")
        if not isinstance(data["stages"], list) or not all(isinstance(s, dict) for s in data["stages"]):
            raise ValueError("convnet, stages: a list of objects (width, convs, residual)")
        try:
            stages = tuple(Stage(**s) for s in data["stages"])
        except TypeError as err:
            raise ValueError(f"convnet, stages: {err}") from None
        return cls(**{**{k: data[k] for k in fields}, "stages": stages})

    def smallest_input(self) -> int:
        """The least image side the network takes: a pixel left after its stem and pools."""
        return 2 ** len(self.stages) + (1 if self.stem == "whiten2x2" else 0)


def _step(values: tuple, current: Any, rng: random.Random) -> Any:
    """A neighbour of `current` in the ordered `values` (the nearest one when it is not there)."""
    i = values.index(current) if current in values else min(range(len(values)), key=lambda j: abs(values[j] - current))
    moves = [j for j in (i - 1, i + 1) if 0 <= j < len(values) and values[j] != current]
    return values[rng.choice(moves)]


def _other(values: tuple, current: Any, rng: random.Random) -> Any:
    return rng.choice([v for v in values if v != current])


def _stage_change(space: "ConvNetSpace", g: ConvNetGenotype, rng: random.Random, what: str) -> tuple[ConvNetGenotype, str]:
    stages = range(len(g.stages))
    if what == "width":  # a supernet's stage may have one width only
        stages = [j for j in stages if len(space.stage_options(j)) > 1]
    i = rng.choice(stages)  # the same draw as randrange(len(stages))
    stage = g.stages[i]
    if what == "width":
        new = replace(stage, width=_step(space.stage_options(i), stage.width, rng))
    elif what == "convs":
        new = replace(stage, convs=_step(tuple(range(space.max_convs + 1)), stage.convs, rng))
    else:
        new = replace(stage, residual=_other(RESIDUALS, stage.residual, rng))
    stages = g.stages[:i] + (new,) + g.stages[i + 1:]
    return replace(g, stages=stages), f"stage {i} {what} {getattr(stage, what)} -> {getattr(new, what)}"


def _stages(space: "ConvNetSpace", g: ConvNetGenotype, rng: random.Random) -> tuple[ConvNetGenotype, str]:
    """One stage more (drawn as sampling draws one) or fewer (the last)."""
    new = _step(space.stage_counts, len(g.stages), rng)
    stages = g.stages[:new] + tuple(space.sample_stage(rng, i) for i in range(len(g.stages), new))
    return replace(g, stages=stages), f"stages {len(g.stages)} -> {new}"


def _stem(space: "ConvNetSpace", g: ConvNetGenotype, rng: random.Random) -> tuple[ConvNetGenotype, str]:
    new = _other(space.stems, g.stem, rng)
    width = rng.choice(space.stem_widths) if new == "conv3x3" else 0
    return replace(g, stem=new, stem_width=width), f"stem {g.stem} -> {new}"


def _stem_width(space: "ConvNetSpace", g: ConvNetGenotype, rng: random.Random) -> tuple[ConvNetGenotype, str]:
    new = _step(space.stem_widths, g.stem_width, rng)
    return replace(g, stem_width=new), f"stem_width {g.stem_width} -> {new}"


def _choice(name: str, options: str) -> Callable[..., tuple[ConvNetGenotype, str]]:
    def mutate(space: "ConvNetSpace", g: ConvNetGenotype, rng: random.Random) -> tuple[ConvNetGenotype, str]:
        old = getattr(g, name)
        new = _other(getattr(space, options), old, rng)
        return replace(g, **{name: new}), f"{name} {old} -> {new}"
    return mutate


# One entry per mutation: (space, genotype, rng) -> (child, what changed); each changes the network.
MUTATIONS: dict[str, Callable[..., tuple[ConvNetGenotype, str]]] = {
    "stem": _stem, "stem_width": _stem_width, "activation": _choice("activation", "activations"),
    "pool_order": _choice("pool_order", "pool_orders"), "bn_scale": _choice("bn_scale", "bn_scales"),
    "head_pool": _choice("head_pool", "head_pools"), "head_divisor": _choice("head_divisor", "head_divisors"),
    "stages": _stages, "width": lambda s, g, r: _stage_change(s, g, r, "width"),
    "convs": lambda s, g, r: _stage_change(s, g, r, "convs"),
    "residual": lambda s, g, r: _stage_change(s, g, r, "residual"),
}
# The space's option field that a mutation needs two or more of (the rest always have two)
MUTATION_OPTIONS = {"stem": "stems", "activation": "activations", "pool_order": "pool_orders",
                    "bn_scale": "bn_scales", "head_pool": "head_pools", "head_divisor": "head_divisors",
                    "stages": "stage_counts", "width": "stage_widths", "stem_width": "stem_widths"}


@dataclass(frozen=True)
class ConvNetSpace:
    """Uniform sampling of every choice; one mutation per child, of the kinds `mutations` names
    (identity with `identity_prob`)."""

    stems: tuple[str, ...] = STEMS
    stem_widths: tuple[int, ...] = STEM_WIDTHS
    activations: tuple[str, ...] = ACTIVATIONS
    pool_orders: tuple[str, ...] = POOL_ORDERS
    bn_scales: tuple[bool, ...] = (False, True)
    head_pools: tuple[str, ...] = HEAD_POOLS
    head_divisors: tuple[int, ...] = HEAD_DIVISORS
    stage_widths: tuple[int, ...] = STAGE_WIDTHS
    stage_counts: tuple[int, ...] = STAGE_COUNTS
    max_convs: int = MAX_CONVS
    max_stage_widths: tuple[int, ...] = ()  # stage i's widths at most max_stage_widths[i] (a supernet's)
    identity_prob: float = 0.05
    mutations: tuple[str, ...] = tuple(MUTATIONS)
    name: str = field(default=SPACE_NAME, init=False)

    def __post_init__(self) -> None:
        known = {"stems": STEMS, "activations": ACTIVATIONS, "pool_orders": POOL_ORDERS, "bn_scales": (False, True),
                 "head_pools": HEAD_POOLS}
        for name in ("stems", "stem_widths", "activations", "pool_orders", "bn_scales", "head_pools",
                     "head_divisors", "stage_widths", "stage_counts"):
            values = tuple(getattr(self, name))
            object.__setattr__(self, name, values)
            if not values or len(set(values)) < len(values) or any(v not in known.get(name, values) for v in values):
                raise ValueError(f"{name}: one or more distinct of {list(known.get(name, values))}, got {list(values)}")
        for name in ("stem_widths", "head_divisors", "stage_widths", "stage_counts"):
            values = getattr(self, name)
            for value in values:
                _whole(value, name, 1)
            if list(values) != sorted(values):
                raise ValueError(f"{name}: increasing, got {list(values)}")
        _whole(self.max_convs, "max_convs", 0)
        object.__setattr__(self, "max_stage_widths", tuple(self.max_stage_widths))
        if self.max_stage_widths and (len(self.max_stage_widths) < max(self.stage_counts) or any(
                _whole(w, "max_stage_widths", 1) < self.stage_widths[0] for w in self.max_stage_widths)):
            raise ValueError(f"max_stage_widths: one a stage ({max(self.stage_counts)}), each at least the least "
                             f"stage width {self.stage_widths[0]}, got {list(self.max_stage_widths)}")
        object.__setattr__(self, "mutations", check_mutations(self.mutations, MUTATIONS))
        if not any(self.applies(m) for m in self.mutations):
            raise ValueError(f"mutations: none of {list(self.mutations)} can change a network of this space "
                             "(each needs two or more options in it; stem_width needs the conv3x3 stem, convs "
                             "max_convs of 1 or more)")
        if not 0.0 <= self.identity_prob <= 1.0:
            raise ValueError(f"identity_prob: in [0, 1], got {self.identity_prob}")

    def to_config(self) -> dict[str, Any]:
        return {"name": self.name, **{k: list(v) if isinstance(v, tuple) else v
                                      for k, v in self.__dict__.items() if k not in ("name", "mutations")
                                      and (k != "max_stage_widths" or v)},  # a journal before it: none
                **mutations_config(self.mutations, tuple(MUTATIONS))}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "ConvNetSpace":
        return cls(**{k: v for k, v in config.items() if k != "name"})

    def genotype_from_json(self, data: Any) -> ConvNetGenotype:
        """The genotype of `data`; a ValueError for one with more stages than the space's images take."""
        genotype = ConvNetGenotype.from_json(data)
        if len(genotype.stages) > max(self.stage_counts):
            raise ValueError(f"convnet, stages: {len(genotype.stages)}, more than this space's images take "
                             f"({max(self.stage_counts)})")
        for i, stage in enumerate(genotype.stages):
            if self.max_stage_widths and stage.width > self.max_stage_widths[i]:
                raise ValueError(f"convnet, stage {i} width: {stage.width}, over this space's "
                                 f"{self.max_stage_widths[i]} (its supernet's)")
        return genotype

    def stage_options(self, index: int) -> tuple[int, ...]:
        """The widths stage `index` may have: stage_widths, up to max_stage_widths[index] when given."""
        if not self.max_stage_widths:
            return self.stage_widths
        return tuple(w for w in self.stage_widths if w <= self.max_stage_widths[index])

    def sample_stage(self, rng: random.Random, index: int = 0) -> Stage:
        return Stage(rng.choice(self.stage_options(index)), rng.randint(0, self.max_convs), rng.choice(RESIDUALS))

    def sample(self, rng: random.Random) -> ConvNetGenotype:
        stem = rng.choice(self.stems)
        stem_width = rng.choice(self.stem_widths) if stem == "conv3x3" else 0
        return ConvNetGenotype(stem, stem_width, rng.choice(self.activations),
                               tuple(self.sample_stage(rng, i) for i in range(rng.choice(self.stage_counts))),
                               rng.choice(self.pool_orders), rng.choice(self.bn_scales), rng.choice(self.head_pools),
                               rng.choice(self.head_divisors))

    def mutate(self, parent: ConvNetGenotype, rng: random.Random) -> tuple[ConvNetGenotype, str]:
        """Identity with `identity_prob`; else one of the space's `mutations`, drawn uniformly among
        those that apply (stem_width with a conv3x3 stem; a choice the space offers two or more of)."""
        if rng.random() < self.identity_prob:
            return parent, "identity"
        usable = [m for m in self.mutations if self.applies(m, parent)]
        if not usable:
            log.warning("%s: none of the mutations %s applies to it; its child is the same network",
                        parent.key(), list(self.mutations))
            return parent, "identity"
        return MUTATIONS[rng.choice(usable)](self, parent, rng)

    def applies(self, mutation: str, parent: ConvNetGenotype | None = None) -> bool:
        """Whether `mutation` can change `parent` (None: some network of this space): a choice the space
        offers two or more of; stem_width with a conv3x3 stem; convs with max_convs of 1 or more."""
        if mutation in MUTATION_OPTIONS and len(getattr(self, MUTATION_OPTIONS[mutation])) < 2:
            return False
        if mutation == "stem_width":
            return parent.stem == "conv3x3" if parent is not None else "conv3x3" in self.stems
        if mutation == "width" and self.max_stage_widths:
            stages = len(parent.stages) if parent else max(self.stage_counts)
            return any(len(self.stage_options(i)) > 1 for i in range(stages))
        return mutation != "convs" or self.max_convs > 0


def convnet_space(image_size: int, mutations: tuple[str, ...] = ()) -> ConvNetSpace:
    """The space for images of `image_size` pixels a side: as many stages as leave a pixel after
    the stem (the whitening's 2x2 conv takes one) and the pools; children get only `mutations`
    (names of MUTATIONS; empty: all). ValueError for images too small for two."""
    counts = tuple(n for n in STAGE_COUNTS if 2 ** n + 1 <= image_size)
    if not counts:
        raise ValueError(f"space convnet: images of {image_size} pixels are too small for {STAGE_COUNTS[0]} stages "
                         f"(at least {2 ** STAGE_COUNTS[0] + 1}; give a larger --image_size)")
    return ConvNetSpace(stage_counts=counts, mutations=tuple(mutations) or tuple(MUTATIONS))


# The published nets, exactly (their parameters and multiply-adds: tests/test_convnet.py)
AIRBENCH94 = ConvNetGenotype("whiten2x2", 0, "gelu", (Stage(64, 1), Stage(256, 1), Stage(256, 1)),
                             "conv_pool_bn", bn_scale=False, head_pool="max", head_divisor=9)
RESNET9 = ConvNetGenotype("conv3x3", 64, "relu", (Stage(128, 0, 2), Stage(256, 0, 0), Stage(512, 0, 2)),
                          "conv_bn_pool", bn_scale=True, head_pool="max", head_divisor=8)
# airbench94 with ReLU: what search_cifar10_cpu_activation.cfg found (a named seed for later searches)
AIRBENCH94_RELU = replace(AIRBENCH94, activation="relu")
CONVNET_REFERENCES = {"airbench94": AIRBENCH94, "airbench94_relu": AIRBENCH94_RELU, "resnet9": RESNET9}


def family_network(model: str, width_multiplier: float | None = None) -> ConvNetGenotype | None:
    """The convnet genotype of a model family (trainer/models.py's table) at a width: airbench94,
    airbench94_relu and resnet9; None for a family the space does not hold (resnet20, the cell networks)."""
    base = CONVNET_REFERENCES.get(model)
    return None if base is None else at_width(base, width_multiplier)


def at_width(genotype: ConvNetGenotype, width_multiplier: float | None = None) -> ConvNetGenotype:
    """The network `genotype` builds at a width multiplier, as the builder rounds widths
    (max(1, round(w * width)))."""
    width = float(width_multiplier or 1.0)

    def scaled(w: int) -> int:
        return max(1, round(w * width))

    stages = tuple(replace(s, width=scaled(s.width)) for s in genotype.stages)
    return replace(genotype, stem_width=scaled(genotype.stem_width) if genotype.stem_width else 0, stages=stages)


def differences(before: ConvNetGenotype, after: ConvNetGenotype) -> list[str]:
    """What `after` changed of `before`, one phrase a field (`activation gelu -> silu`, `stage 1 width
    256 -> 192`, in the mutations' words); empty when they are the same network."""
    said = []
    stem = (lambda g: g.stem if g.stem == "whiten2x2" else f"conv3x3 of {g.stem_width}")
    if stem(before) != stem(after):
        said.append(f"stem {stem(before)} -> {stem(after)}")
    for name in ("activation", "pool_order", "bn_scale", "head_pool", "head_divisor"):
        if getattr(before, name) != getattr(after, name):
            said.append(f"{name} {getattr(before, name)} -> {getattr(after, name)}")
    if len(before.stages) != len(after.stages):
        said.append(f"stages {len(before.stages)} -> {len(after.stages)}")
    for i, (a, b) in enumerate(zip(before.stages, after.stages)):
        said += [f"stage {i} {what} {getattr(a, what)} -> {getattr(b, what)}"
                 for what in ("width", "convs", "residual") if getattr(a, what) != getattr(b, what)]
    return said
