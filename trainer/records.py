"""The TFRecord image format and its tf.data readers.

Records use the tensorflow/tpu `imagenet_to_gcs` keys (`image/encoded` JPEG bytes, `image/format`,
`image/class/label`, `image/class/text`, `image/height`, `image/width`, `image/filename`) in
files `train-NNNNN-of-MMMMM` and `validation-NNNNN-of-MMMMM`, with `metadata.json` beside them
(counts, labels, label_offset). The writers (trainer/prepare.py, trainer/fake_imagenet.py) build
records with `make_example` and the metadata with `build_metadata`.

A record's class id is `image/class/label - label_offset`: 0-based for our own data, offset 1 for
ImageNet TFRecords (0 = background). Pixels go through trainer/preprocessing.py's one function,
re-exported here (`eval_pixels`, `to_float`, `preprocess_for_eval`): the centred square of the
image (CROP_FRACTION of the shorter side for center_crop models, all of it otherwise), resized with
antialiasing, rounded to uint8, then x / 127.5 - 1 into [-1, 1]; the search's proxy, training,
evaluation and the exported model's serving signature all see the same pixels. With cache=True the
pipelines keep what the model reads (uint8, image_size-sized) or, for the "inception" augmentation,
whose random crop needs the whole image, the encoded bytes; never full-size decoded pixels. This
module must not build models, train, or read CSVs.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import tensorflow as tf

from core import storage
from core.augmentations import AUGMENTATIONS
from core.data_dir import METADATA_FILE, no_metadata_message
from trainer.preprocessing import (CROP_FRACTION, center_window, crop, decode, eval_pixels,  # noqa: F401 (re-exported)
                                   preprocess_for_eval, resize_pixels, to_float)

LABELS_FILE = "labels.txt"
TRAIN_PREFIX = "train"
EVAL_PREFIX = "validation"
SHUFFLE_BUFFER = 8192
AIRBENCH_TRANSLATE = 2  # the "airbench" augmentation's largest translation, in pixels
_CYCLE_LENGTH = 16  # shards read at the same time
_READ_BUFFER = 8 << 20


@dataclass(frozen=True)
class DataInfo:
    """What a prepared data dir holds; `num_classes` counts classes after the label offset."""

    num_train_images: int
    num_eval_images: int
    num_classes: int
    labels: tuple[str, ...]
    label_offset: int = 0


def shard_name(prefix: str, index: int, count: int) -> str:
    return f"{prefix}-{index:05d}-of-{count:05d}"


def make_example(encoded_jpeg: bytes, label: int, text: str, height: int, width: int,
                 filename: str) -> tf.train.Example:
    """One record; `label` is the stored id (class id + label_offset)."""

    def _bytes(value: bytes) -> tf.train.Feature:
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    def _int(value: int) -> tf.train.Feature:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    return tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": _bytes(encoded_jpeg),
        "image/format": _bytes(b"JPEG"),
        "image/class/label": _int(label),
        "image/class/text": _bytes(text.encode("utf-8")),
        "image/height": _int(height),
        "image/width": _int(width),
        "image/filename": _bytes(filename.encode("utf-8")),
    }))


def build_metadata(labels: Sequence[str], shards: dict[str, Sequence[int]], label_offset: int,
                   source: dict[str, Any]) -> dict[str, Any]:
    """metadata.json's content; `shards` maps "train"/"validation" to images per shard."""
    splits = {
        prefix: {
            "num_images": sum(counts),
            "num_shards": len(counts),
            "images_per_shard": list(counts),
            "files": [shard_name(prefix, i, len(counts)) for i in range(len(counts))],
        }
        for prefix, counts in shards.items()
    }
    return {
        "format": "tfrecord, tensorflow/tpu imagenet_to_gcs keys, JPEG images",
        "num_train_images": splits[TRAIN_PREFIX]["num_images"],
        "num_eval_images": splits[EVAL_PREFIX]["num_images"],
        "num_label_classes": len(labels),
        "labels": list(labels),
        "label_offset": label_offset,
        "splits": splits,
        "source": source,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def read_metadata(data_dir: str) -> DataInfo:
    """The counts and labels recorded by `amoeba prepare`; ValueError/FileNotFoundError say what is wrong."""
    path = storage.join(data_dir, METADATA_FILE)
    if not storage.exists(path):
        raise FileNotFoundError(no_metadata_message(data_dir))
    data = storage.read_json(path)
    try:
        info = DataInfo(
            num_train_images=int(data["num_train_images"]),
            num_eval_images=int(data["num_eval_images"]),
            num_classes=int(data["num_label_classes"]),
            labels=tuple(str(label) for label in data["labels"]),
            label_offset=int(data.get("label_offset", 0)),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: malformed metadata ({type(err).__name__}: {err})") from None
    if len(info.labels) != info.num_classes:
        raise ValueError(f"{path}: {len(info.labels)} labels but num_label_classes={info.num_classes}")
    return info


# ---- preprocessing (graph functions on one example) ----

def _random_window(shape: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """Inception-style distorted crop (area 8%-100%, aspect 3/4-4/3); the centre crop when no
    sample fits (the sampler then returns the whole image), as the tpu preprocessing does."""
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        shape, tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), seed=seed, min_object_covered=0.1,
        aspect_ratio_range=(3 / 4, 4 / 3), area_range=(0.08, 1.0), max_attempts=10,
        use_image_if_no_bounding_boxes=True)
    sampled = tf.stack([begin[0], begin[1], size[0], size[1]])
    whole = tf.reduce_all(tf.equal(size[:2], shape[:2]))
    return tf.where(whole, center_window(shape), sampled)


def _decode_cropped(encoded: tf.Tensor, window_fn: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    """Decode only the window of a JPEG (decode_and_crop_jpeg); other formats decode whole."""

    def jpeg() -> tf.Tensor:
        window = window_fn(tf.image.extract_jpeg_shape(encoded))
        return tf.image.decode_and_crop_jpeg(encoded, window, channels=3)

    def other() -> tf.Tensor:
        image = decode(encoded)
        return crop(image, window_fn(tf.shape(image)))

    return tf.ensure_shape(tf.cond(tf.io.is_jpeg(encoded), jpeg, other), [None, None, 3])


def _cutout(image: tf.Tensor, size: int, seed: tf.Tensor) -> tf.Tensor:
    """Cutout (DeVries & Taylor 2017): a size x size square at a random centre, clipped at the
    borders, set to 0 (the mean of the [-1, 1] range)."""
    height, width = image.shape[0], image.shape[1]
    centre = tf.cast(tf.random.stateless_uniform([2], seed) * tf.constant([height, width], tf.float32), tf.int32)
    rows = tf.range(height)[:, None]
    cols = tf.range(width)[None, :]
    inside = ((rows >= centre[0] - size // 2) & (rows < centre[0] - size // 2 + size)
              & (cols >= centre[1] - size // 2) & (cols < centre[1] - size // 2 + size))
    return tf.where(inside[..., None], tf.zeros_like(image), image)


def _cifar_augment(image: tf.Tensor, seed: tf.Tensor, cutout: int) -> tf.Tensor:
    """The CIFAR recipe (He et al. 2016): zero-pad size/8 a side, random crop back, random flip;
    then cutout when cutout > 0."""
    size = image.shape[0]
    pad = max(1, size // 8)
    crop_seed, flip_seed, cutout_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    padded = tf.pad(image, [[pad, pad], [pad, pad], [0, 0]])
    image = tf.image.stateless_random_flip_left_right(tf.image.stateless_random_crop(padded, image.shape, crop_seed),
                                                      flip_seed)
    return _cutout(image, cutout, cutout_seed) if cutout > 0 else image


def airbench_augment(image: tf.Tensor, seed: tf.Tensor, flip_bit: tf.Tensor, epoch: tf.Tensor) -> tf.Tensor:
    """airbench94's: reflect-pad AIRBENCH_TRANSLATE pixels a side and crop back at random (a
    translation of up to that many pixels), then the alternating flip: mirrored when the image's own
    flip bit (0 or 1, drawn once per image) differs from the epoch's parity, so a random half in the
    first epoch and the other half in the next, and so on."""
    pad = AIRBENCH_TRANSLATE
    padded = tf.pad(image, [[pad, pad], [pad, pad], [0, 0]], mode="REFLECT")
    image = tf.image.stateless_random_crop(padded, image.shape, seed)
    flip = tf.not_equal(tf.cast(flip_bit, tf.int64), tf.cast(epoch, tf.int64) % 2)
    return tf.cond(flip, lambda: tf.image.flip_left_right(image), lambda: image)


def _flip_bit(encoded: tf.Tensor, key: int) -> tf.Tensor:
    """An image's own flip bit, 0 or 1: a keyed hash of its encoded bytes (the same in every epoch
    and after a resume, another draw for another key)."""
    return tf.strings.to_hash_bucket_strong(encoded, 2, key=[int(key) % 2 ** 63, 0x5EED])


# ---- datasets ----

def shard_files(data_dir: str, prefix: str) -> list[str]:
    files = sorted(tf.io.gfile.glob(f"{data_dir.rstrip('/')}/{prefix}-*"))
    if not files:
        raise FileNotFoundError(
            f"{data_dir}: no {prefix}-* TFRecord shards (make them with `amoeba prepare`)")
    return files


def _read(files: tf.data.Dataset, num_files: int) -> tf.data.Dataset:
    """The records of `files`, a dataset of shard paths or of (path, records to skip at its start)."""
    def records_of(path: tf.Tensor, skip: tf.Tensor | int = 0) -> tf.data.Dataset:
        return tf.data.TFRecordDataset(path, buffer_size=_READ_BUFFER).skip(tf.cast(skip, tf.int64))

    return files.interleave(records_of, cycle_length=min(num_files, _CYCLE_LENGTH),
                            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def held_out_per_shard(data_dir: str, held_out: int) -> list[int]:
    """How many of each training shard's first records are validation images, `held_out` in all:
    each shard's share of them (by metadata.json's images_per_shard; the rounding's remainder to the
    first shards), so shards written in class order (TFRecords made elsewhere) still give every
    class its share; ValueError naming the file when it cannot say, or holds too few images."""
    path = storage.join(data_dir, METADATA_FILE)
    try:
        counts = [int(n) for n in storage.read_json(path)["splits"][TRAIN_PREFIX]["images_per_shard"]]
    except (KeyError, TypeError, ValueError, FileNotFoundError) as err:
        raise ValueError(f"{path}: no splits.{TRAIN_PREFIX}.images_per_shard to hold validation images out by "
                         f"({type(err).__name__}: {err}); prepare the dir again, or give --validation_images=0") \
            from None
    if held_out > sum(counts):
        raise ValueError(f"{path}: validation_images {held_out} is more than the {sum(counts)} training images")
    taken = [held_out * count // sum(counts) for count in counts]
    for index, count in enumerate(counts):
        taken[index] += min(count - taken[index], held_out - sum(taken))
    return taken


def _training_shards(data_dir: str, held_out: int) -> tuple[tf.data.Dataset, int]:
    """(a dataset of (shard path, records to skip), the number of shards): the training split less
    the `held_out` validation images, each shard's first (held_out_per_shard)."""
    files = shard_files(data_dir, TRAIN_PREFIX)
    skips = held_out_per_shard(data_dir, held_out) if held_out else [0] * len(files)
    if len(skips) != len(files):
        raise ValueError(f"{data_dir}: {len(files)} training shards, but metadata.json lists {len(skips)}")
    return tf.data.Dataset.from_tensor_slices((files, tf.constant(skips, tf.int64))), len(files)


def parser(label_offset: int) -> Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        example = tf.io.parse_single_example(serialized, features)
        label = tf.cast(example["image/class/label"] - label_offset, tf.int32)
        return example["image/encoded"], label

    return parse


def _check_sizes(batch_size: int, image_size: int) -> None:
    if batch_size <= 0 or image_size <= 0:
        raise ValueError(f"batch_size and image_size must be positive, got {batch_size}, {image_size}")


def train_dataset(data_dir: str, batch_size: int, image_size: int, *, label_offset: int = 0,
                  seed: int = 0, cache: bool = False, augmentation: str = "inception", cutout: int = 0,
                  shuffle_buffer: int = SHUFFLE_BUFFER, flip_key: int = 0, first_example: int = 0,
                  held_out: int = 0) -> tf.data.Dataset:
    """(images float32 [B, S, S, 3], labels int32 [B]), shuffled, augmented, repeated forever.

    augmentation "inception": a distorted crop (area 8-100%) resized to image_size, and a flip (the
    ImageNet recipe); "cifar": the image as evaluation and the search see it (`eval_pixels` with
    center_crop=False: its centred square, resized), then pad-crop-flip and `cutout` (small images);
    "airbench": that image, a translation of up to 2 pixels (reflect padding) and the
    alternating flip, each image's flip bit keyed by `flip_key`, the epoch counted from
    `first_example` (the examples drawn before a resume) over the data's training images: exact
    with `cache` (each epoch a whole shuffle), about right without (shuffles cross epochs); then
    `cutout`.

    Augmentation seeds come from a seeded stream zipped with the records, so a seed gives the same
    batches however many threads map. cache=True keeps in memory what `_train_examples` makes: the
    uint8 image_size pixels ("cifar", "airbench") or the encoded bytes ("inception"), never decoded
    full-size images, so photos of any size cache in about what the model reads. The split's first
    `held_out` records (the validation images: validation_dataset) are never read.
    """
    _check_sizes(batch_size, image_size)
    if augmentation not in AUGMENTATIONS:
        raise ValueError(f"augmentation: unknown {augmentation!r}; known: {list(AUGMENTATIONS)}")
    inception = augmentation == "inception"
    shards, num_files = _training_shards(data_dir, held_out)
    example = _train_examples(parser(label_offset), image_size, inception, flip_key)
    if cache:
        data = (_read(shards, num_files)
                .map(example, num_parallel_calls=tf.data.AUTOTUNE)
                .cache()
                .shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
                .repeat())
    else:
        names = shards.shuffle(num_files, seed=seed, reshuffle_each_iteration=True).repeat()
        data = (_read(names, num_files)
                .shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
                .map(example, num_parallel_calls=tf.data.AUTOTUNE))

    def pixels(image: tf.Tensor, crop_seed: tf.Tensor) -> tf.Tensor:
        if not inception:
            return image
        window = _decode_cropped(image, lambda shape: _random_window(shape, crop_seed))
        return resize_pixels(window, image_size)

    augment = _augmenter(augmentation, pixels, cutout,
                         read_metadata(data_dir).num_train_images - held_out if augmentation == "airbench" else 1)
    seeds = tf.data.Dataset.random(seed=seed).batch(2)
    positions = tf.data.Dataset.counter(start=first_example)
    return (tf.data.Dataset.zip((data, seeds, positions))
            .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
            .batch(batch_size, drop_remainder=True)
            .prefetch(tf.data.AUTOTUNE))


def _train_examples(parse: Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]], image_size: int, inception: bool,
                    flip_key: int) -> Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor, tf.Tensor]]:
    """The map from a serialized record to (image, label, flip bit), what train_dataset's cache holds:
    the image is the encoded bytes for "inception" (its random crop needs the whole image), else the
    uint8 [S, S, 3] pixels that evaluation and the search see (`eval_pixels`, center_crop=False)."""
    def example(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        encoded, label = parse(serialized)
        image = encoded if inception else eval_pixels(encoded, image_size, center_crop=False)
        return image, label, _flip_bit(encoded, flip_key)

    return example


def _augmenter(augmentation: str, pixels: Callable[[tf.Tensor, tf.Tensor], tf.Tensor], cutout: int,
               num_images: int) -> Callable[..., tuple[tf.Tensor, tf.Tensor]]:
    """The map of train_dataset: ((uint8 pixels or bytes, label, flip bit), seed pair, stream position)
    -> (augmented float image, label); `pixels` makes the uint8 [S, S, 3] image (the inception
    crop); airbench's epoch is the position over `num_images`."""
    def augment(example: tuple[tf.Tensor, ...], pair: tf.Tensor, position: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(pair, 2))
        image, label, bit = example
        image = to_float(pixels(image, crop_seed))
        if augmentation == "inception":
            return tf.image.stateless_random_flip_left_right(image, flip_seed), label
        if augmentation == "cifar":
            return _cifar_augment(image, flip_seed, cutout), label
        image = airbench_augment(image, crop_seed, bit, position // num_images)  # crop_seed: unused by pixels
        return (_cutout(image, cutout, flip_seed) if cutout > 0 else image), label

    return augment


def eval_dataset(data_dir: str, batch_size: int, image_size: int, *, label_offset: int = 0,
                 cache: bool = False, center_crop: bool = True) -> tf.data.Dataset:
    """(images, labels, weights): every example once, in a fixed order, then zero-weight padding
    to a whole last batch, so every batch has the same shape and weighted accuracy is exact.
    center_crop=False evaluates the whole centre square (the "cifar" and "airbench" augmentations'
    models, as the search sees images). cache=True keeps the uint8 [S, S, 3] pixels (`eval_pixels`),
    not decoded full-size images; cached and uncached batches are the same."""
    _check_sizes(batch_size, image_size)
    files = shard_files(data_dir, EVAL_PREFIX)
    data = _read(tf.data.Dataset.from_tensor_slices(files), len(files))
    return _scored(data, batch_size, image_size, label_offset, cache, center_crop)


def validation_dataset(data_dir: str, held_out: int, batch_size: int, image_size: int, *, label_offset: int = 0,
                       cache: bool = False, center_crop: bool = True) -> tf.data.Dataset:
    """The `held_out` validation images held out of the training split, each shard's first
    (held_out_per_shard; train_dataset's held_out skips them), as eval_dataset gives the evaluation
    split: in a fixed order."""
    _check_sizes(batch_size, image_size)
    if held_out <= 0:
        raise ValueError(f"validation_dataset: held_out must be positive, got {held_out}")
    taken = held_out_per_shard(data_dir, held_out)
    shards = tf.data.Dataset.from_tensor_slices((shard_files(data_dir, TRAIN_PREFIX), tf.constant(taken, tf.int64)))
    data = shards.flat_map(lambda path, count: tf.data.TFRecordDataset(path, buffer_size=_READ_BUFFER).take(count))
    return _scored(data, batch_size, image_size, label_offset, cache, center_crop)


def _scored(data: tf.data.Dataset, batch_size: int, image_size: int, label_offset: int, cache: bool,
            center_crop: bool) -> tf.data.Dataset:
    """Serialized records -> eval_dataset's padded (images, labels, weights) batches."""
    parallel = tf.data.AUTOTUNE
    data = data.map(parser(label_offset), parallel)
    if cache:  # preprocess_for_eval in its two steps, the uint8 pixels cached in between
        data = (data.map(lambda encoded, y: (eval_pixels(encoded, image_size, center_crop), y), parallel).cache()
                .map(lambda pixels, y: (to_float(pixels), y), parallel))
    else:
        data = data.map(lambda encoded, y: (preprocess_for_eval(encoded, image_size, center_crop), y), parallel)
    data = data.map(lambda image, y: (image, y, tf.constant(1.0)))
    padding = tf.data.Dataset.from_tensors(
        (tf.zeros([image_size, image_size, 3]), tf.constant(0, tf.int32), tf.constant(0.0))
    ).repeat(batch_size - 1)
    return data.concatenate(padding).batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
