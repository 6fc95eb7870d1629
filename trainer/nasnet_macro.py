"""Keras 3 builder of a macro genotype's network (searchspace/nasnet_macro.py): the NASNet builder's
cells and ops (trainer/nasnet.py), laid out by the genotype's own macro part.

- Stem: a 3x3 conv of F filters and BN (the CIFAR stem at stem multiplier 1, as ResNets start).
- Three or four stacks (the length of `cells_per_stack`) of `cells_per_stack[s]` normal cells,
  F * 2^s wide; before each stack after the first the reduction: the searched reduction cell
  ("cell"), ReLU-3x3 conv-BN and a 2x2 max pool ("conv_pool"), or a stride-2 ReLU-3x3 conv-BN
  ("strided_conv"). After a fixed reduction the next
  cell reads its output as both inputs (the earlier state would need a factorized reduction).
- Projection "none": a cell's input h0 is projected (ReLU-1x1-BN) only where its width differs.
- Head: ReLU, global average pooling, dropout, float32 Dense LOGITS (no auxiliary head).

This module must not train, read data or choose hyperparameters.
"""

from __future__ import annotations

import keras
from keras import layers

from searchspace.nasnet_macro import MacroGenotype
from trainer.nasnet import NasNetConfig, _Builder


class _MacroBuilder(_Builder):
    def __init__(self, genotype: MacroGenotype, config: NasNetConfig) -> None:
        super().__init__(genotype, config)
        self.project_inputs = genotype.macro.projection == "conv_1x1"

    def reduce(self, x, filters: int, name: str):
        kind = self.genotype.macro.reduction
        if kind == "strided_conv":
            return self.relu_conv_bn(x, filters, 3, 2, name)
        x = self.relu_conv_bn(x, filters, 3, 1, name)
        return layers.MaxPooling2D(2, padding="same", name=f"{name}_pool")(x)

    def network(self, input_shape: tuple[int, ...], num_classes: int) -> keras.Model:
        genotype: MacroGenotype = self.genotype
        macro = genotype.macro
        inputs = keras.Input(shape=input_shape, name="image")
        net = self.bn(self.conv(inputs, macro.filters, 3, 1, "stem"), "stem")
        outputs = [None, net]
        for stack, cells in enumerate(macro.cells_per_stack):
            filters = macro.filters * 2 ** stack
            if stack > 0 and macro.reduction == "cell":
                net = self.cell(genotype.reduction, net, outputs[-2], filters, 2, f"reduction_cell{stack - 1}")
                outputs.append(net)
            elif stack > 0:
                net = self.reduce(net, filters, f"reduction{stack - 1}")
                outputs = [None, net]
            for i in range(cells):
                net = self.cell(genotype.normal, net, outputs[-2], filters, 1, f"stack{stack}_cell{i}")
                outputs.append(net)
        x = layers.GlobalAveragePooling2D(name="final_pool")(self.relu(net, "final"))
        if self.config.dropout > 0:
            x = layers.Dropout(self.config.dropout, name="final_dropout")(x)
        logits = layers.Dense(num_classes, dtype="float32", name="logits")(x)
        return keras.Model(inputs, logits, name="nasnet_macro")


def build_nasnet_macro(genotype: MacroGenotype, input_shape: tuple[int, ...], num_classes: int,
                       dropout: float = 0.0, drop_path_keep_prob: float = 1.0,
                       fused_batch_norm: bool = False) -> keras.Model:
    """The network of `genotype` at its own cells per stack and F: logits."""
    if not isinstance(genotype, MacroGenotype):
        raise ValueError(f"a macro genotype (space nasnet_macro) is needed, got {type(genotype).__name__}")
    if num_classes < 1 or len(input_shape) != 3:
        raise ValueError(f"need num_classes >= 1 and an (H, W, C) input shape, got {num_classes}, {input_shape}")
    config = NasNetConfig(num_cells=3, filters=genotype.macro.filters, stem="cifar", stem_multiplier=1,
                          dropout=dropout, drop_path_keep_prob=drop_path_keep_prob,
                          fused_batch_norm=fused_batch_norm)
    return _MacroBuilder(genotype, config).network(tuple(input_shape), num_classes)
