"""A subnet of a trained supernet (trainer/supernet.py) written as an `amoeba train` model dir: its
stand-alone Keras net with the inherited weights and the BN statistics recalibrated for it
(trainer/subnet_score.py `SubnetScorer.subnet`), copied into the model of a Trainer of its
TrainConfig and saved as that trainer's checkpoint 0, beside train_config.json and labels.txt as
`amoeba train` writes them, and INHERITED (where the weights came from, and the genotype: a file
`amoeba train --model` reads). `amoeba evaluate` then evaluates and exports it with parity; `amoeba
train` on the dir fine-tunes it from step 0.

The copy goes layer by layer, by name, each layer's weights in order (the whitening conv's kernel
and bias, BN's gamma, beta and moving statistics, the convs' and the head's kernels), every shape
checked. experiments/commands/inherit.py reads the search (its settings, journal and recipe). This
module must not read a search's journal or settings, parse flags, train, or import Ray.
"""

from __future__ import annotations

from typing import Any, Mapping

import keras
import tensorflow as tf

from core import storage
from core.proxy_config import ProxyConfig
from core.train_config import TrainConfig
from searchspace.convnet import ConvNetGenotype, ConvNetSpace
from trainer.models import model_report
from trainer.proxy_data import load_proxy_data
from trainer.subnet_score import SubnetScorer
from trainer.train import Trainer

INHERITED = "inherited.json"  # in the model dir: the genotype and where its weights came from
CHECKPOINTS = "checkpoints"  # trainer/train.py's folder of them in a model dir


def existing_checkpoint(model_dir: str) -> str | None:
    """The latest checkpoint a model dir already holds, or None."""
    return tf.train.latest_checkpoint(storage.join(model_dir, CHECKPOINTS))


def write_model_dir(config: TrainConfig, space: ConvNetSpace, proxy: ProxyConfig, supernet_dir: str,
                    source: Mapping[str, Any]) -> dict[str, Any]:
    """`config.genotype`, a subnet of the supernet trained in `supernet_dir` (of `space`, on the
    proxy task `proxy`), as the model dir `config.model_dir` at step 0 with the inherited weights;
    `source` (the search, the trial, its inherited scores) is kept in INHERITED. ValueError when the
    dir already holds a checkpoint, or the genotype is no subnet of the supernet."""
    genotype = config.genotype
    if not isinstance(genotype, ConvNetGenotype):
        raise ValueError(f"{config.model_dir}: a convnet genotype (a supernet's subnet) is needed, got "
                         f"{type(genotype).__name__}")
    found = existing_checkpoint(config.model_dir)
    if found:
        raise ValueError(f"{config.model_dir}: already holds a checkpoint ({found}); give a new --model_dir")
    scorer = SubnetScorer(space, proxy, load_proxy_data(proxy), supernet_dir)
    subnet = scorer.subnet(genotype)  # ValueError when it is no subnet of the supernet
    trainer = Trainer(config)
    copy_weights(subnet, trainer.model, config.model_dir)
    if trainer.lookahead is not None:
        trainer.lookahead.start()  # its average is the inherited weights, not the model's first ones
    checkpoint = trainer.manager.save(checkpoint_number=0)
    trainer.write_config()
    recal_images = len(scorer.recal_images) * int(scorer.recal_images[0].shape[0])
    storage.write_json(storage.join(config.model_dir, INHERITED),
                       {**source, "genotype": genotype.to_json(), "key": genotype.key(), "recal_images": recal_images})
    return {**model_report(trainer.model), "checkpoint": checkpoint, "total_steps": trainer.total_steps,
            "recal_images": recal_images}


def copy_weights(source: keras.Model, target: keras.Model, where: str) -> int:
    """Every weight of `source`'s layers into `target`'s layer of the same name, in order; ValueError
    naming `where` and the layer when the two nets do not hold the same layers and shapes. Returns
    how many weights it copied."""
    weighted = {layer.name: layer for layer in source.layers if layer.weights}
    targets = {layer.name: layer for layer in target.layers if layer.weights}
    if set(weighted) != set(targets):
        raise ValueError(f"{where}: the model and the subnet hold other layers (only the model's: "
                         f"{sorted(set(targets) - set(weighted))}; only the subnet's: "
                         f"{sorted(set(weighted) - set(targets))})")
    copied = 0
    for name, layer in targets.items():
        pairs = list(zip(layer.weights, weighted[name].weights))
        wrong = [(w.name, tuple(w.shape), tuple(s.shape)) for w, s in pairs if tuple(w.shape) != tuple(s.shape)]
        if wrong or len(layer.weights) != len(weighted[name].weights):
            raise ValueError(f"{where}: layer {name}: the model's weights and the subnet's differ "
                             f"({wrong or f'{len(layer.weights)} against {len(weighted[name].weights)}'})")
        for weight, inherited in pairs:
            weight.assign(tf.cast(inherited.value, weight.dtype))
        copied += len(pairs)
    return copied
