"""Named image models, in one table (MODEL_FAMILIES): ImageNet and CIFAR ResNets, the published
cells, or any genotype of a search space whose networks a family builds (NASNet cells: "genotype").

`build_model(spec)` takes images of spec.image_size^2 (RGB unless `channels` says otherwise) and
produces logits (or [logits, aux_logits] for NASNet models with an auxiliary head); `model_report`
gives their size and cost. Full training (`amoeba train`, promote) names a family; a search's
candidates are built by the family of their space (`family_for_space`). This module must not train
or read data (a family's `from_data`, which `init_from_data` calls, reads its training images).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

import keras

from core.train_config import TrainConfig
from searchspace.references import REFERENCES
from trainer.airbench import build_airbench, init_from_training_data
from trainer.batch_norm import set_batch_norm
from trainer.flops import count_multiply_adds
from searchspace.nasnet_macro import MacroGenotype
from trainer.nasnet import MIN_FILTERS, STEMS, NasNetConfig, build_nasnet
from trainer.nasnet_macro import build_nasnet_macro
from trainer.convnet import build_convnet
from trainer.resnet import CIFAR_BLOCKS, STAGE_BLOCKS, build_cifar_resnet, build_resnet, build_resnet9

IMAGENET_STEM_MIN_SIZE = 128  # stem="auto" picks the ImageNet stem from this image size up


@dataclass(frozen=True)
class ModelFamily:
    """One entry of the model table: what it is, how to build it from a ModelSpec, whether the
    NASNet options (cells, filters, stem, dropout, drop path, aux head) apply, and the search space
    whose genotypes it builds (`space`, a searchspace name: ModelSpec.genotype is one of them; a
    search of that space trains its candidates as this family's networks), and whether
    `width_multiplier` scales its widths (`widths`), and what sets its weights that depend on the
    training data (`from_data(model, train_config)`, airbench94's whitening; see `init_from_data`)."""

    description: str
    build: Callable[["ModelSpec"], keras.Model]
    nasnet: bool
    space: str = ""
    widths: bool = False  # whether ModelSpec.width_multiplier scales it
    from_data: Callable[[keras.Model, TrainConfig], Any] | None = None  # None: nothing depends on the data


def _resnet(depth: int) -> ModelFamily:
    return ModelFamily(f"ResNet-{depth} v1.5, ImageNet layout (He et al. 2016)", nasnet=False,
                       build=lambda spec: build_resnet(depth, spec.input_shape, spec.num_classes))


def _cifar_resnet(depth: int) -> ModelFamily:
    return ModelFamily(f"ResNet-{depth}, CIFAR layout (He et al. 2016, section 4.2; option A shortcuts)",
                       nasnet=False,
                       build=lambda spec: build_cifar_resnet(depth, spec.input_shape, spec.num_classes))


def _airbench(activation: str) -> ModelFamily:
    return ModelFamily(f"airbench94, Keller Jordan's CIFAR-10 speed-run net with {activation.upper()} (width 1: "
                       "1.97M parameters; its whitening conv is set from the training images by the trainer)",
                       nasnet=False, widths=True, from_data=init_from_training_data,
                       build=lambda spec: build_airbench(spec.input_shape, spec.num_classes, spec.width_multiplier,
                                                         activation))


def _reference(name: str) -> ModelFamily:
    return ModelFamily(f"NASNet network of the published {name} cells", nasnet=True,
                       build=lambda spec: build_nasnet(REFERENCES[name], spec.input_shape, spec.num_classes,
                                                       spec.nasnet_config()))


MOBILENET_BN_MOMENTUM = 0.9  # PyTorch's default (0.1 theirs), for MobileNetV3's own 0.999 (see below)


def _mobilenet_v3_small(spec: "ModelSpec") -> keras.Model:
    """Keras's MobileNetV3Small, logits out, inputs in [-1, 1] as ours are, its BN layers at momentum
    MOBILENET_BN_MOMENTUM. Keras builds them at 0.999, made for ImageNet's long runs; under airbench's
    recipe on 5,000 CIFAR-10 photos (781 steps, a lookahead sync every 5, BN offsets at 64x the rate)
    the moving statistics lagged the weights: test top-1 0.1000 at 0.999 (chance, against 0.73
    training top-1), 0.3265 at 0.99, 0.5742 at 0.9, where BN recalibrated on training images gives
    0.573. The recipe's --bn_momentum, when given, is set over it."""
    model = keras.applications.MobileNetV3Small(
        input_shape=spec.input_shape, alpha=spec.width_multiplier or 1.0, weights=None, classes=spec.num_classes,
        include_preprocessing=False, classifier_activation=None)
    set_batch_norm(model, MOBILENET_BN_MOMENTUM)
    return model


# The one table of named models (`amoeba train --model`, baselines): name -> family.
MODEL_FAMILIES: dict[str, ModelFamily] = {
    **{f"resnet{d}": _resnet(d) for d in sorted(STAGE_BLOCKS)},
    **{f"resnet{d}": _cifar_resnet(d) for d in sorted(CIFAR_BLOCKS)},
    "resnet9": ModelFamily("ResNet-9, Page's DAWNBench CIFAR-10 net (width 1: 6.57M parameters)", nasnet=False,
                           widths=True, build=lambda spec: build_resnet9(spec.input_shape, spec.num_classes,
                                                                         spec.width_multiplier)),
    "airbench94": _airbench("gelu"),
    "airbench94_relu": _airbench("relu"),
    **{name: _reference(name) for name in sorted(REFERENCES)},
    "genotype": ModelFamily("NASNet network of a given genotype (a search's best_genotype.json)", nasnet=True,
                            build=lambda spec: build_nasnet(spec.genotype, spec.input_shape, spec.num_classes,
                                                            spec.nasnet_config()),
                            space="nasnet"),
    "nasnet_macro": ModelFamily("Network of a macro genotype (space nasnet_macro) at its own cells per stack and F",
                                nasnet=True, space="nasnet_macro",
                                build=lambda spec: build_nasnet_macro(spec.genotype, spec.input_shape,
                                                                      spec.num_classes, spec.dropout,
                                                                      spec.drop_path_keep_prob,
                                                                      spec.fused_batch_norm)),
    "mobilenet_v3_small": ModelFamily(
        "Keras's MobileNetV3Small (Howard et al. 2019), the mobile reference, trained from scratch (no download; "
        "its strides, made for 224 pixels, take 32-pixel images to 1x1 by the last block), width times the "
        "multiplier, BN momentum 0.9", nasnet=False, widths=True, build=lambda spec: _mobilenet_v3_small(spec)),
    "convnet": ModelFamily("Plain conv network of a convnet genotype (space convnet: airbench94 and ResNet-9 among "
                           "them), every width times the width multiplier", nasnet=False, widths=True, space="convnet",
                           from_data=init_from_training_data,
                           build=lambda spec: build_convnet(spec.genotype, spec.input_shape, spec.num_classes,
                                                            spec.width_multiplier)),
}
MODEL_NAMES = tuple(MODEL_FAMILIES)


def family_for_space(space: str) -> str:
    """The name of the MODEL_FAMILIES entry that builds genotypes of the search space `space`;
    ValueError naming the spaces that have one."""
    for name, family in MODEL_FAMILIES.items():
        if family.space == space:
            return name
    known = sorted(f.space for f in MODEL_FAMILIES.values() if f.space)
    raise ValueError(f"space {space!r}: no entry of MODEL_FAMILIES (trainer/models.py) builds its genotypes "
                     f"(spaces with one: {known}); add one, or train them with a function of your own "
                     "(experiments.api.search)")


@dataclass(frozen=True)
class ModelSpec:
    """Which network `build_model` builds, for image_size x image_size x 3 inputs (our pipelines scale
    pixels to [-1, 1]); the model outputs float32 LOGITS (train with `from_logits=True`), and with
    `aux_head` [logits, aux_logits].

        spec = ModelSpec("genotype", num_classes=10, image_size=32, num_cells=2, filters=16,
                         genotype=best_cell)
        model = build_model(spec)  # a plain keras.Model: compile and fit it as any other

    The NASNet fields are ignored by the ResNets; a macro genotype ("nasnet_macro") carries its
    own cells per stack and F, so `num_cells` and `filters` do not apply to it."""

    name: str  # a MODEL_FAMILIES name: "genotype" (build `genotype`), amoebanet_a/d, nasnet_a, resnet20..., resnet50...
    num_classes: int
    image_size: int  # height = width in pixels
    channels: int = 3  # of the input images (1: grey, as the digits proxy's)
    num_cells: int = 2  # NASNet N: normal cells per stack (3 stacks, a reduction cell between them)
    filters: int = 256  # NASNet F: filters of the first stack, doubled at each reduction (256: AmoebaNet-D on ImageNet)
    stem: str = "auto"  # "cifar" (one 3x3 conv), "imagenet" (a stride-2 conv and two reduction cells), or auto by size
    dropout: float = 0.0  # before the classifier
    drop_path_keep_prob: float = 1.0  # ScheduledDropPath's keep probability at the end of training (1: off)
    aux_head: bool = False  # an auxiliary classifier after the second stack (a second output, training only)
    fused_batch_norm: bool = False  # NASNet: one fused op per batch norm (float32 only; the search proxy's)
    genotype: Any = None  # exactly for a family that builds a space's genotypes: "genotype", "nasnet_macro"
    width_multiplier: float = 1.0  # every width times this, for a family with `widths` (resnet9)

    def __post_init__(self) -> None:
        if self.name not in MODEL_FAMILIES:
            raise ValueError(f"model name: unknown {self.name!r}; known: {list(MODEL_FAMILIES)}")
        if self.num_classes < 1 or self.image_size < 1 or self.channels < 1:
            raise ValueError(f"num_classes, image_size and channels must be positive, got {self.num_classes}, "
                             f"{self.image_size}, {self.channels}")
        if self.stem != "auto" and self.stem not in STEMS:
            raise ValueError(f"stem: unknown {self.stem!r}; known: {['auto', *STEMS]}")
        if bool(self.family.space) != (self.genotype is not None):
            builds = sorted(name for name, family in MODEL_FAMILIES.items() if family.space)
            raise ValueError(f"a genotype is given exactly when the model builds one ({builds}), not for {self.name!r}")
        if self.name == "genotype" and isinstance(self.genotype, MacroGenotype):
            raise ValueError("a macro genotype (space nasnet_macro) is built by model 'nasnet_macro'")
        if not self.width_multiplier > 0 or (self.width_multiplier != 1.0 and not self.family.widths):
            scaled = sorted(name for name, family in MODEL_FAMILIES.items() if family.widths)
            raise ValueError(f"width_multiplier: a positive scale of {scaled}' widths, got {self.width_multiplier} "
                             f"for {self.name!r}")
        if not self.family.nasnet and (self.aux_head or self.dropout or self.drop_path_keep_prob < 1.0):
            raise ValueError(f"{self.name}: aux_head, dropout and drop path are NASNet options")

    @property
    def family(self) -> ModelFamily:
        return MODEL_FAMILIES[self.name]

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (self.image_size, self.image_size, self.channels)

    @property
    def resolved_stem(self) -> str:
        if self.stem != "auto":
            return self.stem
        return "imagenet" if self.image_size >= IMAGENET_STEM_MIN_SIZE else "cifar"

    def with_filters(self, filters: int) -> "ModelSpec":
        """The same network at F = `filters` (a macro genotype's own F is part of it)."""
        if isinstance(self.genotype, MacroGenotype):
            return dataclasses.replace(self, genotype=self.genotype.resized(filters=filters))
        return dataclasses.replace(self, filters=filters)

    def nasnet_config(self) -> NasNetConfig:
        return NasNetConfig(
            num_cells=3 * self.num_cells, filters=self.filters, stem=self.resolved_stem,
            dropout=self.dropout, drop_path_keep_prob=self.drop_path_keep_prob, aux_head=self.aux_head,
            fused_batch_norm=self.fused_batch_norm,
        )


def model_spec(config: TrainConfig, num_classes: int) -> ModelSpec:
    """The network a full training run (`amoeba train`, promote) of `config` builds."""
    return ModelSpec(
        name=config.model, num_classes=num_classes, image_size=config.image_size,
        num_cells=config.num_cells, filters=config.filters, dropout=config.dropout,
        drop_path_keep_prob=config.drop_path_keep_prob, aux_head=config.aux_weight > 0,
        genotype=config.genotype, width_multiplier=config.width_multiplier,
    )


def build_model(spec: ModelSpec) -> keras.Model:
    """The network `spec` names, for image_size x image_size x 3 inputs; `model_report(model)` gives
    its trainable parameters and multiply-adds."""
    return spec.family.build(spec)


def init_from_data(model: keras.Model, config: TrainConfig) -> bool:
    """Sets the weights of `model` (built from `model_spec(config, ...)`) that its family computes
    from the training data of `config.data` (airbench94: the whitening conv); whether it had any.
    The trainer calls it once after building the model, before restoring a checkpoint (which then
    holds them). This module reads no data itself: the family's `from_data` does."""
    family = MODEL_FAMILIES[config.model]
    if family.from_data is None:
        return False
    family.from_data(model, config)
    return True


def model_report(model: keras.Model) -> dict[str, int]:
    """Size and cost of the inference network, as published figures count them: trainable
    parameters (BN moving statistics excluded) and multiply-adds per example. The auxiliary head
    (training only; the second output) is excluded."""
    if len(model.outputs) > 1:
        model = keras.Model(model.inputs, model.outputs[0])
    params = sum(math.prod(w.shape) for w in model.trainable_weights)
    return {"params": int(params), "multiply_adds": count_multiply_adds(model)}


def count_params(spec: ModelSpec) -> int:
    """The inference network's trainable parameters (model_report's count) of `spec`."""
    keras.backend.clear_session()
    params = model_report(build_model(spec))["params"]
    keras.backend.clear_session()
    return params


def match_filters(spec: ModelSpec, target_params: int, tolerance: float = 0.1) -> tuple[int, int]:
    """(filters, params): the first-stack filters F that bring a NASNet `spec` closest to
    `target_params` (each count builds the network: 2-4 s here, so `closest_filters` guesses
    well). Raises ValueError when the closest is off by more than `tolerance` (e.g. a target below
    the smallest network)."""
    if not spec.family.nasnet:
        raise ValueError(f"{spec.name}: only NASNet networks have filters to match")
    best, params = closest_filters(lambda f: count_params(spec.with_filters(f)), target_params,
                                   MIN_FILTERS[spec.resolved_stem])
    if abs(params - target_params) > tolerance * target_params:
        raise ValueError(f"the closest size of this cell is F={best} with {params:,} parameters, more than "
                         f"{tolerance:.0%} off the target {target_params:,}")
    return best, params


def closest_filters(sized: Callable[[int], int], target: int, low: int, most: int = 1 << 14) -> tuple[int, int]:
    """(F, sized(F)): the F from `low` up whose `sized(F)` (growing with F) is closest to `target`
    (the smaller F on a tie), each F sized once and a few in all: each guess follows the power law
    through the two counts nearest the target (F squared, for a network's parameters, before there
    are two), where a bisection takes twice as many. Raises ValueError when no F up to `most`
    reaches the target."""
    seen: dict[int, int] = {}

    def count(f: int) -> int:
        if f not in seen:
            seen[f] = sized(f)
        return seen[f]

    if count(low) >= target:
        return low, seen[low]
    high = None  # count(low) < target <= count(high) once found
    while high is None or high - low > 1:
        near = sorted(seen, key=lambda f: abs(math.log(seen[f] / target)))[:2]
        power = 2.0 if len(near) < 2 else math.log(seen[near[0]] / seen[near[1]]) / math.log(near[0] / near[1])
        guess = near[0] * (target / seen[near[0]]) ** (1 / max(power, 0.5))
        if high is None:
            probe = max(low + 1, math.ceil(1.02 * guess))  # a little over: the target is bracketed at once
            if probe > most:
                raise ValueError(f"no F up to {most} reaches {target:,} parameters")
        else:
            probe = min(max(round(guess), low + 1), high - 1)
        low, high = (probe, high) if count(probe) < target else (low, probe)
    best = min((low, high), key=lambda f: (abs(seen[f] - target), f))
    return best, seen[best]


def split_outputs(outputs):
    """(logits, aux_logits or None) from a model built here."""
    if isinstance(outputs, (list, tuple)):
        return outputs[0], outputs[1]
    return outputs, None
