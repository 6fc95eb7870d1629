"""Keras 3 builder: NASNet genotype -> NASNet-style network for small images.

3x3 conv stem; 3 stacks of `num_cells` normal cells with a reduction cell between stacks; the
width doubles at each reduction. Each cell projects its inputs to its width (ReLU-1x1 conv-BN),
reducing the one-before-previous input when its resolution does not match. Ops read from the cell
inputs are strided in reduction cells. This module must not train or read data.
"""

from __future__ import annotations

import keras
from keras import layers

from searchspace.nasnet import Cell, NasNetGenotype


def relu_conv_bn(x, filters: int, kernel, strides=1):
    x = layers.ReLU()(x)
    x = layers.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False)(x)
    return layers.BatchNormalization()(x)


def sep_conv(x, filters: int, kernel: int, strides: int):
    """Two ReLU-SepConv-BN stages; the stride is on the first."""
    for stage_strides in (strides, 1):
        x = layers.ReLU()(x)
        x = layers.SeparableConv2D(filters, kernel, strides=stage_strides, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
    return x


def dil_sep_conv(x, filters: int, strides: int):
    """ReLU-SepConv(3x3, dilation 2)-BN; a stride is taken by subsampling afterwards."""
    x = layers.ReLU()(x)
    x = layers.SeparableConv2D(filters, 3, dilation_rate=2, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    if strides > 1:
        x = layers.AveragePooling2D(1, strides=strides, padding="same")(x)
    return x


def conv_1x7_7x1(x, filters: int, strides: int):
    x = layers.ReLU()(x)
    x = layers.Conv2D(filters, (1, 7), strides=(1, strides), padding="same", use_bias=False)(x)
    x = layers.Conv2D(filters, (7, 1), strides=(strides, 1), padding="same", use_bias=False)(x)
    return layers.BatchNormalization()(x)


def factorized_reduce(x, filters: int):
    """Halve the resolution without losing half the pixels: two offset strided 1x1 convs."""
    x = layers.ReLU()(x)
    a = layers.AveragePooling2D(1, strides=2, padding="same")(x)
    a = layers.Conv2D(filters // 2, 1, use_bias=False)(a)
    b = layers.ZeroPadding2D(((0, 1), (0, 1)))(x)
    b = layers.Cropping2D(((1, 0), (1, 0)))(b)
    b = layers.AveragePooling2D(1, strides=2, padding="same")(b)
    b = layers.Conv2D(filters - filters // 2, 1, use_bias=False)(b)
    return layers.BatchNormalization()(layers.Concatenate()([a, b]))


def apply_op(op: str, x, filters: int, strides: int):
    """One registry op; inputs and outputs have `filters` channels."""
    if op == "none":
        return x if strides == 1 else relu_conv_bn(x, filters, 1, strides)
    if op in ("avg_pool_3x3", "max_pool_3x3", "max_pool_2x2"):
        pool = layers.AveragePooling2D if op.startswith("avg") else layers.MaxPooling2D
        return pool(int(op[-1]), strides=strides, padding="same")(x)
    if op.startswith("sep_conv_"):
        return sep_conv(x, filters, int(op[-1]), strides)
    if op == "dil_sep_conv_3x3":
        return dil_sep_conv(x, filters, strides)
    if op == "conv_1x7_7x1":
        return conv_1x7_7x1(x, filters, strides)
    if op in ("conv_1x1", "conv_3x3"):
        return relu_conv_bn(x, filters, int(op[-1]), strides)
    raise ValueError(f"op {op!r} has no builder")


def build_cell(cell: Cell, prev, prev_prev, filters: int, reduction: bool):
    """One cell: h0 = previous cell output, h1 = the one before."""
    h0 = relu_conv_bn(prev, filters, 1)
    if prev_prev.shape[1] != prev.shape[1]:
        h1 = factorized_reduce(prev_prev, filters)
    else:
        h1 = relu_conv_bn(prev_prev, filters, 1)
    states = [h0, h1]
    for block in cell.blocks:
        branches = [
            apply_op(op, states[h], filters, 2 if reduction and h < 2 else 1)
            for h, op in zip(block.inputs, block.ops)
        ]
        states.append(layers.Add()(branches))
    outputs = [
        factorized_reduce(states[h], filters) if reduction and h < 2 else states[h] for h in cell.concat
    ]
    return outputs[0] if len(outputs) == 1 else layers.Concatenate()(outputs)


def build_nasnet(
    genotype: NasNetGenotype,
    input_shape: tuple[int, ...],
    num_classes: int,
    num_cells: int = 1,
    filters: int = 8,
    stem_multiplier: int = 3,
    dropout: float = 0.0,
) -> keras.Model:
    """The small-image network: stem, 3 stacks of `num_cells` normal cells, 2 reduction cells."""
    if num_cells < 1 or filters < 2:
        raise ValueError(f"num_cells must be >= 1 and filters >= 2, got {num_cells} and {filters}")
    inputs = keras.Input(shape=input_shape)
    x = layers.Conv2D(filters * stem_multiplier, 3, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    prev_prev, prev = x, x
    width = filters
    for stack in range(3):
        if stack > 0:
            width *= 2
            prev_prev, prev = prev, build_cell(genotype.reduction, prev, prev_prev, width, True)
        for _ in range(num_cells):
            prev_prev, prev = prev, build_cell(genotype.normal, prev, prev_prev, width, False)
    x = layers.ReLU()(prev)
    x = layers.GlobalAveragePooling2D()(x)
    if dropout > 0:
        x = layers.Dropout(dropout)(x)
    outputs = layers.Dense(num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="nasnet")
