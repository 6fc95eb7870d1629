"""Analytic multiply-add count of a built Keras model, per example.

Counts the multiplications of Conv1D/2D/3D (any stride, padding, dilation and groups: output
positions x kernel size), DepthwiseConv, SeparableConv (depthwise at the strided output size plus
the pointwise 1x1) and Dense layers, from the shapes each layer recorded when the functional model
was built (one count per call). Biases, BN, pooling, activations and adds are not counted, as in
published figures (ResNet-50: ~4.1e9).

This module must not run the model, build models or read data.
"""

from __future__ import annotations

import math

import keras

_CONVS = (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D,
          keras.layers.DepthwiseConv1D, keras.layers.DepthwiseConv2D)
_SEPARABLE = (keras.layers.SeparableConv1D, keras.layers.SeparableConv2D)


def _positions(output_shape) -> int:
    """Output positions per example: every dimension but the batch and the channels."""
    dims = tuple(output_shape)[1:-1]
    if any(d is None for d in dims):
        raise ValueError(f"multiply-adds need static shapes, got output shape {tuple(output_shape)}")
    return math.prod(dims)


def _kernel_size(layer: keras.layers.Layer) -> int:
    """Multiply-adds per output position of one call."""
    if isinstance(layer, _SEPARABLE):
        return math.prod(layer.depthwise_kernel.shape) + math.prod(layer.pointwise_kernel.shape)
    if isinstance(layer, (*_CONVS, keras.layers.Dense)):
        # Conv kernels are (*k, in/groups, out), depthwise (*k, in, multiplier), dense (in, out):
        # each output position costs one multiply-add per kernel entry.
        return math.prod(layer.kernel.shape)
    return 0


def count_multiply_adds(model: keras.Model) -> int:
    """Multiply-adds of one forward pass of one example through `model` (nested models included)."""
    total = 0
    for layer in model._flatten_layers(include_self=False, recursive=True):
        per_position = _kernel_size(layer)
        if not per_position:
            continue
        nodes = layer._inbound_nodes
        if not nodes:
            raise ValueError(f"layer {layer.name!r} was never called symbolically; build a functional model")
        for node in nodes:
            total += per_position * _positions(node.output_tensors[0].shape)
    return total
