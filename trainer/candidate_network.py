"""A search candidate's proxy network and the costs measured on it before training: its size
(trainable parameters, multiply-adds) and its inference latency at batch 1.

The network comes from the model-family table (trainer/models.py) by the candidate's search space:
NASNet cells ("nasnet") build a NASNet network of N cells per stack and F filters with the CIFAR
stem. Evaluation and the batch-1 latency share one traced inference function (any batch size, one
trace). The latency is the traced Keras model's, or with --latency_runtime=tflite the network's
converted to TFLite and run by LiteRT's interpreter. This module must not train or read data.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import keras
import tensorflow as tf

from core.proxy_config import ProxyConfig
from trainer.airbench import whiten_from_images
from trainer.batch_norm import set_batch_norm
from trainer.export_formats import tflite_interpreter
from trainer.models import ModelSpec, build_model, family_for_space, model_report
from trainer.proxy_data import eval_pipeline, proxy_shape
from trainer.worker_setup import GRAPPLER_OFF, graph_options, reset_keras

LATENCY_REPEATS = 10  # timed batch-1 calls (after one warm-up) whose median is latency_ms


def proxy_network(genotype: Any, proxy: ProxyConfig, input_shape: tuple[int, ...], num_classes: int,
                  fused_batch_norm: bool, space: str = "nasnet",
                  train_images: Any = None) -> tuple[keras.Model, dict[str, int]]:
    """The candidate's proxy network, built by the model family of its `space` (N cells per stack,
    F filters, CIFAR stem, for NASNet cells) with the proxy's BN momentum and epsilon, and its size (trainable params, multiply_adds per
    image). A network with a whitening conv (trainer/airbench.py) whitens the first of
    `train_images` (the proxy's training images, uint8 or in [-1, 1]) when they are given."""
    height, width, channels = input_shape
    if height != width:
        raise ValueError(f"proxy images must be square, got {height}x{width}")
    spec = ModelSpec(family_for_space(space), num_classes=num_classes, image_size=height, channels=channels,
                     num_cells=proxy.num_cells, filters=proxy.filters, stem="cifar",
                     fused_batch_norm=fused_batch_norm, genotype=genotype)
    model = build_model(spec)
    set_batch_norm(model, proxy.bn_momentum, proxy.bn_epsilon)
    if train_images is not None:
        whiten_from_images(model, train_images)
    return model, model_report(model)


def candidate_size(genotype: Any, proxy: ProxyConfig, space: str = "nasnet") -> dict[str, int]:
    """The proxy network's trainable parameters and multiply-adds, built without reading its data
    (a search's size limits judge a child by this before it is trained)."""
    reset_keras()
    try:
        return proxy_network(genotype, proxy, *proxy_shape(proxy), fused_batch_norm=True, space=space)[1]
    finally:
        reset_keras()


def median_ms(seconds: list[float]) -> float | None:
    """The median of `seconds` in milliseconds; None for none."""
    return 1000.0 * statistics.median(seconds) if seconds else None


def inference_function(model: keras.Model, input_shape: tuple[int, ...]) -> Callable[[tf.Tensor], tf.Tensor]:
    """The model's inference pass traced once for any batch size: batch-1 latency and evaluation
    share the trace (an eager call costs 20x the graph's at batch 1 on CPU: Python per op)."""
    with graph_options(GRAPPLER_OFF):
        return tf.function(lambda x: model(x, training=False), autograph=False,
                           input_signature=[tf.TensorSpec([None, *input_shape], tf.float32)])


def batch1_latency_ms(infer: Callable[[tf.Tensor], tf.Tensor], image: tf.Tensor) -> float:
    """Median of LATENCY_REPEATS inference calls at batch 1, after one warm-up (the trace)."""
    with graph_options(GRAPPLER_OFF):
        return _median_call_ms(lambda: infer(image).numpy())


def tflite_batch1_latency_ms(model: keras.Model, image: tf.Tensor) -> float:
    """The network converted to TFLite (float32, trainer/export_formats.py's conversion) and run by
    LiteRT's interpreter on this CPU at batch 1: the median of LATENCY_REPEATS calls after one warm-up."""
    interpreter = tflite_interpreter(model, int(image.shape[1]), int(image.shape[-1]))
    interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], list(image.shape))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], image.numpy())
    return _median_call_ms(interpreter.invoke)


def _median_call_ms(call: Callable[[], Any]) -> float:
    call()
    times = []
    for _ in range(LATENCY_REPEATS):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return median_ms(times)


def batch1_latency(infer: Callable, data: Any, model: keras.Model, runtime: str = "keras") -> dict[str, float]:
    """latency_ms on the first validation image by `runtime` (ProxyConfig.latency_runtime), and the
    seconds it took (the inference trace, which evaluation reuses, and the calls; with tflite the
    conversion too)."""
    first_image = next(iter(eval_pipeline(data.x_val[:1], data.y_val[:1], 1)))[0]
    t_latency = time.perf_counter()
    if runtime == "tflite":
        latency_ms = tflite_batch1_latency_ms(model, first_image)
        with graph_options(GRAPPLER_OFF):
            infer(first_image).numpy()  # the trace evaluation reuses, made here as with keras
    else:
        latency_ms = batch1_latency_ms(infer, first_image)
    return {"latency_ms": latency_ms, "latency_seconds": time.perf_counter() - t_latency}
