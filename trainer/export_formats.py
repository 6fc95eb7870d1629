"""Writing and running the exported files of core/export_formats.py's table (TFLite through
TensorFlow's converter, ONNX through Keras's own export and tf2onnx) and their parity with the Keras
model: top-1 agreement and the largest logit difference on evaluation images.

Must not train; imports an optional runtime (LiteRT, onnxruntime, tf2onnx) only when its format is
asked for.
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from core import storage
from core.export_formats import FORMATS, format_path, require
from trainer.models import split_outputs

Runner = Callable[[np.ndarray], np.ndarray]  # float32 images NHWC -> logits


def logits_model(model: keras.Model, image_size: int, channels: int = 3) -> keras.Model:
    """A functional model from float images to the logits alone (auxiliary heads dropped)."""
    images = keras.Input((image_size, image_size, channels), name="images")
    logits, _ = split_outputs(model(images, training=False))
    return keras.Model(images, keras.layers.Activation("linear", dtype="float32", name="logits")(logits))


def write_format(model: keras.Model, export_dir: str, fmt: str, image_size: int) -> str:
    """Writes `fmt`'s file (not the SavedModel: trainer/export.py does) and returns its path."""
    for module in FORMATS[fmt].writes_with:
        require(module, fmt)
    path = format_path(export_dir, fmt)
    wrapper = logits_model(model, image_size)
    if fmt == "onnx":
        register_erfc()
        local = path if "://" not in path else os.path.join(tempfile.mkdtemp(), FORMATS[fmt].file)
        spec = [tf.TensorSpec([None, image_size, image_size, 3], tf.float32, name="images")]
        wrapper.export(local, format="onnx", input_signature=spec, verbose=False)
        if local != path:
            storage.write_bytes(path, open(local, "rb").read())
        return path
    storage.write_bytes(path, tflite_bytes(wrapper, quantized=fmt == "tflite_int8"))
    return path


def tflite_bytes(wrapper: keras.Model, quantized: bool = False) -> bytes:
    """`wrapper` (logits_model's) as a TFLite flatbuffer by TensorFlow's converter: float32, or with
    `quantized` dynamic-range int8 weights and float activations."""
    with tempfile.TemporaryDirectory() as saved:  # from_keras_model's own route, without its printout
        wrapper.export(saved, format="tf_saved_model", verbose=False)
        converter = tf.lite.TFLiteConverter.from_saved_model(saved)
        if quantized:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        return converter.convert()


def tflite_interpreter(model: keras.Model, image_size: int, channels: int = 3) -> object:
    """LiteRT's interpreter over `model` converted to float32 TFLite (for a latency as deployed)."""
    module = require(FORMATS["tflite"].reads_with, "tflite")
    return module.Interpreter(model_content=tflite_bytes(logits_model(model, image_size, channels)))


def register_erfc() -> None:
    """Teaches tf2onnx TensorFlow's Erfc (exact GELU, tf.nn.gelu, is 0.5 x erfc(-x / sqrt 2)), which it
    lacks: erfc(x) = 1 - erf(x), ONNX's Erf and Sub. Once per process."""
    from tf2onnx import utils
    from tf2onnx.handler import tf_op

    if any("Erfc" in handlers for handlers in tf_op.get_opsets().get("", [])):
        return

    @tf_op("Erfc")
    class Erfc:  # noqa: F841 (registered by the decorator)
        @classmethod
        def version_9(cls, ctx, node, **kwargs):
            node.type = "Erf"
            dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
            one = ctx.make_const(utils.make_name("erfc_one"), np.array(1, dtype=dtype))
            minus = ctx.insert_new_node_on_output("Sub", node.output[0], name=utils.make_name(node.name),
                                                  inputs=[one.output[0], node.output[0]])
            ctx.copy_shape(node.output[0], minus.output[0])


def runner(export_dir: str, fmt: str) -> Runner:
    """A function from float images to logits that runs `fmt`'s file with its own runtime."""
    module = require(FORMATS[fmt].reads_with, fmt)
    path = format_path(export_dir, fmt)
    if fmt == "saved_model":
        signature = tf.saved_model.load(path).signatures["serving_float"]
        return lambda images: signature(images=tf.constant(images))["logits"].numpy()
    content = storage.read_bytes(path)
    if fmt == "onnx":
        session = module.InferenceSession(content, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return lambda images: session.run(None, {name: images})[0]
    interpreter = module.Interpreter(model_content=content)
    run = interpreter.get_signature_runner()
    name = interpreter.get_signature_list()["serving_default"]["inputs"][0]
    return lambda images: next(iter(run(**{name: images}).values()))


def logit_spread(logits: np.ndarray) -> float:
    """The logits' spread: their standard deviation about each image's mean (pooled over images), the
    scale of what tells the classes apart (a shift common to an image's logits changes no probability)."""
    centred = logits - np.mean(logits, axis=-1, keepdims=True)
    return float(np.sqrt(np.mean(np.square(centred))))


def parity(expected: np.ndarray, got: np.ndarray, fmt: str) -> dict:
    """`got` against the Keras logits `expected` (images x classes) by `fmt`'s rule: the largest logit
    difference, allowed `max_logit_diff` times the logits' magnitude or spread (`relative_to`), and the
    top-1 agreement on the images whose Keras top-2 margin is clear (at least `clear_margin` x the
    spread: near ties, an untrained model's near-uniform logits above all, agree by chance or flip by
    rounding, and count for nothing). With no clear image the agreement is not judged (None) and the
    logit difference alone decides. `top1_agreement` is over every image, for the record."""
    rule = FORMATS[fmt]
    if got.shape != expected.shape:
        raise ValueError(f"export format {fmt!r}: logits of shape {got.shape}, the Keras model's {expected.shape}")
    expected, got = np.asarray(expected, np.float64), np.asarray(got, np.float64)
    magnitude = max(1.0, float(np.max(np.abs(expected))))
    spread = max(logit_spread(expected), 1e-6 * magnitude)  # constant logits: float rounding only
    allowed = rule.max_logit_diff * (spread if rule.relative_to == "spread" else magnitude)
    diff = float(np.max(np.abs(got - expected)))
    same = np.argmax(got, -1) == np.argmax(expected, -1)
    ordered = np.sort(expected, -1)
    margin = ordered[:, -1] - ordered[:, -2] if expected.shape[-1] > 1 else np.full(len(expected), np.inf)
    clear = margin >= rule.clear_margin * spread
    agreement = float(np.mean(same[clear])) if clear.any() else None
    ok = diff <= allowed and (agreement is None or agreement >= rule.min_agreement)  # NaN logits: not ok
    return {"file": rule.file or ".", "images": int(len(expected)), "top1_agreement": round(float(np.mean(same)), 4),
            "clear_images": int(np.sum(clear)),
            "top1_agreement_clear": None if agreement is None else round(agreement, 4),
            "min_agreement": rule.min_agreement, "logit_spread": spread, "max_logit_diff": diff,
            "max_logit_diff_allowed": allowed, "relative_to": rule.relative_to, "within_tolerance": bool(ok)}


def parity_line(fmt: str, check: dict) -> str:
    """`parity`'s check of `fmt` in words: its agreement and its logit difference against the allowed."""
    rule = FORMATS[fmt]
    scale = "the logits' spread" if rule.relative_to == "spread" else "max(1, largest |logit|)"
    if check["clear_images"] == check["images"]:
        agreement = f"top-1 agreement {check['top1_agreement']}"
    elif check["clear_images"]:
        agreement = (f"top-1 agreement {check['top1_agreement_clear']} on the {check['clear_images']} images without "
                     f"a near tie ({check['top1_agreement']} on all)")
    else:
        agreement = f"top-1 agreement not judged, every image a near tie ({check['top1_agreement']} on all)"
    least = f", least {rule.min_agreement}" if rule.min_agreement else ""
    return (f"{agreement}{least}, largest logit difference {check['max_logit_diff']:.3g} (allowed "
            f"{check['max_logit_diff_allowed']:.3g}: {rule.max_logit_diff:g} x {scale})")
