"""Keras 3 builder: NASNet genotype -> AmoebaNet/NASNet network, as tensorflow/tpu `amoeba_net` builds it.

One builder for the search proxy and for full training (tpu's `network_utils.BaseCell` and
`model_builder._build_network_base`):

- `num_cells` normal cells in all; a reduction cell goes before normal-cell indices
  int(k/3 * num_cells), k = 1, 2, and doubles the width; a cell is int(filters * scaling) wide.
- Stems: "cifar" is a 3x3 conv (filters * stem_multiplier) and BN; "imagenet" is a 3x3/2 VALID conv
  (32) and BN, then two reduction cells at widths filters/4 and filters/2.
- Cells: h0 = ReLU-1x1-BN of the previous cell; h1 = the cell before that, reduced when its size
  (factorized reduction) or width (ReLU-1x1-BN) differs, raw when there is none. In reduction
  cells only ops reading h0/h1 are strided. conv_3x3 and conv_1x7_7x1 are bottlenecked (1/4 width).
- Ops: searchspace.ops.NASNET_OP_SPECS gives each op's kind; OP_BUILDERS (trainer/nasnet_ops.py)
  holds one builder per kind.
- ScheduledDropPath on every op but `none` (kind identity); `set_training_progress` moves its schedule.
- Head: ReLU, global average pool, dropout, float32 Dense LOGITS; with `aux_head`, the model
  outputs [logits, aux_logits] (aux head after the normal cell before the second reduction).

Departures, all for inputs tpu never sees: `dil_sep_conv_3x3` (not a tpu op) is ReLU-SepConv(3x3,
dilation 2)-BN, subsampled afterwards for stride 2 since Keras cannot stride a dilated conv; the
auxiliary head uses global average pooling and a 1x1 conv when its input is under 5x5; an odd
width in a factorized reduction splits as w//2 + (w - w//2) (tpu asserts it is even).

The builder adds no weight decay (that is the trainer's). This module must not train, read data
or choose hyperparameters: it only builds the network it is given.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import keras
import tensorflow as tf
from keras import layers

from searchspace.nasnet import Cell, NasNetGenotype
from searchspace.ops import NASNET_OP_SPECS
from trainer.nasnet_ops import OP_BUILDERS, _conv_init  # OP_BUILDERS: the ops' table, kept importable here

STEMS = ("cifar", "imagenet")
IMAGENET_STEM_FILTERS = 32
IMAGENET_STEM_CELLS = 2
AUX_FILTERS = (128, 768)
BN_EPSILON = 1e-5  # tensorflow/tpu amoeba_net.py: batch_norm_epsilon 1e-5, decay 0.9
BN_MOMENTUM = 0.9
MIN_FILTERS = {"imagenet": 8, "cifar": 2}  # per stem: factorized reductions need 2+ channels


@dataclass(frozen=True)
class NasNetConfig:
    """Network hyperparameters. `num_cells` counts ALL normal cells (tpu's num_cells, i.e. 3N);
    `filters` is tpu's reduction_size (F); `dropout` is the drop rate before the classifier."""

    num_cells: int
    filters: int
    stem: str
    stem_multiplier: int = 3
    dropout: float = 0.0
    drop_path_keep_prob: float = 1.0
    aux_head: bool = False
    fused_batch_norm: bool = False  # the search proxy's: traces faster (FusedBatchNormalization)

    def __post_init__(self) -> None:
        if self.stem not in STEMS:
            raise ValueError(f"stem: unknown {self.stem!r}; known: {list(STEMS)}")
        if self.num_cells < 3:
            raise ValueError(f"num_cells: at least 3 (one normal cell per stack), got {self.num_cells}")
        min_filters = MIN_FILTERS[self.stem]
        if self.filters < min_filters:
            raise ValueError(f"filters: at least {min_filters} with the {self.stem} stem, got {self.filters}")
        if self.stem_multiplier < 1:
            raise ValueError(f"stem_multiplier: must be >= 1, got {self.stem_multiplier}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout: must be in [0, 1), got {self.dropout}")
        if not 0.0 < self.drop_path_keep_prob <= 1.0:
            raise ValueError(f"drop_path_keep_prob: must be in (0, 1], got {self.drop_path_keep_prob}")


def reduction_indices(num_cells: int) -> tuple[int, int]:
    """Normal-cell indices a reduction cell is inserted before (tpu's calc_reduction_layers)."""
    return int(1 / 3 * num_cells), int(2 / 3 * num_cells)


def cell_layout(config: NasNetConfig) -> list[str]:
    """Cell kinds in build order: "stem_reduction", "reduction" or "normal"."""
    kinds = ["stem_reduction"] * (IMAGENET_STEM_CELLS if config.stem == "imagenet" else 0)
    reductions = reduction_indices(config.num_cells)
    for i in range(config.num_cells):
        if i in reductions:
            kinds.append("reduction")
        kinds.append("normal")
    return kinds


class ScheduledDropPath(layers.Layer):
    """Drops a whole example's branch in training with probability (1 - keep_prob) * progress.

    `progress` is a float32 tf.Variable in [0, 1] (training step / total steps) that many layers
    share; the kept values are scaled by 1/keep. At inference, and while progress is 0, it is the
    identity. TensorFlow backend only.
    """

    def __init__(self, keep_prob: float, progress: tf.Variable | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.keep_prob = float(keep_prob)
        self.progress = progress if progress is not None else new_progress_variable()

    def call(self, x, training=None):
        if not training or self.keep_prob >= 1.0:
            return x
        keep = 1.0 - self.progress * (1.0 - self.keep_prob)
        noise = tf.random.uniform(tf.stack([tf.shape(x)[0], 1, 1, 1]), dtype=tf.float32)
        scale = tf.floor(keep + noise) / keep
        return x * tf.cast(scale, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict:
        return {**super().get_config(), "keep_prob": self.keep_prob}


class FusedBatchNormalization(layers.BatchNormalization):
    """Keras BatchNormalization (channels last, float32) computed by TensorFlow's fused kernel: one
    op where Keras traces a dozen, so a new candidate's first step traces in about half the time
    (benchmarks/README.md). Same weights and moving averages (of the biased batch variance, as
    Keras keeps them). Used by the search proxy only; full training keeps Keras's own layer, which
    also handles mixed precision and distribution strategies. TensorFlow backend only."""

    def call(self, x, training=None, mask=None):
        if not training:
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(
                x, self.gamma.value, self.beta.value, mean=self.moving_mean.value,
                variance=self.moving_variance.value, epsilon=self.epsilon, is_training=False)
            return y
        y, mean, unbiased = tf.compat.v1.nn.fused_batch_norm(x, self.gamma.value, self.beta.value,
                                                             epsilon=self.epsilon, is_training=True)
        n = tf.cast(tf.reduce_prod(tf.shape(x)[:-1]), tf.float32)
        variance = unbiased * (n - 1.0) / n  # the kernel returns Bessel's correction; Keras keeps the biased one
        self.moving_mean.assign(self.moving_mean * self.momentum + mean * (1.0 - self.momentum))
        self.moving_variance.assign(self.moving_variance * self.momentum + variance * (1.0 - self.momentum))
        return y


def new_progress_variable() -> tf.Variable:
    """The schedule's progress in [0, 1]; assigned outside replicas, so the first replica's wins."""
    return tf.Variable(0.0, trainable=False, dtype=tf.float32, name="drop_path_progress",
                       aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


_PROGRESS_VARIABLES: "weakref.WeakKeyDictionary[keras.Model, list[tf.Variable]]" = weakref.WeakKeyDictionary()


def set_training_progress(model: keras.Model, fraction: float) -> None:
    """Set the drop-path schedule of every ScheduledDropPath in `model` (fraction of training done,
    clipped to 1). One shared variable per built model; cheap to call every step, outside tf.function."""
    if not fraction >= 0.0:
        raise ValueError(f"training progress must be >= 0, got {fraction}")
    variables = _PROGRESS_VARIABLES.get(model)
    if variables is None:
        drops = [l for l in model._flatten_layers() if isinstance(l, ScheduledDropPath)]
        unique = {id(l.progress): l.progress for l in drops}
        variables = _PROGRESS_VARIABLES[model] = list(unique.values())
    for var in variables:
        var.assign(min(float(fraction), 1.0))


class _Builder:
    """Builds layers with unique, readable names: <cell>_<block><side>_<op>_<part>."""

    def __init__(self, genotype: NasNetGenotype, config: NasNetConfig) -> None:
        self.genotype = genotype
        self.config = config
        self.progress = new_progress_variable() if config.drop_path_keep_prob < 1.0 else None
        self.project_inputs = True

    # ---- layer helpers -------------------------------------------------------------------
    @staticmethod
    def relu(x, name: str):
        return layers.ReLU(name=f"{name}_relu")(x)

    def bn(self, x, name: str):
        norm = FusedBatchNormalization if self.config.fused_batch_norm else layers.BatchNormalization
        return norm(momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name=f"{name}_bn")(x)

    @staticmethod
    def conv(x, filters: int, kernel, strides=1, name: str = "", padding: str = "same"):
        return layers.Conv2D(filters, kernel, strides=strides, padding=padding, use_bias=False,
                             kernel_initializer=_conv_init(), name=f"{name}_conv")(x)

    def relu_conv_bn(self, x, filters: int, kernel, strides, name: str):
        return self.bn(self.conv(self.relu(x, name), filters, kernel, strides, name), name)

    def factorized_reduction(self, x, filters: int, strides: int, name: str):
        """Stride 2: two stride-2 1x1 convs, the second on x shifted by one pixel, concat, BN.
        Stride 1: 1x1 conv, BN. No ReLU here (callers add it where tpu does)."""
        if strides == 1:
            return self.bn(self.conv(x, filters, 1, 1, f"{name}_path"), f"{name}_path")
        a = self.conv(x, filters // 2, 1, 2, f"{name}_path1", padding="valid")
        b = layers.ZeroPadding2D(((0, 1), (0, 1)), name=f"{name}_pad")(x)
        b = layers.Cropping2D(((1, 0), (1, 0)), name=f"{name}_shift")(b)
        b = self.conv(b, filters - filters // 2, 1, 2, f"{name}_path2", padding="valid")
        return self.bn(layers.Concatenate(name=f"{name}_concat")([a, b]), f"{name}_final")

    # ---- ops -----------------------------------------------------------------------------
    def apply_op(self, op: str, x, filters: int, strides: int, name: str):
        """One op of NASNET_OP_SPECS, built by OP_BUILDERS[its kind]; the output has `filters` channels."""
        spec = NASNET_OP_SPECS.get(op)
        build = OP_BUILDERS.get(spec.kind) if spec is not None else None
        if build is None:
            raise ValueError(f"op {op!r} has no builder: its kind {getattr(spec, 'kind', None)!r} is not in "
                             f"OP_BUILDERS ({sorted(OP_BUILDERS)})")
        x = build(self, spec, x, filters, strides, name)
        if spec.kind != "identity" and self.progress is not None:
            # tpu's default drop_connect_version "v1": the same target in every cell, ramped over training
            x = ScheduledDropPath(self.config.drop_path_keep_prob, self.progress, name=f"{name}_drop_path")(x)
        return x

    # ---- cells ---------------------------------------------------------------------------
    def cell(self, cell: Cell, prev, prev_prev, filters: int, strides: int, name: str):
        """One cell: h0 from `prev` (the previous cell), h1 from `prev_prev` (None: use `prev`)."""
        h1 = prev if prev_prev is None else prev_prev
        if h1.shape[1] != prev.shape[1]:
            h1 = self.factorized_reduction(self.relu(h1, f"{name}_h1"), filters, 2, f"{name}_h1")
        elif h1.shape[-1] != filters and prev_prev is not None:
            h1 = self.relu_conv_bn(h1, filters, 1, 1, f"{name}_h1")
        project = self.project_inputs or prev.shape[-1] != filters  # a macro genotype's projection "none"
        h0 = self.relu_conv_bn(prev, filters, 1, 1, f"{name}_h0") if project else prev
        states = [h0, h1]
        for b, block in enumerate(cell.blocks):
            branches = [
                self.apply_op(op, states[h], filters, strides if h < 2 else 1, f"{name}_b{b}{side}_{op}")
                for side, h, op in zip("lr", block.inputs, block.ops)
            ]
            states.append(layers.Add(name=f"{name}_b{b}_add")(branches))
        last = states[-1]
        outputs = []
        for h in cell.concat:
            s = states[h]
            if s.shape[1] != last.shape[1] or s.shape[-1] != last.shape[-1]:
                s = self.factorized_reduction(s, last.shape[-1], 2 if s.shape[1] != last.shape[1] else 1,
                                              f"{name}_out{h}")
            outputs.append(s)
        if len(outputs) == 1:
            return layers.Identity(name=f"{name}_out")(outputs[0])
        return layers.Concatenate(name=f"{name}_out")(outputs)

    def aux_head(self, x, num_classes: int):
        """ReLU-avgpool(5,/3)-1x1(128)-BN-ReLU-conv(rest,768)-BN-ReLU-flatten-Dense; global pooling
        and a 1x1 conv instead when the input is smaller than 5x5."""
        x = self.relu(x, "aux")
        if x.shape[1] >= 5 and x.shape[2] >= 5:
            x = layers.AveragePooling2D(5, strides=3, padding="valid", name="aux_pool")(x)
        else:
            x = layers.GlobalAveragePooling2D(keepdims=True, name="aux_pool")(x)
        x = self.relu(self.bn(self.conv(x, AUX_FILTERS[0], 1, 1, "aux_proj"), "aux_proj"), "aux_proj")
        x = self.conv(x, AUX_FILTERS[1], tuple(x.shape[1:3]), 1, "aux_full", padding="valid")
        x = self.relu(self.bn(x, "aux_full"), "aux_full")
        x = layers.Flatten(name="aux_flatten")(x)
        return layers.Dense(num_classes, dtype="float32", name="aux_logits")(x)

    def network(self, input_shape: tuple[int, ...], num_classes: int) -> keras.Model:
        config, genotype = self.config, self.genotype
        inputs = keras.Input(shape=input_shape, name="image")
        if config.stem == "cifar":
            net = self.bn(self.conv(inputs, config.filters * config.stem_multiplier, 3, 1, "stem"), "stem")
            outputs = [None, net]
        else:
            net = self.bn(self.conv(inputs, IMAGENET_STEM_FILTERS, 3, 2, "stem", padding="valid"), "stem")
            outputs = [None, net]
            for i in range(IMAGENET_STEM_CELLS):
                scaling = 2.0 ** (i - IMAGENET_STEM_CELLS)
                net = self.cell(genotype.reduction, net, outputs[-2], int(config.filters * scaling), 2,
                                f"stem_cell{i}")
                outputs.append(net)
        aux_after = reduction_indices(config.num_cells)[1] - 1
        scaling, reductions, aux_logits = 1.0, 0, None
        for i in range(config.num_cells):
            if i in reduction_indices(config.num_cells):
                scaling *= 2
                net = self.cell(genotype.reduction, net, outputs[-2], int(config.filters * scaling), 2,
                                f"reduction_cell{reductions}")
                outputs.append(net)
                reductions += 1
            net = self.cell(genotype.normal, net, outputs[-2], int(config.filters * scaling), 1, f"cell{i}")
            if config.aux_head and i == aux_after:
                aux_logits = self.aux_head(net, num_classes)
            outputs.append(net)
        x = self.relu(net, "final")
        x = layers.GlobalAveragePooling2D(name="final_pool")(x)
        if config.dropout > 0:
            x = layers.Dropout(config.dropout, name="final_dropout")(x)
        logits = layers.Dense(num_classes, dtype="float32", name="logits")(x)
        model_outputs = logits if aux_logits is None else [logits, aux_logits]
        return keras.Model(inputs, model_outputs, name="nasnet")


def build_nasnet(genotype: NasNetGenotype, input_shape: tuple[int, ...], num_classes: int,
                 config: NasNetConfig) -> keras.Model:
    """The network for `genotype`: logits, or [logits, aux_logits] with `config.aux_head`."""
    if num_classes < 1 or len(input_shape) != 3:
        raise ValueError(f"need num_classes >= 1 and an (H, W, C) input shape, got {num_classes}, "
                         f"{input_shape}")
    return _Builder(genotype, config).network(tuple(input_shape), num_classes)
