"""Export a trained model as a SavedModel for TF Serving / Vertex AI, and predict with one.

Signatures: `serving_default` takes encoded image bytes ([None] tf.string, input `image_bytes`)
and returns `probabilities`, `classes` and `class_names`; `serving_float` takes preprocessed
float32 images. Preprocessing is the evaluation pipeline's own function, so serving matches
evaluation. `labels.txt` beside saved_model.pb lists the class names. Must not train.
"""

from __future__ import annotations

from typing import Sequence

import keras
import numpy as np
import tensorflow as tf

from core import storage
from trainer.models import split_outputs
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


def _name_undecodable(images: Sequence[bytes], names: Sequence[str]) -> ValueError:
    """The error for the first image TensorFlow cannot decode (the signature only says one failed)."""
    for data, name in zip(images, names):
        try:
            tf.io.decode_image(data, channels=3, expand_animations=False)
        except (tf.errors.InvalidArgumentError, ValueError) as err:
            return ValueError(f"{name}: not a decodable image ({str(err).splitlines()[0]})")
    return ValueError(f"the model could not read the images {list(names)}")


def predict(export_dir: str, image_paths: Sequence[str], top_k: int = 5) -> list[dict]:
    """Top-k labels with probabilities for each image (local or gs:// paths)."""
    loaded = tf.saved_model.load(export_dir)
    labels = storage.read_text(storage.join(export_dir, "labels.txt")).splitlines()
    images = []
    for path in image_paths:
        if not tf.io.gfile.exists(path):
            raise ValueError(f"{path}: no such image")
        with tf.io.gfile.GFile(path, "rb") as f:
            images.append(f.read())
    try:  # the signature decodes each image once; only on failure are they decoded again, to name it
        outputs = loaded.signatures["serving_default"](image_bytes=tf.constant(images))
    except tf.errors.InvalidArgumentError:
        raise _name_undecodable(images, image_paths) from None
    probabilities = outputs["probabilities"].numpy()
    results = []
    for path, probs in zip(image_paths, probabilities):
        best = np.argsort(-probs)[: min(top_k, len(labels))]
        results.append({"image": path,
                        "predictions": [{"label": labels[i], "class_id": int(i),
                                         "probability": float(probs[i])} for i in best]})
    return results
