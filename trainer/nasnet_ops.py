"""The NASNet ops' Keras builders, one per kind of OpSpec (searchspace.ops.NASNET_OP_SPECS names
each op's kind; `OP_BUILDERS` is the table, nasbench's OP_MAP): each takes the network builder `b`
(trainer/nasnet.py's: its relu, bn, conv and relu_conv_bn helpers), the op's spec, the input, the
channels out and the stride ("same" padding), and a unique layer name. Must not assemble cells or
networks (trainer/nasnet.py does).
"""

from __future__ import annotations

from typing import Any, Callable

import keras
from keras import layers

from searchspace.ops import OpSpec


def _conv_init() -> keras.initializers.Initializer:
    """tpu's variance_scaling_initializer(mode='FAN_OUT'): He, truncated normal."""
    return keras.initializers.VarianceScaling(2.0, "fan_out", "truncated_normal")


# ---- op builders, one per kind of OpSpec: `filters` channels out, `strides` with "same" padding --


def _identity(b: Any, spec: OpSpec, x, filters: int, strides: int, name: str):
    """The input; ReLU-1x1-BN where the stride or the width must change."""
    if strides > 1 or x.shape[-1] != filters:
        x = b.relu_conv_bn(x, filters, 1, strides, name)
    return x


def _conv(b: Any, spec: OpSpec, x, filters: int, strides: int, name: str):
    """ReLU-conv-BN."""
    return b.relu_conv_bn(x, filters, spec.kernel, strides, name)


def _pool(b: Any, spec: OpSpec, x, filters: int, strides: int, name: str):
    """Average or max pooling; 1x1 conv-BN after it where the width changes."""
    pool = layers.AveragePooling2D if spec.kind == "avg_pool" else layers.MaxPooling2D
    in_filters = x.shape[-1]
    x = pool(spec.kernel, strides=strides, padding="same", name=f"{name}_pool")(x)
    if in_filters != filters:
        x = b.bn(b.conv(x, filters, 1, 1, name), name)
    return x


def _separable(x, filters: int, spec: OpSpec, strides: int, name: str, dilation: int = 1):
    return layers.SeparableConv2D(
        filters, spec.kernel, strides=strides, dilation_rate=dilation, padding="same", depth_multiplier=1,
        use_bias=False, depthwise_initializer=_conv_init(), pointwise_initializer=_conv_init(), name=name)(x)


def _sep_conv(b: Any, spec: OpSpec, x, filters: int, strides: int, name: str):
    """ReLU-SepConv-BN twice, the first strided."""
    for i, s in enumerate((strides, 1)):
        x = b.bn(_separable(b.relu(x, f"{name}_{i}"), filters, spec, s, f"{name}_{i}_sep"), f"{name}_{i}")
    return x


def _dil_sep_conv(b: Any, spec: OpSpec, x, filters: int, strides: int, name: str):
    """ReLU-SepConv(dilated)-BN, subsampled afterwards for a stride (Keras cannot stride a dilated conv)."""
    x = b.bn(_separable(b.relu(x, name), filters, spec, 1, f"{name}_sep", spec.dilation), name)
    if strides > 1:
        x = layers.AveragePooling2D(1, strides=strides, padding="same", name=f"{name}_subsample")(x)
    return x


def _bottlenecked(b: Any, x, filters: int, name: str, inner_op):
    """ReLU-1x1(filters/4)-BN-ReLU-inner_op-BN-ReLU-1x1(filters)-BN; without the 1x1s if filters/4 < 1."""
    bottleneck = filters // 4 >= 1
    inner = filters // 4 if bottleneck else filters
    if bottleneck:
        x = b.relu_conv_bn(x, inner, 1, 1, f"{name}_pre")
    x = b.bn(inner_op(b.relu(x, f"{name}_op"), inner), f"{name}_op")
    if bottleneck:
        x = b.relu_conv_bn(x, filters, 1, 1, f"{name}_post")
    return x


def _bottleneck_conv(b: Any, spec: OpSpec, x, filters: int, strides: int, name: str):
    """A kernel x kernel conv, bottlenecked."""
    k = spec.kernel
    return _bottlenecked(b, x, filters, name, lambda x, inner: b.conv(x, inner, k, strides, f"{name}_{k}x{k}"))


def _bottleneck_factorized_conv(b: Any, spec: OpSpec, x, filters: int, strides: int, name: str):
    """1 x kernel conv-BN-ReLU then kernel x 1 conv (each strided along its long side), bottlenecked."""
    k = spec.kernel

    def factorized(x, inner: int):
        x = b.conv(x, inner, (1, k), (1, strides), f"{name}_1x{k}")
        x = b.relu(b.bn(x, f"{name}_1x{k}"), f"{name}_1x{k}")
        return b.conv(x, inner, (k, 1), (strides, 1), f"{name}_{k}x1")

    return _bottlenecked(b, x, filters, name, factorized)


# One builder per op kind (nasbench's OP_MAP); searchspace.ops.NASNET_OP_SPECS names each op's kind.
OP_BUILDERS: dict[str, Callable[..., Any]] = {
    "identity": _identity,
    "conv": _conv,
    "avg_pool": _pool,
    "max_pool": _pool,
    "sep_conv": _sep_conv,
    "dil_sep_conv": _dil_sep_conv,
    "bottleneck_conv": _bottleneck_conv,
    "bottleneck_factorized_conv": _bottleneck_factorized_conv,
}
