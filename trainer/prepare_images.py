"""The images `amoeba prepare` stores: each is checked (read, decoded, its size taken; the reason
it is unusable otherwise, in our words: the decoders' own stderr lines are dropped, every other
line kept) and later encoded into its record, RGB JPEGs byte for byte and other images (grey or
CMYK JPEG, PNG, GIF, BMP, WebP) converted to RGB JPEG. `amoeba predict` checks its images here too.

This module must not read CSVs, write files or build models.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
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


# Lines the image decoders write to fd 2 about a bad image, each reported in our words instead:
# TensorFlow's (`E0000 ... jpeg_mem.cc:331] Premature end of JPEG data`) and libjpeg's (jerror.h).
DECODER_LINES = re.compile(
    rb"(jpeg_mem\.cc|jpeg_handle\.cc|png_io\.cc|gif_io\.cc|Premature end of JPEG|Corrupt JPEG data|"
    rb"^Bogus |^Improper call to JPEG library|^Invalid JPEG file structure|^Not a JPEG file|"
    rb"^Unsupported (marker type|JPEG process|JPEG data precision|color conversion)|^Huffman table 0x|"
    rb"^Quantization table 0x|^Invalid SOS parameters|^Inconsistent progression sequence|"
    rb"^Warning: unknown JFIF revision|^Application transferred too|^JPEG datastream contains no image|"
    rb"^Sampling factors too large|^Empty JPEG image|^Didn't expect more than one scan|^libpng (warning|error))")
# The reader of fd 2 while decoder lines are hidden: a process of its own, so that a fatal message
# written just before an abort still gets out (the process reads until the last writer is gone).
_FILTER = ("import re, sys\ndrop = re.compile(sys.argv[1].encode())\nfor line in sys.stdin.buffer:\n"
           "    if not drop.search(line):\n        sys.stderr.buffer.write(line)\n        sys.stderr.buffer.flush()\n")
_lock = threading.Lock()
_depth = 0  # uses of decoder_lines_hidden now open, in all threads
_saved: tuple[int, subprocess.Popen] | None = None  # the real fd 2, and the filter in its place


def _swap_in_filter() -> tuple[int, subprocess.Popen] | None:
    """fd 2 made a pipe into a filter process that writes every line but decoder lines to the real
    stderr; the real stderr's fd and the process. None (fd 2 left as it is, nothing hidden) when
    the filter cannot be started."""
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    try:
        reader = subprocess.Popen([sys.executable, "-I", "-S", "-c", _FILTER, DECODER_LINES.pattern.decode()],
                                  stdin=read_end, stdout=subprocess.DEVNULL, stderr=saved)
    except (OSError, subprocess.SubprocessError):
        for fd in (saved, read_end, write_end):
            os.close(fd)
        return None
    os.close(read_end)
    os.dup2(write_end, 2)
    os.close(write_end)
    return saved, reader


def _swap_out_filter(saved: int, reader: subprocess.Popen) -> None:
    """The real stderr back on fd 2; waits (a little) for the filter to write what it holds."""
    sys.stderr.flush()
    os.dup2(saved, 2)  # the pipe's last writer gone (unless a child process holds it): the filter ends
    os.close(saved)
    try:
        reader.wait(timeout=5)
    except subprocess.TimeoutExpired:  # a child process started inside still writes to it: it goes on
        pass


@contextlib.contextmanager
def decoder_lines_hidden() -> Iterator[None]:
    """While images are checked: the decoders' own stderr lines (DECODER_LINES: libjpeg's `Bogus
    Huffman table definition`, TensorFlow's `E0000 ... jpeg_mem.cc] Premature end of JPEG data`)
    are dropped, as each bad image is reported in our words instead; every other line written to
    stderr (fd 2) gets through. Reentrant and thread-safe: only the outermost use swaps fd 2.
    Shown as usual when TF_CPP_MIN_LOG_LEVEL is unset or 0 (`amoeba --verbosity=1`); the `amoeba`
    command sets it to 2 otherwise."""
    global _depth, _saved
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") == "0":
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = _swap_in_filter()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                saved, _saved = _saved, None
                _swap_out_filter(*saved)


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
