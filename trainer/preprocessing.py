"""The one image preprocessing that every path to a model's input takes (graph functions on one image).

The search's proxy loader (trainer/proxy_data.py), training's whole-image augmentations ("cifar",
"airbench"), evaluation with and without cache, airbench94's whitening, the exported SavedModel's
bytes signature and `amoeba predict` all call `eval_pixels` (and `to_float`), so a model sees the
same pixels in the search, in training, in evaluation and once deployed:

    decode -> the centred square of crop_fraction x the shorter side -> resized with antialiasing
    to image_size (not resized when already that size) -> rounded and clipped to uint8
    -> x / 127.5 - 1 (the Inception/NASNet [-1, 1] convention; no dataset mean/std)

crop_fraction is 1.0 for CIFAR-style models (center_crop=False: the whole centre square, as the
search sees it) and CROP_FRACTION for ImageNet-style ones (center_crop=True). The uint8 stage,
`eval_pixels`, is what a cache holds (image_size-sized, 4 times smaller than floats); `to_float` is
the shared float stage. The "inception" augmentation's random crop (trainer/records.py) is resized
by `resize_pixels` alike. Non-square images are never squashed: a 1024x768 photo's model input is
its centred 768x768 square. This module must not read files or build models.
"""

from __future__ import annotations

import tensorflow as tf

CROP_FRACTION = 0.875  # eval centre crop of ImageNet-style models (224 of 256 in the tpu preprocessing)


def crop_fraction(center_crop: bool) -> float:
    """The share of the shorter side that the centred square keeps: CROP_FRACTION or all of it."""
    return CROP_FRACTION if center_crop else 1.0


def decode(encoded: tf.Tensor) -> tf.Tensor:
    """Encoded image bytes (JPEG; PNG/GIF/BMP/WebP also decode) -> uint8 [H, W, 3]. The image is
    decoded whole, not with decode_and_crop_jpeg (whose chroma upsampling differs at the crop edges)."""
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    return tf.ensure_shape(image, [None, None, 3])


def center_window(shape: tf.Tensor, fraction: float = CROP_FRACTION) -> tf.Tensor:
    """[y, x, size, size]: the centred square of `fraction` of the shorter side (at least 1 pixel)."""
    height, width = shape[0], shape[1]
    size = tf.cast(fraction * tf.cast(tf.minimum(height, width), tf.float32), tf.int32)
    size = tf.maximum(size, 1)
    return tf.stack([(height - size + 1) // 2, (width - size + 1) // 2, size, size])


def crop(image: tf.Tensor, window: tf.Tensor) -> tf.Tensor:
    """The [y, x, height, width] window of an [H, W, 3] image."""
    return tf.slice(image, tf.stack([window[0], window[1], 0]), tf.stack([window[2], window[3], 3]))


def resize_pixels(image: tf.Tensor, image_size: int) -> tf.Tensor:
    """uint8 [H, W, 3] -> uint8 [S, S, 3]: resized with antialiasing (a shrunk photo's fine detail
    averaged, not aliased), rounded and clipped; an image already S x S is returned as it is."""

    def resize() -> tf.Tensor:
        resized = tf.image.resize(image, [image_size, image_size], antialias=True)
        return tf.cast(tf.clip_by_value(tf.round(resized), 0.0, 255.0), tf.uint8)

    shape = tf.shape(image)
    same = tf.logical_and(tf.equal(shape[0], image_size), tf.equal(shape[1], image_size))
    return tf.ensure_shape(tf.cond(same, lambda: image, resize), [image_size, image_size, 3])


def square_pixels(image: tf.Tensor, image_size: int, center_crop: bool = True) -> tf.Tensor:
    """A decoded uint8 image -> uint8 [S, S, 3]: its centred square (crop_fraction), resized."""
    window = center_window(tf.shape(image), crop_fraction(center_crop))
    return resize_pixels(crop(image, window), image_size)


def eval_pixels(encoded: tf.Tensor, image_size: int, center_crop: bool = True) -> tf.Tensor:
    """Encoded image bytes -> uint8 [S, S, 3], what the model reads before `to_float` (and what a
    cache keeps): decoded, centred square, resized (module docstring)."""
    return square_pixels(decode(encoded), image_size, center_crop)


def to_float(pixels: tf.Tensor) -> tf.Tensor:
    """uint8 pixels (any shape) -> float32 in [-1, 1]: x / 127.5 - 1."""
    return tf.cast(pixels, tf.float32) / 127.5 - 1.0


def preprocess_for_eval(encoded_jpeg: tf.Tensor, image_size: int, center_crop: bool = True) -> tf.Tensor:
    """Encoded image bytes -> float32 [S, S, 3] in [-1, 1]: `eval_pixels`, then `to_float`. The
    evaluation pipeline, the SavedModel's serving signature, `amoeba predict` and airbench94's
    whitening all call it; center_crop=False (CIFAR-style models) keeps the whole centre square."""
    return to_float(eval_pixels(encoded_jpeg, image_size, center_crop))
