"""Export a trained model (a SavedModel for TF Serving / Vertex AI, TFLite, ONNX: the formats of
core/export_formats.py's table) and predict with any of them.

The SavedModel's signatures: `serving_default` takes encoded image bytes ([None] tf.string, input
`image_bytes`) and returns `probabilities`, `classes`, `class_names` and `logits`; `serving_float`
takes preprocessed float32 images. The TFLite and ONNX files take preprocessed float32 images
(NHWC) and return logits. Preprocessing is the evaluation pipeline's own function, so serving
matches evaluation. Beside them: `labels.txt` (the class names), `export.json` (image size, crop,
formats) and `parity.json` (each file against the Keras model). `predict` checks each image first
(trainer/prepare_images.py, as `amoeba prepare` does), so a bad one is named and the others are
classified. Must not train.
"""

from __future__ import annotations

from typing import Sequence

import keras
import numpy as np
import tensorflow as tf

from core import storage
from core.export_formats import PARITY_FILE, check_formats
from trainer.export_formats import logits_model, parity, parity_line, runner, write_format
from trainer.models import split_outputs
from trainer.prepare_images import decoder_lines_hidden, inspect_data, op_message
from trainer.records import preprocess_for_eval

EXPORT_FILE = "export.json"


def export_model(model: keras.Model, export_dir: str, image_size: int, labels: Sequence[str],
                 center_crop: bool = True, *, images: np.ndarray,
                 formats: Sequence[str] = ("saved_model",)) -> dict[str, dict]:
    """Writes `formats` (core/export_formats.py's table) and labels.txt to export_dir, then checks
    each file's logits on `images` (float32, preprocessed as in evaluation) against the model's and
    writes parity.json: {format: its agreement and largest logit difference, by trainer/export_formats.py's
    `parity`}. ValueError naming the format when one is beyond its tolerance (the files stay, for a look)."""
    formats = check_formats(formats)
    if "saved_model" in formats:
        _write_saved_model(model, export_dir, image_size, center_crop, labels)
    written = [fmt for fmt in formats if fmt != "saved_model"]
    for fmt in written:
        write_format(model, export_dir, fmt, image_size)
    storage.write_text(storage.join(export_dir, "labels.txt"), "\n".join(labels) + "\n")
    storage.write_json(storage.join(export_dir, EXPORT_FILE), {"image_size": image_size, "center_crop": center_crop,
                                                                "formats": list(formats)})
    images = np.asarray(images, np.float32)
    expected = logits_model(model, image_size).predict_on_batch(images).astype(np.float64)
    checks = {fmt: parity(expected, runner(export_dir, fmt)(images), fmt) for fmt in formats}
    storage.write_json(storage.join(export_dir, PARITY_FILE), checks)
    beyond = [f"{fmt} ({parity_line(fmt, c)})" for fmt, c in checks.items() if not c["within_tolerance"]]
    if beyond:
        raise ValueError(f"{export_dir}: exported predictions differ from the Keras model's on {len(images)} "
                         f"evaluation images beyond tolerance: {'; '.join(beyond)} ({PARITY_FILE})")
    return checks


def _write_saved_model(model: keras.Model, export_dir: str, image_size: int, center_crop: bool,
                       labels: Sequence[str]) -> None:
    class_names = tf.constant(list(labels))

    def classify(images):
        logits, _ = split_outputs(model(images, training=False))
        logits = tf.cast(logits, tf.float32)
        probabilities = tf.nn.softmax(logits)
        classes = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"probabilities": probabilities, "classes": classes, "logits": logits,
                "class_names": tf.gather(class_names, classes)}

    def classify_bytes(image_bytes):
        images = tf.map_fn(lambda b: preprocess_for_eval(b, image_size, center_crop), image_bytes,
                           fn_output_signature=tf.float32)
        return classify(images)

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serving_default", classify_bytes,
                         input_signature=[tf.TensorSpec([None], tf.string, name="image_bytes")])
    archive.add_endpoint("serving_float", classify,
                         input_signature=[tf.TensorSpec([None, image_size, image_size, 3], tf.float32,
                                                        name="images")])
    archive.write_out(export_dir, verbose=False)


def _read_checked(path: str) -> tuple[bytes | None, str | None]:
    """(the image's bytes, None), or (None, why it cannot be classified): checked one by one, so that
    one bad image fails only itself, in our words rather than the serving signature's."""
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
    except tf.errors.NotFoundError:
        return None, "file not found"
    except tf.errors.OpError as err:
        return None, f"cannot read file ({op_message(err)})"
    checked = inspect_data(data)
    return (None, checked) if isinstance(checked, str) else (data, None)


def _classify_one(signature, image: bytes) -> np.ndarray | str:
    try:
        return signature(image_bytes=tf.constant([image]))["probabilities"].numpy()[0]
    except tf.errors.InvalidArgumentError as err:
        return f"the model could not read it ({op_message(err)})"


def _classify(signature, images: list[bytes]) -> list[np.ndarray | str]:
    """Each image's probabilities, or the reason the model could not read it: the images in one
    call, or one at a time should that call fail on one of them."""
    try:
        return list(signature(image_bytes=tf.constant(images))["probabilities"].numpy())
    except tf.errors.InvalidArgumentError:  # an image the checks passed but the model cannot read
        return [_classify_one(signature, image) for image in images]


def _bytes_classifier(export_dir: str, export_format: str):
    """A function like serving_default (encoded image bytes -> {"probabilities"}) that runs
    `export_format`'s file, the images preprocessed here as the SavedModel would."""
    path = storage.join(export_dir, EXPORT_FILE)
    saved = storage.read_json(path) if storage.exists(path) else None
    if saved is not None and export_format not in saved.get("formats", ()):  # a file of an older export: not read
        raise ValueError(f"{export_dir}: no {export_format} export here (exported: {', '.join(saved['formats'])}; "
                         "--export_format picks one)")
    if export_format == "saved_model":  # an export from before export.json: the SavedModel alone
        return tf.saved_model.load(export_dir).signatures["serving_default"]
    if saved is None:
        raise ValueError(f"{export_dir}: no {EXPORT_FILE}; export the model again (amoeba evaluate --export_dir)")
    run = runner(export_dir, export_format)

    def classify(image_bytes):
        images = tf.map_fn(lambda b: preprocess_for_eval(b, saved["image_size"], saved["center_crop"]), image_bytes,
                           fn_output_signature=tf.float32)
        return {"probabilities": tf.nn.softmax(tf.constant(run(images.numpy())))}
    return classify


def predict(export_dir: str, image_paths: Sequence[str], top_k: int = 5,
            export_format: str = "saved_model") -> list[dict]:
    """For each image (local or gs:// path), in order, {"image", "predictions"}: the top-k labels with
    probabilities, by `export_format`'s file and runtime; or {"image", "error"}: one line on why it
    could not be classified (a missing, truncated or undecodable file), the others classified all
    the same."""
    check_formats([export_format])
    classifier = _bytes_classifier(export_dir, export_format)
    labels = storage.read_text(storage.join(export_dir, "labels.txt")).splitlines()
    with decoder_lines_hidden():
        checked = [_read_checked(path) for path in image_paths]
        readable = [data for data, _ in checked if data is not None]
        classified = iter(_classify(classifier, readable) if readable else [])
    results = []
    for path, (data, error) in zip(image_paths, checked):
        probs = next(classified) if data is not None else error
        if isinstance(probs, str):
            results.append({"image": path, "error": probs})
            continue
        best = np.argsort(-probs)[: min(top_k, len(labels))]
        results.append({"image": path,
                        "predictions": [{"label": labels[i], "class_id": int(i),
                                         "probability": float(probs[i])} for i in best]})
    return results
