"""Published NASNet-style cells, exact, loadable by name.

Translated from the reference implementations' `operations`, `hiddenstate_indices` and
`used_hiddenstates` lists (tensorflow/tpu `amoeba_net/model_specs.py` for the AmoebaNets,
tensorflow/models `slim/nets/nasnet/nasnet_utils.py` for NASNet-A). In both, hidden state 0 is the
previous cell and 1 the one before, as here; the concat list holds the states marked unused.
"""

from __future__ import annotations

from searchspace.nasnet import Block, Cell, NasNetGenotype


def _cell(blocks: list[tuple[str, int, str, int]], concat: tuple[int, ...]) -> Cell:
    return Cell(tuple(Block((a, b), (op_a, op_b)) for op_a, a, op_b, b in blocks), concat)


AMOEBANET_A = NasNetGenotype(
    normal=_cell(
        [
            ("avg_pool_3x3", 0, "max_pool_3x3", 0),
            ("sep_conv_3x3", 1, "none", 1),
            ("none", 0, "avg_pool_3x3", 1),
            ("sep_conv_3x3", 0, "sep_conv_5x5", 2),
            ("avg_pool_3x3", 5, "sep_conv_3x3", 0),
        ],
        (1, 3, 4, 6),
    ),
    reduction=_cell(
        [
            ("sep_conv_3x3", 1, "avg_pool_3x3", 0),
            ("max_pool_3x3", 0, "sep_conv_7x7", 2),
            ("max_pool_3x3", 1, "max_pool_3x3", 0),
            ("sep_conv_3x3", 4, "conv_1x7_7x1", 0),
            ("avg_pool_3x3", 1, "sep_conv_7x7", 0),
        ],
        (2, 3, 4, 5, 6),
    ),
)

AMOEBANET_D = NasNetGenotype(
    normal=_cell(
        [
            ("conv_1x1", 1, "max_pool_3x3", 1),
            ("none", 1, "conv_1x7_7x1", 0),
            ("conv_1x1", 0, "conv_1x7_7x1", 0),
            ("max_pool_3x3", 2, "none", 2),
            ("avg_pool_3x3", 1, "conv_1x1", 5),
        ],
        (0, 3, 4, 6),
    ),
    reduction=_cell(
        [
            ("max_pool_2x2", 0, "max_pool_3x3", 0),
            ("none", 2, "conv_3x3", 1),
            ("conv_1x7_7x1", 2, "max_pool_3x3", 2),
            ("none", 3, "max_pool_2x2", 1),
            ("avg_pool_3x3", 2, "conv_1x1", 3),
        ],
        (4, 5, 6),
    ),
)

NASNET_A = NasNetGenotype(
    normal=_cell(
        [
            ("sep_conv_5x5", 0, "sep_conv_3x3", 1),
            ("sep_conv_5x5", 1, "sep_conv_3x3", 1),
            ("avg_pool_3x3", 0, "none", 1),
            ("avg_pool_3x3", 1, "avg_pool_3x3", 1),
            ("sep_conv_3x3", 0, "none", 0),
        ],
        (1, 2, 3, 4, 5, 6),
    ),
    reduction=_cell(
        [
            ("sep_conv_5x5", 0, "sep_conv_7x7", 1),
            ("max_pool_3x3", 0, "sep_conv_7x7", 1),
            ("avg_pool_3x3", 0, "sep_conv_5x5", 1),
            ("none", 3, "avg_pool_3x3", 2),
            ("sep_conv_3x3", 2, "max_pool_3x3", 0),
        ],
        (3, 4, 5, 6),
    ),
)

REFERENCES: dict[str, NasNetGenotype] = {
    "amoebanet_a": AMOEBANET_A,
    "amoebanet_d": AMOEBANET_D,
    "nasnet_a": NASNET_A,
}


def reference(name: str) -> NasNetGenotype:
    if name not in REFERENCES:
        raise ValueError(f"unknown reference genotype {name!r}; known: {sorted(REFERENCES)}")
    return REFERENCES[name]
