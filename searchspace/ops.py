"""The operations a cell may apply to a hidden state: one table, NASNET_OP_SPECS, name -> OpSpec.

An entry says what the op is (its kind, kernel size and dilation), not how it is built: the
trainer builds every op of a kind with the one builder its `OP_BUILDERS` table (trainer/nasnet_ops.py)
holds for that kind. So an op of a known kind is one entry here; a new kind is also one builder
there (docs/extending-op.md). This module must not import TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpSpec:
    """What an op computes. `kind` is the key of its builder in trainer/nasnet_ops.py's OP_BUILDERS:

    - "identity": the input (a ReLU-1x1 conv-BN where the stride or width must change);
    - "conv": ReLU-conv(kernel x kernel)-BN;
    - "avg_pool", "max_pool": a kernel x kernel pool (then 1x1 conv-BN where the width changes);
    - "sep_conv": ReLU-separable conv(kernel)-BN, twice;
    - "dil_sep_conv": ReLU-separable conv(kernel, `dilation`)-BN, once;
    - "bottleneck_conv": a kernel x kernel conv between 1x1 convs to and from a quarter of the width;
    - "bottleneck_factorized_conv": the same with 1 x kernel then kernel x 1 convs.
    """

    kind: str
    kernel: int = 1
    dilation: int = 1

    def __post_init__(self) -> None:
        if not self.kind or self.kernel < 1 or self.dilation < 1:
            raise ValueError(f"OpSpec: needs a kind and kernel, dilation >= 1, got {self}")


# One entry per op a NASNet-style genotype may name: the paper's eight, in its order, then the
# ops only the published reference cells (AmoebaNet-D, NASNet-A) use.
NASNET_OP_SPECS: dict[str, OpSpec] = {
    "none": OpSpec("identity"),
    "avg_pool_3x3": OpSpec("avg_pool", 3),
    "max_pool_3x3": OpSpec("max_pool", 3),
    "sep_conv_3x3": OpSpec("sep_conv", 3),
    "sep_conv_5x5": OpSpec("sep_conv", 5),
    "sep_conv_7x7": OpSpec("sep_conv", 7),
    "dil_sep_conv_3x3": OpSpec("dil_sep_conv", 3, dilation=2),
    "conv_1x7_7x1": OpSpec("bottleneck_factorized_conv", 7),
    "conv_1x1": OpSpec("conv", 1),
    "conv_3x3": OpSpec("bottleneck_conv", 3),
    "max_pool_2x2": OpSpec("max_pool", 2),
    "plain_conv_3x3": OpSpec("conv", 3),  # ReLU-3x3 conv-BN at full width (conv_3x3 is tpu's bottleneck)
}

# The eight operations searched over in Real et al. 2019 (AmoebaNet), in the paper's order: the
# default ops of NasNetSpace (adding one changes every seed's proposals).
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

# Operations that only the published reference cells use (AmoebaNet-D, NASNet-A); `--ops` may
# search them, and plain_conv_3x3, too.
REFERENCE_ONLY_OPS: tuple[str, ...] = ("conv_1x1", "conv_3x3", "max_pool_2x2")

# Every op a NASNet-style genotype may name, in the table's order.
NASNET_OPS: tuple[str, ...] = tuple(NASNET_OP_SPECS)

# NAS-Bench-201's five edge operations (looked up in its tables, never built here).
NASBENCH201_OPS: tuple[str, ...] = (
    "none",
    "skip_connect",
    "nor_conv_1x1",
    "nor_conv_3x3",
    "avg_pool_3x3",
)
