"""airbench94 (Keller Jordan's CIFAR-10 speed-run network, 94% in 3.83 s on an A100), written from
issue 35's description, as a model family of trainer/models.py.

The network, for 32x32 RGB inputs (in [-1, 1], as our pipelines give them):
- a 2x2 conv of 24 channels, no padding (32 -> 31), whose kernel is the whitening of the 2x2
  patches of (up to) 5,000 training images: the 12 eigenvectors of the patch covariance, each
  scaled by 1/sqrt(eigenvalue + 5e-4 x the pixel variance), and their negations. The kernel is
  frozen; its bias trains;
- the activation (GELU, exact, as airbench's; or ReLU: 1.65x GELU's speed on a CPU without AVX-512,
  1.10x on one with it, benchmarks/README.md);
- three groups of conv3x3 -> max pool 2 -> BN -> act -> conv3x3 -> BN -> act, widths 64, 256, 256
  (31 -> 15 -> 7 -> 3), each width times `width_multiplier` as ResNet-9's (at least 1). The convs
  have no bias; each conv's first min(in, out) filters start as the identity (a centre tap of 1 on
  their own input channel), the rest as PyTorch layers start (uniform in +-1/sqrt(fan_in)): with
  BN after each conv the weights' scale sets the effective learning rate, so airbench's rates fit
  its own start. BN has no scale (gamma fixed at 1), momentum 0.6 in Keras's convention (torch's
  0.4) and epsilon 1e-12;
- a max pool over the remaining 3x3 (global), a linear layer without bias (PyTorch's start too),
  its output times 1/9.
1,971,352 trainable parameters at width 1 for 10 classes (and 288 frozen in the whitening kernel).

Without images the whitening kernel is that of uncorrelated unit-variance patches (each output
channel is plus or minus one patch pixel); `set_whitening(model, images)` replaces it with the
whitening of the given images, and `init_from_training_data(model, config)` does so from the
first WHITEN_IMAGES training images of a prepared data dir, preprocessed as the trainer's
evaluation does (x / 127.5 - 1, resized, uncropped for the "cifar" augmentation): it is the
family's `from_data`, which `trainer.models.init_from_data` calls once after building the model
and before restoring a checkpoint (the checkpoint holds the kernel).

Our pixels are x / 127.5 - 1 (CIFAR-10's variance about 0.25 a channel), not airbench's
per-channel standardisation (variance 1): the eps of 5e-4 is scaled by the images' pixel variance,
so it damps the directions airbench's damps (before 2026-12-03 it was not: about 4x larger).
This module must not train, add weight decay, or write anything; it reads images only in
`whitening_images`.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import layers

WIDTHS = (64, 256, 256)  # the three groups' widths at width 1
WHITEN_SIZE = 2  # the whitening conv's kernel side
WHITEN_EPS = 5e-4  # added to each eigenvalue before 1/sqrt
WHITEN_IMAGES = 5000  # training images whose patches are whitened
BN_MOMENTUM, BN_EPSILON = 0.6, 1e-12  # Keras convention: moving = 0.6 * moving + 0.4 * batch
HEAD_SCALE = 1 / 9
ACTIVATIONS = ("gelu", "relu")


def torch_default(seed: int | None = None) -> keras.initializers.Initializer:
    """PyTorch's default init of conv and linear weights (Kaiming uniform with a = sqrt(5)):
    uniform in +-1/sqrt(fan_in)."""
    return keras.initializers.VarianceScaling(1 / 3, mode="fan_in", distribution="uniform", seed=seed)


def patches(images: np.ndarray, size: int = WHITEN_SIZE) -> np.ndarray:
    """Every size x size patch (stride 1, no padding) of images [N, H, W, C], flattened as a Keras
    conv kernel is laid out (row, column, channel): [N * (H - size + 1) * (W - size + 1), size^2 C]."""
    images = np.asarray(images, dtype=np.float32)
    if images.ndim != 4:
        raise ValueError(f"images: need [N, H, W, C], got shape {images.shape}")
    windows = np.lib.stride_tricks.sliding_window_view(images, (size, size), axis=(1, 2))  # N, H', W', C, s, s
    return windows.transpose(0, 1, 2, 4, 5, 3).reshape(-1, size * size * images.shape[-1])


def patch_covariance(images: np.ndarray, size: int = WHITEN_SIZE, chunk: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """(mean, covariance) of the size x size patches of images [N, H, W, C], in float64, over
    chunks of `chunk` images (5,000 CIFAR images have 4.8M patches)."""
    dim = size * size * images.shape[-1]
    total, outer, count = np.zeros(dim), np.zeros((dim, dim)), 0
    for start in range(0, len(images), chunk):
        flat = patches(images[start:start + chunk], size).astype(np.float64)
        total += flat.sum(axis=0)
        outer += flat.T @ flat
        count += len(flat)
    if count < 2:
        raise ValueError("need at least two patches to whiten")
    mean = total / count
    return mean, (outer - count * np.outer(mean, mean)) / (count - 1)


def whitening_kernel(images: Any, eps: float = WHITEN_EPS, size: int = WHITEN_SIZE) -> np.ndarray:
    """The whitening conv's kernel [size, size, C, 2 size^2 C] from images [N, H, W, C] (numpy or a
    tensor, preprocessed as the network's inputs): the eigenvectors of the patch covariance, largest
    eigenvalue first, each scaled by 1/sqrt(eigenvalue + eps x v), then their negations. v is the
    images' pixel variance (the mean over channels): airbench's eps is for standardised pixels (v =
    1), so scaled by v it damps the same directions whatever the pixels' range, and images scaled by
    any factor whiten to the same outputs."""
    images = np.asarray(images, dtype=np.float32)
    _, covariance = patch_covariance(images, size)
    pixel_variance = max(float(images.reshape(-1, images.shape[-1]).astype(np.float64).var(axis=0).mean()),
                         1e-12)  # constant images: a finite kernel
    eigenvalues, eigenvectors = np.linalg.eigh(covariance)  # ascending
    order = np.argsort(eigenvalues)[::-1]
    scaled = eigenvectors[:, order] / np.sqrt(np.maximum(eigenvalues[order], 0.0) + eps * pixel_variance)
    kernel = np.concatenate([scaled, -scaled], axis=1)
    return kernel.reshape(size, size, images.shape[-1], -1).astype(np.float32)


def pixel_kernel(channels: int, size: int = WHITEN_SIZE) -> np.ndarray:
    """The whitening of uncorrelated unit-variance patches (eps 0): each output channel is plus or
    minus one pixel of the patch. The kernel before `set_whitening`."""
    basis = np.eye(size * size * channels, dtype=np.float32)
    return np.concatenate([basis, -basis], axis=1).reshape(size, size, channels, -1)


@keras.saving.register_keras_serializable(package="amoeba")
class WhiteningConv2D(layers.Conv2D):
    """A Conv2D whose kernel is frozen (not trainable: a whitening set from data) and whose bias
    trains. Starts as `pixel_kernel`."""

    def build(self, input_shape) -> None:
        super().build(input_shape)
        self.kernel.trainable = False
        self.kernel.assign(pixel_kernel(int(input_shape[-1]), self.kernel_size[0]))

    @layers.Conv2D.trainable.setter
    def trainable(self, value: bool) -> None:
        """`model.trainable = True` (fine-tuning) trains the bias again, never the kernel."""
        layers.Conv2D.trainable.fset(self, value)
        if self.built:
            self.kernel.trainable = False


def centre_identity(shape: tuple[int, int, int, int]) -> np.ndarray:
    """A conv kernel [k, k, in, out] of zeros but a centre tap of 1 from input channel i to filter i,
    for the first min(in, out) filters."""
    rows, cols, fan_in, fan_out = shape
    eye = np.zeros(shape, dtype=np.float32)
    n = min(fan_in, fan_out)
    eye[rows // 2, cols // 2, np.arange(n), np.arange(n)] = 1.0
    return eye


@keras.saving.register_keras_serializable(package="amoeba")
class PartialIdentity(keras.initializers.Initializer):
    """A conv kernel [k, k, in, out] whose first min(in, out) filters are the identity (filter i: a
    centre tap of 1 on input channel i) and the rest `torch_default`."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def __call__(self, shape: tuple[int, int, int, int], dtype: Any = None) -> Any:
        kernel = torch_default(self.seed)(shape, dtype=dtype)
        eye, n = centre_identity(shape), min(shape[2], shape[3])
        keep = np.zeros(shape, dtype=np.float32)
        keep[..., n:] = 1.0
        return kernel * keras.ops.convert_to_tensor(keep, dtype) + keras.ops.convert_to_tensor(eye, dtype)

    def get_config(self) -> dict:
        return {"seed": self.seed}


def group_widths(width_multiplier: float = 1.0) -> tuple[int, ...]:
    """The three groups' widths at `width_multiplier` (each at least 1), as ResNet-9 rounds them."""
    if not width_multiplier > 0:
        raise ValueError(f"width_multiplier: must be positive, got {width_multiplier}")
    return tuple(max(1, round(w * width_multiplier)) for w in WIDTHS)


def _conv_bn_act(x: keras.KerasTensor, filters: int, activation: str, identity_init: bool, name: str,
                 pool: bool = False) -> keras.KerasTensor:
    """conv3x3 (no bias) -> [max pool 2] -> BN (no scale) -> activation."""
    init = PartialIdentity() if identity_init else torch_default()
    x = layers.Conv2D(filters, 3, padding="same", use_bias=False, kernel_initializer=init, name=f"{name}_conv")(x)
    if pool:
        x = layers.MaxPooling2D(2, name=f"{name}_pool")(x)
    x = layers.BatchNormalization(momentum=BN_MOMENTUM, epsilon=BN_EPSILON, scale=False, name=f"{name}_bn")(x)
    return layers.Activation(activation, name=f"{name}_{activation}")(x)


def build_airbench(input_shape: tuple[int, ...], num_classes: int, width_multiplier: float = 1.0,
                   activation: str = "gelu", identity_init: bool = True) -> keras.Model:
    """airbench94's network producing float32 logits; `whiten` is its whitening conv (set it with
    `set_whitening`), `activation` "gelu" (airbench's) or "relu"."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation: unknown {activation!r}; known: {list(ACTIVATIONS)}")
    smallest = WHITEN_SIZE - 1 + 2 ** len(WIDTHS)  # a pixel left after the whitening conv and three pools
    if len(input_shape) != 3 or min(input_shape[:2]) < smallest:
        raise ValueError(f"need an (H, W, C) input of at least {smallest} pixels a side, got {input_shape}")
    channels = int(input_shape[-1])
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x = WhiteningConv2D(2 * WHITEN_SIZE ** 2 * channels, WHITEN_SIZE, padding="valid", name="whiten")(inputs)
    x = layers.Activation(activation, name=f"whiten_{activation}")(x)
    for i, width in enumerate(group_widths(width_multiplier)):
        x = _conv_bn_act(x, width, activation, identity_init, f"group{i + 1}_1", pool=True)
        x = _conv_bn_act(x, width, activation, identity_init, f"group{i + 1}_2")
    x = layers.GlobalMaxPooling2D(name="final_pool")(x)
    x = layers.Dense(num_classes, use_bias=False, kernel_initializer=torch_default(), dtype="float32",
                     name="linear")(x)
    logits = layers.Rescaling(HEAD_SCALE, dtype="float32", name="logits")(x)
    suffix = "" if activation == "gelu" else f"_{activation}"
    return keras.Model(inputs, logits, name=f"airbench94{suffix}")


def whitening_layer(model: keras.Model) -> WhiteningConv2D | None:
    """The model's whitening conv, or None for a model without one."""
    return next((layer for layer in model.layers if isinstance(layer, WhiteningConv2D)), None)


def set_whitening(model: keras.Model, images: Any, eps: float = WHITEN_EPS) -> np.ndarray:
    """Sets the model's whitening kernel from images [N, H, W, C] preprocessed as its inputs;
    returns the kernel. ValueError for a model without a whitening conv."""
    layer = whitening_layer(model)
    if layer is None:
        raise ValueError(f"{model.name}: no whitening conv (WhiteningConv2D) to set")
    kernel = whitening_kernel(images, eps, layer.kernel_size[0])
    layer.kernel.assign(kernel)
    return kernel


def whitening_images(data_dir: str, image_size: int, count: int = WHITEN_IMAGES,
                     center_crop: bool = False, held_out: int = 0) -> np.ndarray:
    """The first `count` training images of a prepared data dir (or all, if fewer; one from each of
    up to 16 shards in turn) past the `held_out` validation images (trainer/records.py), preprocessed
    as the trainer evaluates: float32 [n, S, S, 3] in [-1, 1]."""
    import tensorflow as tf

    from trainer.records import TRAIN_PREFIX, held_out_per_shard, parser, preprocess_for_eval, shard_files

    files = shard_files(data_dir, TRAIN_PREFIX)
    skips = held_out_per_shard(data_dir, held_out) if held_out else [0] * len(files)
    records = tf.data.Dataset.from_tensor_slices((files, tf.constant(skips, tf.int64))).interleave(
        lambda path, skip: tf.data.TFRecordDataset(path).skip(skip),
        cycle_length=min(len(files), 16))  # sequential: a fixed order
    parse = parser(0)
    data = (records.take(count)
            .map(lambda serialized: preprocess_for_eval(parse(serialized)[0], image_size, center_crop),
                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            .batch(500))
    return np.concatenate([batch.numpy() for batch in data])


def init_from_training_data(model: keras.Model, config: Any) -> bool:
    """airbench94's `from_data` (trainer/models.py): for a model with a whitening conv, sets it from
    the first WHITEN_IMAGES training images of `config.data` (a TrainConfig: image_size,
    center_crop) and returns True; any other model is left alone (False)."""
    if whitening_layer(model) is None:
        return False
    set_whitening(model, whitening_images(config.data, config.image_size, center_crop=config.center_crop,
                                          held_out=getattr(config, "validation_images", 0)))
    return True


def whiten_from_images(model: keras.Model, images: np.ndarray) -> bool:
    """For a model with a whitening conv, sets it from the first WHITEN_IMAGES of `images` [N, H, W,
    C] (uint8 pixels, taken to [-1, 1] as the pipelines do, or floats as they are: the search proxy's
    arrays) and returns True; any other model is left alone (False)."""
    if whitening_layer(model) is None:
        return False
    first = np.asarray(images[:WHITEN_IMAGES])
    set_whitening(model, first.astype(np.float32) / 127.5 - 1.0 if first.dtype == np.uint8 else first)
    return True
