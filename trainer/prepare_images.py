"""The images `amoeba prepare` stores: each is checked (read, decoded, its size taken; the reason
it is unusable otherwise, in our words: the decoder's own stderr lines are hidden) and later
encoded into its record, RGB JPEGs byte for byte and other images (grey or CMYK JPEG, PNG, GIF,
BMP, WebP) converted to RGB JPEG. `amoeba predict` checks its images here too.

This module must not read CSVs, write files or build models.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from typing import Iterator

import tensorflow as tf

from trainer import records
from trainer.prepare_inputs import Row

JPEG_QUALITY = 95


@dataclass(frozen=True)
class ImageInfo:
    height: int
    width: int
    convert: bool  # not an RGB JPEG: stored re-encoded as one



def op_message(err: Exception) -> str:
    """A TensorFlow op error's first line, without the op's name and function."""
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    if text.startswith("{{function_node"):
        text = text.split("}}", 1)[-1].strip()
    return text.split(" [Op:", 1)[0].strip()


@contextlib.contextmanager
def decoder_lines_hidden() -> Iterator[None]:
    """While images are checked: what native code writes to stderr (libjpeg's `Bogus Huffman table
    definition`, TensorFlow's `E0000 ... jpeg_mem.cc] Premature end of JPEG data`) goes nowhere, as
    each bad image is reported in our words instead. Shown as usual when TF_CPP_MIN_LOG_LEVEL is
    unset or 0 (`amoeba --verbosity=1`); the `amoeba` command sets it to 2 otherwise."""
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") == "0":
        yield
        return
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _read_image(source: str) -> bytes:
    with tf.io.gfile.GFile(source, "rb") as f:
        return f.read()


def _decode_rgb(data: bytes) -> tf.Tensor:
    return tf.io.decode_image(data, channels=3, expand_animations=False)


def truncated_jpeg(data: bytes) -> bool:
    """Whether `data` is a JPEG cut short: its segments end before the first scan, or no
    end-of-image marker follows the scan (inside a scan 0xFF 0xD9 can only be that marker). Bytes
    that are not a JPEG's segments are left to the decoder (False)."""
    if data[:2] != b"\xff\xd8":
        return False
    i = 2
    while True:
        while data[i:i + 2] == b"\xff\xff":  # fill bytes before a marker
            i += 1
        if i + 2 > len(data):
            return True
        if data[i] != 0xFF:
            return False
        marker = data[i + 1]
        if marker == 0xD9:
            return False
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        if i + 4 > len(data):
            return True
        end = i + 2 + int.from_bytes(data[i + 2:i + 4], "big")
        if marker == 0xDA:
            return b"\xff\xd9" not in data[end:]
        i = end


def inspect_image(source: str) -> ImageInfo | str:
    """The image's size, or the reason it is unusable (never raises for a bad image)."""
    try:
        data = _read_image(source)
    except tf.errors.NotFoundError:
        return "file not found"
    except tf.errors.OpError as err:
        return f"cannot read file ({op_message(err)})"
    return inspect_data(data)


def inspect_data(data: bytes) -> ImageInfo | str:
    """An encoded image's size, or the reason it is unusable. A truncated JPEG is found here, before
    TensorFlow's decoder would write its own lines about it to stderr."""
    if not data:
        return "empty file"
    if truncated_jpeg(data):
        return "truncated JPEG (no end-of-image marker)"
    try:
        image = _decode_rgb(data)
        components = int(tf.image.extract_jpeg_shape(data)[2]) if data[:3] == b"\xff\xd8\xff" else 0
    except (tf.errors.OpError, ValueError) as err:
        return f"not a decodable image ({op_message(err)})"
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
        where = row.where if row.line == 0 else f"{row.where}: {row.path}"
        raise ValueError(f"{where}: changed since it was checked "
                         f"({op_message(err)}); the output dir holds a partial set: remove it and "
                         f"run again") from None
    return records.make_example(data, label_id, row.label, info.height, info.width, row.path).SerializeToString()
