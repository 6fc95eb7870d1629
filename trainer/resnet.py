"""Keras 3 ResNets: the ImageNet ResNet v1.5 (He et al. 2016, with the bottleneck's stride on its
3x3 conv), and the CIFAR ResNets of the same paper's section 4.2 (`build_cifar_resnet`).

Stem: 7x7/2 conv, BN, ReLU, 3x3/2 max pool. Basic blocks for depths 18 and 34, bottleneck blocks
(4x expansion) for 50, 101, 152 and 200; convs have no bias; a 1x1 conv + BN projection shortcut
where the shape changes; the last BN of each residual branch starts with gamma = 0. Head: global
average pool and a float32 Dense producing LOGITS, so mixed-precision policies work.
Strided convs pad explicitly ((k-1)//2 each side, as torchvision and TF's official ResNet), so
the layer count and figures match the published 25,557,032 parameters of ResNet-50.

CIFAR ResNet-(6n+2), n = 3, 5, 7, 9, 18 for depths 20, 32, 44, 56, 110: a 3x3 conv with 16
filters, BN and ReLU, then three stages of n basic blocks with 16, 32 and 64 filters (the first
block of stages 2 and 3 strides by 2), global average pooling and the logits. Shortcuts are the
paper's option A, identities throughout: where a block halves the map and doubles the channels,
the shortcut takes every other pixel and pads the new channels with zeros (no parameters), so the
sizes are the paper's (ResNet-20 0.27M parameters, ResNet-56 0.85M, ResNet-110 1.7M).

ResNet-9 (David Page, "How to train your ResNet", the DAWNBench CIFAR-10 winner of 2018): a 3x3
prep conv of 64; conv 128 + 2x2 max pool + a residual of two 128 convs; conv 256 + max pool; conv
512 + max pool + a residual of two 512 convs; global max pool; a bias-free linear layer scaled by
0.125. Batch norm and ReLU after every convolution; identity residuals (x + f(x)), no ReLU after
the sum. 6,573,120 parameters at width 1 for 10 classes; `width_multiplier` scales every width.

This module must not train, read data or add weight decay: it only builds the network.
"""

from __future__ import annotations

import keras
from keras import layers

STAGE_BLOCKS: dict[int, tuple[int, int, int, int]] = {
    18: (2, 2, 2, 2),
    34: (3, 4, 6, 3),
    50: (3, 4, 6, 3),
    101: (3, 4, 23, 3),
    152: (3, 8, 36, 3),
    200: (3, 24, 36, 3),
}
STAGE_WIDTHS = (64, 128, 256, 512)
CIFAR_BLOCKS = {20: 3, 32: 5, 44: 7, 56: 9, 110: 18}  # n basic blocks per stage: depth 6n + 2
CIFAR_WIDTHS = (16, 32, 64)
BN_MOMENTUM, BN_EPSILON = 0.9, 1e-5


def _conv(x, filters: int, kernel: int, strides: int, name: str):
    if strides > 1 and kernel > 1:
        pad = (kernel - 1) // 2
        x = layers.ZeroPadding2D(((pad, kernel - 1 - pad), (pad, kernel - 1 - pad)), name=f"{name}_pad")(x)
    return layers.Conv2D(
        filters, kernel, strides=strides, padding="valid" if strides > 1 else "same", use_bias=False,
        kernel_initializer=keras.initializers.HeNormal(), name=f"{name}_conv",
    )(x)


def _bn(x, name: str, zero_gamma: bool = False):
    return layers.BatchNormalization(
        momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name=f"{name}_bn",
        gamma_initializer="zeros" if zero_gamma else "ones",
    )(x)


def _block(x, width: int, strides: int, bottleneck: bool, name: str):
    """One residual block; its output has `width` (basic) or 4 * `width` (bottleneck) channels."""
    out_filters = 4 * width if bottleneck else width
    shortcut = x
    if strides > 1 or x.shape[-1] != out_filters:
        shortcut = _bn(_conv(x, out_filters, 1, strides, f"{name}_proj"), f"{name}_proj")
    if bottleneck:
        y = layers.ReLU(name=f"{name}_1_relu")(_bn(_conv(x, width, 1, 1, f"{name}_1"), f"{name}_1"))
        y = layers.ReLU(name=f"{name}_2_relu")(_bn(_conv(y, width, 3, strides, f"{name}_2"), f"{name}_2"))
        y = _bn(_conv(y, out_filters, 1, 1, f"{name}_3"), f"{name}_3", zero_gamma=True)
    else:
        y = layers.ReLU(name=f"{name}_1_relu")(_bn(_conv(x, width, 3, strides, f"{name}_1"), f"{name}_1"))
        y = _bn(_conv(y, width, 3, 1, f"{name}_2"), f"{name}_2", zero_gamma=True)
    return layers.ReLU(name=f"{name}_out")(layers.Add(name=f"{name}_add")([shortcut, y]))


def build_resnet(depth: int, input_shape: tuple[int, ...], num_classes: int) -> keras.Model:
    """ResNet-`depth` v1.5 producing logits (float32)."""
    if depth not in STAGE_BLOCKS:
        raise ValueError(f"ResNet depth: unknown {depth}; known: {sorted(STAGE_BLOCKS)}")
    if num_classes < 1 or len(input_shape) != 3:
        raise ValueError(f"need num_classes >= 1 and an (H, W, C) input shape, got {num_classes}, "
                         f"{input_shape}")
    bottleneck = depth >= 50
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x = layers.ReLU(name="stem_relu")(_bn(_conv(inputs, 64, 7, 2, "stem"), "stem"))
    x = layers.MaxPooling2D(3, strides=2, padding="same", name="stem_pool")(x)
    for stage, (blocks, width) in enumerate(zip(STAGE_BLOCKS[depth], STAGE_WIDTHS)):
        for b in range(blocks):
            strides = 2 if stage > 0 and b == 0 else 1
            x = _block(x, width, strides, bottleneck, f"stage{stage + 1}_block{b + 1}")
    x = layers.GlobalAveragePooling2D(name="final_pool")(x)
    logits = layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name=f"resnet{depth}")


@keras.saving.register_keras_serializable(package="amoeba")
class ZeroPadShortcut(layers.Layer):
    """Option A's shortcut where a block halves the map and doubles the channels: every other
    pixel of each row and column, and zeros for the new channels. No parameters."""

    def __init__(self, channels: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.channels = channels

    def call(self, x):
        x = x[:, ::2, ::2, :]
        extra = self.channels - x.shape[-1]
        return keras.ops.pad(x, [[0, 0], [0, 0], [0, 0], [extra // 2, extra - extra // 2]])

    def compute_output_shape(self, input_shape):
        height, width = ((None if d is None else (d + 1) // 2) for d in input_shape[1:3])
        return (input_shape[0], height, width, self.channels)

    def get_config(self) -> dict:
        return {**super().get_config(), "channels": self.channels}


def build_cifar_resnet(depth: int, input_shape: tuple[int, ...], num_classes: int) -> keras.Model:
    """CIFAR ResNet-`depth` (He et al. 2016, section 4.2; option A shortcuts) producing logits."""
    if depth not in CIFAR_BLOCKS:
        raise ValueError(f"CIFAR ResNet depth: unknown {depth}; known: {sorted(CIFAR_BLOCKS)}")
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x = layers.ReLU(name="stem_relu")(_bn(_conv(inputs, CIFAR_WIDTHS[0], 3, 1, "stem"), "stem"))
    for stage, width in enumerate(CIFAR_WIDTHS):
        for b in range(CIFAR_BLOCKS[depth]):
            name = f"stage{stage + 1}_block{b + 1}"
            strides = 2 if stage > 0 and b == 0 else 1
            shortcut = ZeroPadShortcut(width, name=f"{name}_shortcut")(x) if strides > 1 else x
            y = layers.ReLU(name=f"{name}_1_relu")(_bn(_conv(x, width, 3, strides, f"{name}_1"), f"{name}_1"))
            y = _bn(_conv(y, width, 3, 1, f"{name}_2"), f"{name}_2")
            x = layers.ReLU(name=f"{name}_out")(layers.Add(name=f"{name}_add")([shortcut, y]))
    x = layers.GlobalAveragePooling2D(name="final_pool")(x)
    logits = layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name=f"resnet{depth}")


RESNET9_WIDTHS = (64, 128, 256, 512)  # prep, layer1, layer2, layer3


def build_resnet9(input_shape: tuple[int, ...], num_classes: int, width_multiplier: float = 1.0) -> keras.Model:
    """Page's ResNet-9 producing logits (float32); every width times `width_multiplier` (at least 1)."""
    if width_multiplier <= 0:
        raise ValueError(f"width_multiplier: must be positive, got {width_multiplier}")
    prep, *widths = (max(1, round(w * width_multiplier)) for w in RESNET9_WIDTHS)

    def conv_bn(x, filters: int, name: str):
        return layers.ReLU(name=f"{name}_relu")(_bn(_conv(x, filters, 3, 1, name), name))

    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x = conv_bn(inputs, prep, "prep")
    for i, (width, residual) in enumerate(zip(widths, (True, False, True))):
        x = layers.MaxPooling2D(2, name=f"layer{i + 1}_pool")(conv_bn(x, width, f"layer{i + 1}"))
        if residual:
            y = conv_bn(conv_bn(x, width, f"layer{i + 1}_res1"), width, f"layer{i + 1}_res2")
            x = layers.Add(name=f"layer{i + 1}_add")([x, y])
    x = layers.GlobalMaxPooling2D(name="final_pool")(x)
    x = layers.Dense(num_classes, use_bias=False, dtype="float32", name="linear")(x)
    logits = layers.Rescaling(0.125, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name="resnet9")
