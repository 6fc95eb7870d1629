"""The images `amoeba prepare` stores: each is checked (read, decoded, its size taken; the reason
it is unusable otherwise) and later encoded into its record, RGB JPEGs byte for byte and other
images (grey or CMYK JPEG, PNG, GIF, BMP, WebP) converted to RGB JPEG.

This module must not read CSVs, write files or build models.
"""

from __future__ import annotations

from dataclasses import dataclass

import tensorflow as tf

from trainer import records
from trainer.prepare_inputs import Row

JPEG_QUALITY = 95


@dataclass(frozen=True)
class ImageInfo:
    height: int
    width: int
    convert: bool  # not an RGB JPEG: stored re-encoded as one



def _op_message(err: Exception) -> str:
    """A TensorFlow op error's first line, without the op's name and function."""
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    if text.startswith("{{function_node"):
        text = text.split("}}", 1)[-1].strip()
    return text.split(" [Op:", 1)[0].strip()


def _read_image(source: str) -> bytes:
    with tf.io.gfile.GFile(source, "rb") as f:
        return f.read()


def _decode_rgb(data: bytes) -> tf.Tensor:
    return tf.io.decode_image(data, channels=3, expand_animations=False)


def inspect_image(source: str) -> ImageInfo | str:
    """The image's size, or the reason it is unusable (never raises for a bad image)."""
    try:
        data = _read_image(source)
    except tf.errors.NotFoundError:
        return "file not found"
    except tf.errors.OpError as err:
        return f"cannot read file ({_op_message(err)})"
    if not data:
        return "empty file"
    try:
        image = _decode_rgb(data)
        components = int(tf.image.extract_jpeg_shape(data)[2]) if data[:3] == b"\xff\xd8\xff" else 0
    except (tf.errors.OpError, ValueError) as err:
        if data[:3] == b"\xff\xd8\xff" and not data.rstrip(b"\x00").endswith(b"\xff\xd9"):
            return f"truncated JPEG (no end-of-image marker; {_op_message(err)})"
        return f"cannot decode image ({_op_message(err)})"
    height, width = int(image.shape[0]), int(image.shape[1])
    if not height or not width:
        return "image has no pixels"
    return ImageInfo(height, width, convert=components != 3)


def encode_row(row: Row, info: ImageInfo, label_id: int) -> bytes:
    """The serialized record of a checked row (read again; converted to RGB JPEG when needed)."""
    try:
        data = _read_image(row.source)
        if info.convert:
            data = tf.io.encode_jpeg(_decode_rgb(data), quality=JPEG_QUALITY).numpy()
    except (tf.errors.OpError, ValueError) as err:
        raise ValueError(f"{row.csv_path}:{row.line}: {row.path}: changed since it was checked "
                         f"({_op_message(err)}); the output dir holds a partial set: remove it and "
                         f"run again") from None
    return records.make_example(data, label_id, row.label, info.height, info.width, row.path).SerializeToString()
