"""The recipe's batch-norm settings (`bn_momentum`, `bn_epsilon`) on a built model: every Keras
BatchNormalization layer in it, nested ones too, takes them before its first call (both are read
when the layer runs, so setting them after building is building with them). 0 leaves a family's own.
This module must not train.
"""

from __future__ import annotations

import keras


def set_batch_norm(model: keras.Model, momentum: float = 0.0, epsilon: float = 0.0) -> int:
    """Sets the momentum (Keras's convention: the moving average keeps this share) and the epsilon of
    each BatchNormalization layer of `model` that is given (> 0); returns how many layers it set."""
    if momentum <= 0 and epsilon <= 0:
        return 0
    # Keras has no public walk over nested layers; _flatten_layers is what Keras's own tracking uses
    norms = [layer for layer in model._flatten_layers(include_self=False)
             if isinstance(layer, keras.layers.BatchNormalization)]
    for layer in norms:
        if momentum > 0:
            layer.momentum = float(momentum)
        if epsilon > 0:
            layer.epsilon = float(epsilon)
    return len(norms)
