"""The weight-sharing supernet of the convnet space (searchspace/supernet.py says what it shares): one
Keras model at its largest whose forward pass takes a subnet as tensors, so every subnet runs through
one trace (convention 9) and costs what its own channels and convs cost, not the largest's.

A subnet (`subnet_arch`): the stem's width, each stage's width (its convs take their kernels' first
input and output channels), how many of its further convs run and whether its residual branch does
(`tf.cond`: a conv that does not run costs nothing). BN normalises with the batch's statistics in
training; in inference with its moving statistics, which `recalibrate` (trainer/subnet_score.py) sets
per subnet from training images (BigNAS, Single Path One-Shot), so the training never keeps any.
Starts as trainer/convnet.py's nets nearly do (`identity_plus_default` convs, PyTorch's head,
airbench's whitening stem). Layer names are trainer/convnet.py's, so a subnet's weights copy into its stand-alone net
by name (`standalone`). This module must not train, read data or choose hyperparameters.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from searchspace.convnet import ConvNetGenotype
from searchspace.supernet import not_shared
from trainer.airbench import (BN_EPSILON, BN_MOMENTUM, WHITEN_SIZE, WhiteningConv2D, centre_identity,
                              torch_default)
from trainer.convnet import build_convnet

ARCH_KEYS = ("stem_width", "widths", "convs", "residual")


def identity_plus_default(shape: tuple[int, int, int, int], dtype: Any = None) -> tf.Tensor:
    """A supernet conv's start: PyTorch's default plus a centre tap of 1 from input channel i to filter
    i. Not PartialIdentity's identity alone: a subnet with fewer inputs than that identity's filters
    would get all-zero filters (a BN of zero variance, whose gradient explodes)."""
    return torch_default()(shape, dtype=dtype) + tf.constant(centre_identity(shape), dtype or tf.float32)


class ElasticConv(keras.layers.Layer):
    """A 3x3 conv without bias at its largest; a call takes the kernel's first input channels (the
    input's) and first `width` output channels."""

    def __init__(self, max_in: int, max_out: int, name: str) -> None:
        super().__init__(name=name)
        self.kernel = self.add_weight(shape=(3, 3, max_in, max_out), initializer=identity_plus_default,
                                      name="kernel")

    def apply(self, x: tf.Tensor, width: tf.Tensor) -> tf.Tensor:
        kernel = self.kernel.value[:, :, :tf.shape(x)[-1], :width]
        return tf.nn.conv2d(x, kernel, 1, "SAME")


class ElasticNorm(keras.layers.BatchNormalization):
    """BN at its largest, its first channels used; in training it normalises by the batch and, with
    `collect`, adds the batch's moments to its sums (`recalibrate` averages them)."""

    def __init__(self, channels: int, scale: bool, name: str) -> None:
        super().__init__(momentum=BN_MOMENTUM, epsilon=BN_EPSILON, scale=scale, name=name)
        self.build((None, None, None, channels))

    def build(self, input_shape: tuple) -> None:
        super().build(input_shape)
        self.sums = self.add_weight(shape=(2, input_shape[-1]), initializer="zeros", trainable=False, name="sums")
        self.batches = self.add_weight(shape=(), initializer="zeros", trainable=False, name="batches")

    def apply(self, x: tf.Tensor, training: bool, collect: bool = False) -> tf.Tensor:
        channels = tf.shape(x)[-1]
        if training:
            mean, variance = tf.nn.moments(x, [0, 1, 2])
            if collect:
                pad = [[0, self.sums.shape[-1] - channels]]
                self.sums.assign_add(tf.stack([tf.pad(mean, pad), tf.pad(variance + tf.square(mean), pad)]))
                self.batches.assign_add(1.0)
        else:
            mean, variance = self.moving_mean.value[:channels], self.moving_variance.value[:channels]
        gamma = self.gamma.value[:channels] if self.scale else None
        return tf.nn.batch_normalization(x, mean, variance, self.beta.value[:channels], gamma, self.epsilon)

    def set_moments_from_sums(self) -> None:
        """The moving statistics: the pooled mean and variance of the batches collected (then cleared)."""
        count = tf.maximum(self.batches.value, 1.0)
        mean = self.sums.value[0] / count
        self.moving_mean.assign(mean)
        self.moving_variance.assign(tf.maximum(self.sums.value[1] / count - tf.square(mean), 0.0))
        self.sums.assign(tf.zeros_like(self.sums))
        self.batches.assign(0.0)


class Supernet(keras.Model):
    """The largest net of a supernet space (searchspace/supernet.py `frame_of`); `forward` runs a subnet."""

    def __init__(self, frame: ConvNetGenotype, input_shape: tuple[int, ...], num_classes: int) -> None:
        super().__init__(name="supernet")
        self.frame, self.image_shape, self.num_classes = frame, tuple(input_shape), num_classes
        channels = int(input_shape[-1])
        if frame.stem == "whiten2x2":
            self.whiten = WhiteningConv2D(2 * WHITEN_SIZE ** 2 * channels, WHITEN_SIZE, padding="valid", name="whiten")
            self.whiten.build((None, None, None, channels))
            width = 2 * WHITEN_SIZE ** 2 * channels
        else:
            self.stem_conv, self.stem_bn = self._unit(channels, frame.stem_width, "stem")
            width = frame.stem_width
        self.units: list[list[tuple[ElasticConv, ElasticNorm]]] = []
        for i, stage in enumerate(frame.stages):
            name = f"stage{i + 1}"
            units = [self._unit(width, stage.width, name)]
            units += [self._unit(stage.width, stage.width, f"{name}_conv{j + 1}") for j in range(stage.convs)]
            units += [self._unit(stage.width, stage.width, f"{name}_res{j + 1}") for j in range(stage.residual)]
            self.units.append(units)
            width = stage.width
        self.linear = self.add_weight(shape=(width, num_classes), initializer=torch_default(), name="linear")
        self.activation = keras.activations.get(frame.activation)

    def _unit(self, max_in: int, max_out: int, name: str) -> tuple[ElasticConv, ElasticNorm]:
        return ElasticConv(max_in, max_out, f"{name}_conv"), ElasticNorm(max_out, self.frame.bn_scale, f"{name}_bn")

    def norms(self) -> list[ElasticNorm]:
        stem = [] if self.frame.stem == "whiten2x2" else [self.stem_bn]
        return stem + [norm for units in self.units for _, norm in units]

    def _conv_bn_act(self, x: tf.Tensor, unit: tuple[ElasticConv, ElasticNorm], width: tf.Tensor, training: bool,
                     collect: bool, pool: str = "") -> tf.Tensor:
        x = unit[0].apply(x, width)
        if pool == "conv_pool_bn":
            x = tf.nn.max_pool2d(x, 2, 2, "VALID")
        x = self.activation(unit[1].apply(x, training, collect))
        return tf.nn.max_pool2d(x, 2, 2, "VALID") if pool == "conv_bn_pool" else x

    def forward(self, x: tf.Tensor, arch: dict[str, tf.Tensor], training: bool = False,
                collect: bool = False) -> tf.Tensor:
        """The subnet `arch`'s float32 logits (`subnet_arch`'s tensors)."""
        if self.frame.stem == "whiten2x2":
            x = self.activation(tf.nn.conv2d(x, self.whiten.kernel.value, 1, "VALID") + self.whiten.bias.value)
        else:
            x = self._conv_bn_act(x, (self.stem_conv, self.stem_bn), arch["stem_width"], training, collect)
        for i, (stage, units) in enumerate(zip(self.frame.stages, self.units)):
            width = arch["widths"][i]
            x = self._conv_bn_act(x, units[0], width, training, collect, self.frame.pool_order)
            for j in range(stage.convs):
                unit = units[1 + j]
                x = tf.cond(arch["convs"][i] > j,
                            lambda x=x, unit=unit: self._conv_bn_act(x, unit, width, training, collect),
                            lambda x=x: x)
            if stage.residual:
                branch = units[1 + stage.convs:]
                x = tf.cond(arch["residual"][i] > 0, lambda x=x, branch=branch: x + self._branch(
                    x, branch, width, training, collect), lambda x=x: x)
        pooled = tf.reduce_max(x, [1, 2]) if self.frame.head_pool == "max" else tf.reduce_mean(x, [1, 2])
        logits = tf.matmul(pooled, self.linear.value[:tf.shape(pooled)[-1]])
        return tf.cast(logits, tf.float32) / float(self.frame.head_divisor)

    def _branch(self, x: tf.Tensor, units: list, width: tf.Tensor, training: bool, collect: bool) -> tf.Tensor:
        for unit in units:
            x = self._conv_bn_act(x, unit, width, training, collect)
        return x


def subnet_arch(genotype: ConvNetGenotype, frame: ConvNetGenotype) -> dict[str, np.ndarray]:
    """The subnet `genotype` of the supernet `frame` as the forward pass's int32 arrays; ValueError for
    a net that is not one of its subnets."""
    wrong = not_shared(frame, genotype)
    if wrong or genotype.stem_width > frame.stem_width or any(
            s.width > f.width or s.convs > f.convs or s.residual > f.residual
            for s, f in zip(genotype.stages, frame.stages)):
        raise ValueError(f"{genotype.key()} is not a subnet of the supernet {frame.key()}"
                         f"{' (its ' + ', '.join(wrong) + ' differ)' if wrong else ''}")
    return {"stem_width": np.int32(genotype.stem_width),
            "widths": np.array([s.width for s in genotype.stages], np.int32),
            "convs": np.array([s.convs for s in genotype.stages], np.int32),
            "residual": np.array([s.residual for s in genotype.stages], np.int32)}


def stacked_archs(archs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Several subnets' arrays, one more leading axis (a sandwich step's)."""
    return {key: np.stack([arch[key] for arch in archs]) for key in ARCH_KEYS}


def arch_signature(stages: int, leading: tuple[int, ...] = ()) -> dict[str, tf.TensorSpec]:
    """The forward pass's arch as a tf.function's input signature (one trace for every subnet)."""
    return {"stem_width": tf.TensorSpec(leading, tf.int32),
            **{key: tf.TensorSpec(leading + (stages,), tf.int32) for key in ARCH_KEYS[1:]}}


def standalone(model: Supernet, genotype: ConvNetGenotype) -> keras.Model:
    """The subnet `genotype` as trainer/convnet.py builds it, with the supernet's weights (its first
    channels) and the moving statistics `recalibrate` left: the same logits as `forward`."""
    net = build_convnet(genotype, model.image_shape, model.num_classes)
    if genotype.stem == "whiten2x2":
        net.get_layer("whiten").kernel.assign(model.whiten.kernel.value)
        net.get_layer("whiten").bias.assign(model.whiten.bias.value)
    names = {layer.name: layer for units in model.units for unit in units for layer in unit}
    if genotype.stem != "whiten2x2":
        names.update({"stem_conv": model.stem_conv, "stem_bn": model.stem_bn})
    for layer in net.layers:
        source = names.get(layer.name)
        if isinstance(source, ElasticConv):
            rows, cols, fan_in, fan_out = layer.kernel.shape
            layer.kernel.assign(source.kernel.value[:, :, :fan_in, :fan_out])
        elif isinstance(source, ElasticNorm):
            layer.epsilon = source.epsilon  # the recipe's (--bn_epsilon), as the supernet normalised
            for weight, shared in zip(layer.weights, _norm_weights(source)):
                weight.assign(shared[:weight.shape[0]])
    dense = net.get_layer("linear")
    dense.kernel.assign(model.linear.value[:dense.kernel.shape[0]])
    return net


def _norm_weights(norm: ElasticNorm) -> list[Any]:
    """A BN's weights in Keras's order (gamma if it scales, beta, moving mean, moving variance)."""
    return ([norm.gamma] if norm.scale else []) + [norm.beta, norm.moving_mean, norm.moving_variance]
