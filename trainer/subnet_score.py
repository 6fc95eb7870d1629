"""Scoring a subnet of a trained supernet (trainer/supernet_training.py) in seconds, as a search trial
with `--evaluator=supernet` does instead of training the candidate.

The subnet inherits the supernet's weights; its BN statistics are recalibrated on the first
RECAL_IMAGES training images (unaugmented, in batches of RECAL_BATCH: each layer's pooled mean and
variance over them, as Single Path One-Shot and BigNAS do); its accuracy and loss are the proxy's
validation images' (with the proxy's --eval_tta views). Its size and batch-1 latency are those of
the subnet as a stand-alone network (trainer/supernet.py `standalone`: the Keras net of its
genotype with the inherited weights), by --latency_runtime (tflite: converted and run by LiteRT).
A worker loads the supernet once (`scorer`) and scores trial after trial. This module must not
train or import Ray.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from core.proxy_config import ProxyConfig
from searchspace.convnet import ConvNetGenotype, ConvNetSpace
from trainer.candidate_network import batch1_latency_ms, inference_function, tflite_batch1_latency_ms
from trainer.candidate_step import eval_step_function
from trainer.models import model_report
from trainer.proxy_data import ArrayDataset, eval_pipeline, model_input
from trainer.supernet import Supernet, arch_signature, standalone, subnet_arch
from trainer.supernet_training import CHECKPOINT, DONE, build_supernet, load_state
from trainer.worker_setup import GRAPPLER_OFF, graph_options

RECAL_IMAGES = 2000  # training images whose statistics each subnet's BN takes
RECAL_BATCH = 500
EVAL_BATCH = 500
_SCORERS: dict[tuple[str, str], "SubnetScorer"] = {}  # one supernet a worker: the last loaded


class SubnetScorer:
    """A trained supernet loaded from `directory`, with its traced passes and the recalibration images."""

    def __init__(self, space: ConvNetSpace, proxy: ProxyConfig, data: ArrayDataset, directory: str) -> None:
        if not os.path.exists(os.path.join(directory, DONE)):
            raise ValueError(f"{directory}: no trained supernet ({DONE} missing)")
        self.proxy, self.data = proxy, data
        self.model: Supernet = build_supernet(space, proxy, data)
        load_state({"model": [v.value for v in self.model.variables]}, os.path.join(directory, CHECKPOINT),
                   only=("model",))
        batch = min(RECAL_BATCH, len(data.x_train))
        count = min(RECAL_IMAGES, len(data.x_train)) // batch * batch
        self.recal_images = [model_input(tf.constant(data.x_train[i:i + batch])) for i in range(0, count, batch)]
        image = tf.TensorSpec([None, *data.input_shape], tf.float32)
        signature = [image, arch_signature(len(self.model.frame.stages))]
        self.collect = tf.function(lambda x, arch: self.model.forward(x, arch, training=True, collect=True),
                                   input_signature=signature, autograph=False)
        self.infer = tf.function(lambda x, arch: self.model.forward(x, arch), input_signature=signature,
                                 autograph=False)

    def recalibrate(self, arch: dict[str, np.ndarray]) -> None:
        """The subnet's BN statistics from the recalibration images."""
        for norm in self.model.norms():
            norm.set_moments_from_sums()  # clears what an earlier call left
        for images in self.recal_images:
            self.collect(images, arch)
        for norm in self.model.norms():
            norm.set_moments_from_sums()

    def evaluate(self, arch: dict[str, np.ndarray]) -> dict[str, float]:
        """Validation accuracy and loss of the recalibrated subnet (the proxy trainer's evaluation step)."""
        correct = loss = 0.0
        data = self.data
        step = eval_step_function(lambda x: self.infer(x, arch), self.proxy.eval_tta)
        for images, labels, weights in eval_pipeline(data.x_val, data.y_val, min(EVAL_BATCH, len(data.x_val))):
            hits, losses = step(images, labels, weights)
            correct, loss = correct + float(hits), loss + float(losses)
        return {"val_accuracy": correct / len(data.x_val), "val_loss": loss / len(data.x_val)}

    def subnet(self, genotype: ConvNetGenotype) -> keras.Model:
        """The recalibrated subnet as a stand-alone Keras net with its inherited weights."""
        arch = subnet_arch(genotype, self.model.frame)
        with graph_options(GRAPPLER_OFF):
            self.recalibrate(arch)
        return standalone(self.model, genotype)

    def score(self, genotype: ConvNetGenotype, max_latency_ms: float = 0.0) -> dict[str, Any]:
        """A trial's metrics: accuracy and loss inherited, size and latency of the stand-alone subnet;
        over `max_latency_ms`: its size and latency only (the search records it infeasible)."""
        start = time.perf_counter()
        arch = subnet_arch(genotype, self.model.frame)
        net = standalone(self.model, genotype)
        metrics: dict[str, Any] = {**model_report(net), **self.latency(net), "evaluator": "supernet"}
        if max_latency_ms and metrics["latency_ms"] > max_latency_ms:
            return {"val_accuracy": math.nan, **metrics}
        with graph_options(GRAPPLER_OFF):
            self.recalibrate(arch)
            metrics.update(self.evaluate(arch))
        metrics.update(recal_images=len(self.recal_images) * int(self.recal_images[0].shape[0]),
                       validation_images=len(self.data.x_val), score_seconds=time.perf_counter() - start)
        return metrics

    def latency(self, net: keras.Model) -> dict[str, float]:
        """The stand-alone subnet's batch-1 latency by the proxy's runtime, and the seconds it took."""
        image = model_input(tf.constant(self.data.x_val[:1]))
        start = time.perf_counter()
        if self.proxy.latency_runtime == "tflite":
            latency_ms = tflite_batch1_latency_ms(net, image)
        else:
            latency_ms = batch1_latency_ms(inference_function(net, self.data.input_shape), image)
        return {"latency_ms": latency_ms, "latency_seconds": time.perf_counter() - start}


def scorer(space: ConvNetSpace, proxy: ProxyConfig, data: ArrayDataset, directory: str) -> SubnetScorer:
    """This worker's scorer of the supernet in `directory` (loaded at its first trial, then kept)."""
    key = (os.path.abspath(directory), proxy.data_key())
    if key not in _SCORERS:
        _SCORERS.clear()
        _SCORERS[key] = SubnetScorer(space, proxy, data, directory)
    return _SCORERS[key]
