"""Names of the operations a cell may apply to a hidden state.

This module only names operations; building them is the trainer's job. It must not import
TensorFlow.
"""

from __future__ import annotations

# The eight operations searched over in Real et al. 2019 (AmoebaNet), in the paper's order.
NASNET_SEARCH_OPS: tuple[str, ...] = (
    "none",
    "avg_pool_3x3",
    "max_pool_3x3",
    "sep_conv_3x3",
    "sep_conv_5x5",
    "sep_conv_7x7",
    "dil_sep_conv_3x3",
    "conv_1x7_7x1",
)

# Operations that only the published reference cells use (AmoebaNet-D, NASNet-A).
REFERENCE_ONLY_OPS: tuple[str, ...] = ("conv_1x1", "conv_3x3", "max_pool_2x2")

# Every operation a NASNet-style genotype may name.
NASNET_OPS: tuple[str, ...] = NASNET_SEARCH_OPS + REFERENCE_ONLY_OPS

# NAS-Bench-201's five edge operations.
NASBENCH201_OPS: tuple[str, ...] = (
    "none",
    "skip_connect",
    "nor_conv_1x1",
    "nor_conv_3x3",
    "avg_pool_3x3",
)
