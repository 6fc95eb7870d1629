"""Keras 3 builder of a convnet genotype's network (searchspace/convnet.py), the space that holds
airbench94 and ResNet-9 exactly.

Layers as the genotype says, with airbench94's starts for every network of the space: each 3x3 conv
(no bias) starts with its first min(in, out) filters as the identity and the rest as PyTorch's
(trainer/airbench.py's PartialIdentity), the linear head as PyTorch's; BN with airbench94's
momentum 0.6 (Keras's convention) and epsilon 1e-12 unless the recipe's --bn_momentum and
--bn_epsilon say otherwise; the whitening stem is airbench94's WhiteningConv2D, its kernel set from
the training images by the trainer (the family's from_data) or the proxy trainer. `width_multiplier`
scales the stem's and every stage's width (at least 1), as ResNet-9's and airbench94's.

This module must not train, read data or choose hyperparameters.
"""

from __future__ import annotations

import keras
from keras import layers

from searchspace.convnet import ConvNetGenotype
from trainer.airbench import BN_EPSILON, BN_MOMENTUM, WHITEN_SIZE, PartialIdentity, WhiteningConv2D, torch_default


def _scaled(width: int, multiplier: float) -> int:
    return max(1, round(width * multiplier))


class _Builder:
    def __init__(self, genotype: ConvNetGenotype) -> None:
        self.g = genotype

    def conv_bn_act(self, x, filters: int, name: str, pool: str = ""):
        """conv3x3 -> BN -> activation, with a 2x2 max pool after the conv (pool "conv_pool_bn") or
        after the activation ("conv_bn_pool")."""
        x = layers.Conv2D(filters, 3, padding="same", use_bias=False, kernel_initializer=PartialIdentity(),
                          name=f"{name}_conv")(x)
        if pool == "conv_pool_bn":
            x = layers.MaxPooling2D(2, name=f"{name}_pool")(x)
        x = layers.BatchNormalization(momentum=BN_MOMENTUM, epsilon=BN_EPSILON, scale=self.g.bn_scale,
                                      name=f"{name}_bn")(x)
        x = layers.Activation(self.g.activation, name=f"{name}_{self.g.activation}")(x)
        if pool == "conv_bn_pool":
            x = layers.MaxPooling2D(2, name=f"{name}_pool")(x)
        return x

    def stem(self, x, multiplier: float):
        if self.g.stem == "whiten2x2":
            channels = int(x.shape[-1])
            x = WhiteningConv2D(2 * WHITEN_SIZE ** 2 * channels, WHITEN_SIZE, padding="valid", name="whiten")(x)
            return layers.Activation(self.g.activation, name=f"whiten_{self.g.activation}")(x)
        return self.conv_bn_act(x, _scaled(self.g.stem_width, multiplier), "stem")

    def network(self, input_shape: tuple[int, ...], num_classes: int, multiplier: float) -> keras.Model:
        inputs = keras.Input(shape=tuple(input_shape), name="image")
        x = self.stem(inputs, multiplier)
        for i, stage in enumerate(self.g.stages):
            width, name = _scaled(stage.width, multiplier), f"stage{i + 1}"
            x = self.conv_bn_act(x, width, name, pool=self.g.pool_order)
            for j in range(stage.convs):
                x = self.conv_bn_act(x, width, f"{name}_conv{j + 1}")
            if stage.residual:
                y = x
                for j in range(stage.residual):
                    y = self.conv_bn_act(y, width, f"{name}_res{j + 1}")
                x = layers.Add(name=f"{name}_add")([x, y])
        pool = layers.GlobalMaxPooling2D if self.g.head_pool == "max" else layers.GlobalAveragePooling2D
        x = pool(name="final_pool")(x)
        x = layers.Dense(num_classes, use_bias=False, kernel_initializer=torch_default(), dtype="float32",
                         name="linear")(x)
        logits = layers.Rescaling(1 / self.g.head_divisor, dtype="float32", name="logits")(x)
        return keras.Model(inputs, logits, name="convnet")


def build_convnet(genotype: ConvNetGenotype, input_shape: tuple[int, ...], num_classes: int,
                  width_multiplier: float = 1.0) -> keras.Model:
    """The network of `genotype` producing float32 logits."""
    if not isinstance(genotype, ConvNetGenotype):
        raise ValueError(f"a convnet genotype (space convnet) is needed, got {type(genotype).__name__}")
    if num_classes < 1 or len(input_shape) != 3:
        raise ValueError(f"need num_classes >= 1 and an (H, W, C) input shape, got {num_classes}, {input_shape}")
    if min(input_shape[:2]) < genotype.smallest_input():
        raise ValueError(f"{genotype.key()}: needs inputs of at least {genotype.smallest_input()} pixels a side "
                         f"(its stem and {len(genotype.stages)} pools), got {tuple(input_shape)}")
    if width_multiplier <= 0:
        raise ValueError(f"width_multiplier: must be positive, got {width_multiplier}")
    return _Builder(genotype).network(tuple(input_shape), num_classes, width_multiplier)
