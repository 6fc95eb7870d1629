"""Export a trained model as a SavedModel for TF Serving / Vertex AI, and predict with one.

Signatures: `serving_default` takes encoded image bytes ([None] tf.string, input `image_bytes`)
and returns `probabilities`, `classes` and `class_names`; `serving_float` takes preprocessed
float32 images. Preprocessing is the evaluation pipeline's own function, so serving matches
evaluation. `labels.txt` beside saved_model.pb lists the class names. `predict` checks each image
first (trainer/prepare_images.py, as `amoeba prepare` does), so a bad one is named and the others
are classified. Must not train.
"""

from __future__ import annotations

from typing import Sequence

import keras
import numpy as np
import tensorflow as tf

from core import storage
from trainer.models import split_outputs
from trainer.prepare_images import decoder_lines_hidden, inspect_data, op_message
from trainer.records import preprocess_for_eval


def export_model(model: keras.Model, export_dir: str, image_size: int, labels: Sequence[str],
                 center_crop: bool = True) -> None:
    class_names = tf.constant(list(labels))

    def classify(images):
        logits, _ = split_outputs(model(images, training=False))
        probabilities = tf.nn.softmax(tf.cast(logits, tf.float32))
        classes = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"probabilities": probabilities, "classes": classes,
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
    storage.write_text(storage.join(export_dir, "labels.txt"), "\n".join(labels) + "\n")


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


def predict(export_dir: str, image_paths: Sequence[str], top_k: int = 5) -> list[dict]:
    """For each image (local or gs:// path), in order, {"image", "predictions"}: the top-k labels with
    probabilities; or {"image", "error"}: one line on why it could not be classified (a missing,
    truncated or undecodable file), the other images classified all the same."""
    loaded = tf.saved_model.load(export_dir)
    labels = storage.read_text(storage.join(export_dir, "labels.txt")).splitlines()
    with decoder_lines_hidden():
        checked = [_read_checked(path) for path in image_paths]
        readable = [data for data, _ in checked if data is not None]
        classified = iter(_classify(loaded.signatures["serving_default"], readable) if readable else [])
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
