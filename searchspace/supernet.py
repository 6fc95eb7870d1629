"""What a weight-sharing supernet of the convnet space shares (`--evaluator=supernet`), as a space.

One supernet is one network at its largest: the seed's stem, activation, pool order, BN kind, head
and stage count (its *frame*), each stage at the seed's width, `max_convs` convs after its first and
a residual branch of two. A subnet takes the first channels of every stage (its width, one of the
space's stage widths up to the seed's), the first of its convs and the residual branch or not; with
a conv3x3 stem, the first channels of the stem too. Everything else is fixed by the frame, so the
subnets are exactly the genotypes of `supernet_space`, and each builds as a stand-alone convnet.

Why the frame is fixed, not shared: an activation or a pool order changes what every later weight
sees (no published supernet shares weights across activations; the pool's place does not share:
Javan et al. 2023 train one supernet per placement), and one supernet per combination would cost
the space's 4 x 2 x 2 x 3 = 48 trainings. The search over the frame stays with `--evaluator=train`.
Pure Python: no TensorFlow.
"""

from __future__ import annotations

from dataclasses import replace

from searchspace.convnet import RESIDUALS, ConvNetGenotype, ConvNetSpace, Stage

ELASTIC_MUTATIONS = ("stem_width", "width", "convs", "residual")  # what a subnet may change of another


def supernet_space(seed: ConvNetGenotype, base: ConvNetSpace) -> ConvNetSpace:
    """The subnets of the supernet `seed` frames: `base`'s widths up to the seed's in each stage
    (and its stem's), up to `base.max_convs` convs, a residual or not; one option for the rest."""
    widths = tuple(w for w in base.stage_widths if w <= max(s.width for s in seed.stages))
    if any(s.width not in widths for s in seed.stages):
        raise ValueError(f"evaluator supernet: the seed {seed.key()} has a stage width outside the space's "
                         f"{list(base.stage_widths)}; seed the search with a net of the space's widths")
    stem_widths = tuple(w for w in base.stem_widths if w <= seed.stem_width) or (seed.stem_width,)
    if seed.stem == "whiten2x2":
        stem_widths = base.stem_widths
    elif seed.stem_width not in stem_widths:
        stem_widths = tuple(sorted(set(stem_widths) | {seed.stem_width}))
    return ConvNetSpace(stems=(seed.stem,), stem_widths=stem_widths, activations=(seed.activation,),
                        pool_orders=(seed.pool_order,), bn_scales=(seed.bn_scale,), head_pools=(seed.head_pool,),
                        head_divisors=(seed.head_divisor,), stage_widths=widths, stage_counts=(len(seed.stages),),
                        max_convs=max(base.max_convs, max(s.convs for s in seed.stages)),
                        max_stage_widths=tuple(s.width for s in seed.stages), identity_prob=base.identity_prob,
                        mutations=tuple(m for m in base.mutations if m in ELASTIC_MUTATIONS) or ELASTIC_MUTATIONS)


FIXED = ("stem", "activation", "pool_order", "bn_scale", "head_pool", "head_divisor")  # a supernet's frame


def not_shared(frame: ConvNetGenotype, genotype: ConvNetGenotype) -> list[str]:
    """What `genotype` has other than the supernet `frame` fixes (empty: it may be one of its subnets)."""
    wrong = [name for name in FIXED if getattr(genotype, name) != getattr(frame, name)]
    return wrong + (["stage count"] if len(genotype.stages) != len(frame.stages) else [])


def frame_of(space: ConvNetSpace) -> ConvNetGenotype:
    """The supernet itself: the largest subnet of a `supernet_space` (every stage at its widest, with
    all its convs and the residual branch; the widest stem)."""
    stages = tuple(Stage(w, space.max_convs, max(RESIDUALS)) for w in space.max_stage_widths[:space.stage_counts[0]])
    return ConvNetGenotype(space.stems[0], space.stem_widths[-1] if space.stems[0] == "conv3x3" else 0,
                           space.activations[0], stages, space.pool_orders[0], space.bn_scales[0],
                           space.head_pools[0], space.head_divisors[0])


def smallest_subnet(space: ConvNetSpace) -> ConvNetGenotype:
    """The sandwich rule's other end: every stage at its narrowest, no further convs, no residual."""
    largest = frame_of(space)
    stages = tuple(Stage(space.stage_options(i)[0], 0, 0) for i in range(len(largest.stages)))
    return replace(largest, stages=stages, stem_width=space.stem_widths[0] if largest.stem == "conv3x3" else 0)


def is_supernet_space(space: object) -> bool:
    """Whether `space` is a supernet's (a convnet space with per-stage maximum widths)."""
    return isinstance(space, ConvNetSpace) and bool(space.max_stage_widths)
