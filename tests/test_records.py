"""The tf.data readers of prepared TFRecords, on a tiny fake ImageNet (stored labels 1..4)."""

import collections
import os

import numpy as np
import pytest
import tensorflow as tf

from trainer import records
from trainer.fake_imagenet import write_fake_imagenet

NUM_TRAIN, NUM_EVAL, NUM_CLASSES = 40, 23, 4


@pytest.fixture(scope="module")
def fake(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("records") / "fake")
    write_fake_imagenet(out, num_train=NUM_TRAIN, num_eval=NUM_EVAL, num_classes=NUM_CLASSES, image_size=32,
                        label_offset=1, num_shards_train=3, num_shards_eval=2)
    return out


def stored_labels(pattern: str) -> list[int]:
    return [tf.train.Example.FromString(raw).features.feature["image/class/label"].int64_list.value[0]
            for path in tf.io.gfile.glob(pattern) for raw in tf.data.TFRecordDataset(path).as_numpy_iterator()]


def test_metadata_records_counts_labels_and_offset(fake):
    info = records.read_metadata(fake)
    assert info == records.DataInfo(NUM_TRAIN, NUM_EVAL, NUM_CLASSES,
                                    tuple(f"fake_class_{i:04d}" for i in range(NUM_CLASSES)), 1)
    assert sorted(set(stored_labels(f"{fake}/train-*"))) == [1, 2, 3, 4]
    assert len(tf.io.gfile.glob(f"{fake}/train-*-of-00003")) == 3


@pytest.mark.parametrize("cache", [False, True])
def test_train_batches_have_fixed_shapes_and_offset_labels(fake, cache):
    data = records.train_dataset(fake, 8, 24, label_offset=1, cache=cache)
    images_spec, labels_spec = data.element_spec
    assert images_spec == tf.TensorSpec([8, 24, 24, 3], tf.float32)
    assert labels_spec == tf.TensorSpec([8], tf.int32)
    labels = []
    for images, batch_labels in data.take(12):  # 96 examples: repeats past the 40 images
        assert -1.0 <= float(tf.reduce_min(images)) and float(tf.reduce_max(images)) <= 1.0
        labels += batch_labels.numpy().tolist()
    assert set(labels) == {0, 1, 2, 3}
    unshifted = next(iter(records.train_dataset(fake, 8, 24, cache=cache)))[1].numpy()
    assert set(unshifted) <= {1, 2, 3, 4}


def test_train_is_deterministic_for_a_seed(fake):
    def first(seed):
        images, labels = next(iter(records.train_dataset(fake, 8, 16, label_offset=1, seed=seed)))
        return images.numpy(), labels.numpy()

    (a_images, a_labels), (b_images, b_labels) = first(3), first(3)
    np.testing.assert_array_equal(a_images, b_images)
    np.testing.assert_array_equal(a_labels, b_labels)
    assert not np.array_equal(first(4)[0], a_images)


@pytest.mark.parametrize("cache", [False, True])
def test_eval_covers_every_example_exactly_once(fake, cache):
    data = records.eval_dataset(fake, 8, 24, label_offset=1, cache=cache)
    assert data.element_spec == (tf.TensorSpec([8, 24, 24, 3], tf.float32), tf.TensorSpec([8], tf.int32),
                                 tf.TensorSpec([8], tf.float32))
    batches = list(data.as_numpy_iterator())
    weights = np.concatenate([w for _, _, w in batches])
    labels = np.concatenate([y for _, y, _ in batches])
    assert len(batches) == 3 and weights.sum() == NUM_EVAL  # ceil(23 / 8)
    assert weights.tolist() == [1.0] * NUM_EVAL + [0.0] * (24 - NUM_EVAL)
    expected = collections.Counter(label - 1 for label in stored_labels(f"{fake}/validation-*"))
    assert collections.Counter(labels[:NUM_EVAL].tolist()) == expected


def test_eval_is_the_same_with_and_without_cache(fake):
    plain = [x for x, _, _ in records.eval_dataset(fake, 8, 24).as_numpy_iterator()]
    cached = [x for x, _, _ in records.eval_dataset(fake, 8, 24, cache=True).as_numpy_iterator()]
    np.testing.assert_allclose(np.concatenate(plain), np.concatenate(cached), atol=1e-6)


def test_preprocess_for_eval_takes_jpeg_and_png():
    pixels = tf.cast(tf.random.stateless_uniform([40, 60, 3], [1, 2], maxval=256, dtype=tf.int32), tf.uint8)
    for encoded in (tf.io.encode_jpeg(pixels), tf.io.encode_png(pixels)):
        image = records.preprocess_for_eval(encoded, 16)
        assert image.shape == (16, 16, 3) and image.dtype == tf.float32
        assert -1.0 <= float(tf.reduce_min(image)) and float(tf.reduce_max(image)) <= 1.0
    serve = tf.function(lambda batch: tf.map_fn(lambda b: records.preprocess_for_eval(b, 16), batch,
                                                fn_output_signature=tf.float32),
                        input_signature=[tf.TensorSpec([None], tf.string)])  # as a serving signature
    batch = serve(tf.stack([tf.io.encode_jpeg(pixels), tf.io.encode_png(pixels)]))
    assert batch.shape == (2, 16, 16, 3)
    np.testing.assert_allclose(batch[1].numpy(), records.preprocess_for_eval(tf.io.encode_png(pixels), 16).numpy(),
                               atol=1e-6)
    white = records.preprocess_for_eval(tf.io.encode_png(tf.fill([10, 10, 3], tf.constant(255, tf.uint8))), 4)
    np.testing.assert_allclose(white.numpy(), 1.0)


def test_missing_split_and_metadata_name_the_dir(tmp_path, fake):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}: no train-\\* TFRecord shards"):
        records.train_dataset(str(tmp_path), 8, 16)
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}: no validation-\\* TFRecord shards"):
        records.eval_dataset(str(tmp_path), 8, 16)
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}: no metadata.json"):
        records.read_metadata(str(tmp_path))


def test_cifar_augmentation_keeps_shapes_and_cutout_blanks_a_square(fake):
    data = records.train_dataset(fake, 8, 24, label_offset=1, augmentation="cifar", cutout=8, seed=3)
    images, _ = next(iter(data))
    assert images.shape == (8, 24, 24, 3) and float(tf.reduce_max(tf.abs(images))) <= 1.0
    blanked = records._cutout(tf.ones([16, 16, 3]), 8, tf.constant([1, 2]))
    zeros = int(tf.reduce_sum(tf.cast(blanked[..., 0] == 0, tf.int32)))
    assert 16 <= zeros <= 64  # an 8x8 square, clipped where its centre is near a border
    rows = np.flatnonzero(np.any(blanked[..., 0].numpy() == 0, axis=1))
    assert rows.max() - rows.min() + 1 == len(rows) <= 8  # one contiguous square
    with pytest.raises(ValueError, match="augmentation: unknown 'autoaugment'"):
        records.train_dataset(fake, 8, 24, augmentation="autoaugment")


def test_whole_image_evaluation_does_not_crop():
    pixels = tf.cast(tf.reshape(tf.range(16 * 16 * 3) % 256, [16, 16, 3]), tf.uint8)
    whole = records.preprocess_for_eval(tf.io.encode_png(pixels), 16, center_crop=False)
    np.testing.assert_allclose(whole.numpy(), pixels.numpy() / 127.5 - 1.0, atol=1e-6)
    cropped = records.preprocess_for_eval(tf.io.encode_png(pixels), 16)
    assert not np.allclose(cropped.numpy(), whole.numpy())


def test_a_data_dir_that_is_missing_or_not_prepared_says_what_to_give_instead(tmp_path):
    """--data=data/photo (a typo) and --data=photos (class folders, not yet prepared)."""
    (tmp_path / "photos" / "cat").mkdir(parents=True)
    (tmp_path / "photos" / "cat" / "0.jpg").write_bytes(b"a photo")
    (tmp_path / "prepared").mkdir()
    (tmp_path / "prepared" / "metadata.json").write_text("{}")
    with pytest.raises(FileNotFoundError) as err:
        records.read_metadata(str(tmp_path / "photo"))
    assert str(err.value) == f"{tmp_path / 'photo'}: no such directory (did you mean {tmp_path / 'photos'}?)"
    with pytest.raises(FileNotFoundError, match="no such directory$"):
        records.read_metadata(str(tmp_path / "elsewhere" / "data"))
    with pytest.raises(FileNotFoundError) as err:
        records.read_metadata(str(tmp_path / "photos"))
    assert str(err.value).startswith(f"{tmp_path / 'photos'}: class folders of images (cat), not a prepared data dir;")
    assert f"amoeba prepare --train_dir={tmp_path / 'photos'} --eval_fraction=0.1 --output_dir=DATA" in str(err.value)
    with pytest.raises(FileNotFoundError, match=f"holds a prepared data dir: {tmp_path / 'prepared'}"):
        records.read_metadata(str(tmp_path))


def test_looking_for_class_folders_does_not_walk_a_whole_tree(tmp_path, monkeypatch):
    """--data=$HOME: each subfolder is looked into only a level or two deep and a bounded number of
    entries, and one image type list serves both the message and `amoeba prepare --train_dir`."""
    from core import data_dir
    from trainer import prepare_inputs

    assert prepare_inputs.IMAGE_EXTENSIONS is data_dir.IMAGE_EXTENSIONS
    (tmp_path / "cat" / "indoors").mkdir(parents=True)
    (tmp_path / "cat" / "indoors" / "0.jpg").write_bytes(b"a photo")  # CLASS/SUB/IMAGE: found
    (tmp_path / "code" / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "code" / "a" / "b" / "c" / "icon.png").write_bytes(b"an icon")  # deep in a tree: not looked for
    assert data_dir._has_images(str(tmp_path / "cat")) and not data_dir._has_images(str(tmp_path / "code"))
    (tmp_path / "notes").mkdir()
    for i in range(40):
        (tmp_path / "notes" / f"{i}.txt").write_text("")
    seen, scandir = [], os.scandir

    class Counting:  # os.scandir, counting the entries read
        def __init__(self, path):
            self.entries = scandir(path)

        def __enter__(self):
            return (seen.append(entry.name) or entry for entry in self.entries)

        def __exit__(self, *exc):
            self.entries.close()

    monkeypatch.setattr(data_dir, "MAX_ENTRIES", 10)
    monkeypatch.setattr(os, "scandir", Counting)
    assert not data_dir._has_images(str(tmp_path / "notes")) and len(seen) == 10  # gave up after MAX_ENTRIES


def test_validation_images_are_the_splits_first_records_and_training_never_reads_them(fake):
    """Issue 52, defect 4: promote chooses on validation images held out of the training split."""
    files = records.shard_files(fake, records.TRAIN_PREFIX)
    shard_records = [list(tf.data.TFRecordDataset(f).as_numpy_iterator()) for f in files]
    held = 16  # each shard's share (13, 13, 14 images): its first 6, 5 and 5
    assert [len(r) for r in shard_records] == [13, 13, 14]
    assert records.held_out_per_shard(fake, held) == [6, 5, 5]
    validation = shard_records[0][:6] + shard_records[1][:5] + shard_records[2][:5]
    shards, count = records._training_shards(fake, held)
    trained = list(records._read(shards, count).as_numpy_iterator())
    assert len(trained) == NUM_TRAIN - held and not set(trained) & set(validation)
    assert set(trained) | set(validation) == {r for rs in shard_records for r in rs}
    labels = [tf.train.Example.FromString(r).features.feature["image/class/label"].int64_list.value[0] - 1
              for r in validation]
    batches = list(records.validation_dataset(fake, held, 8, 16, label_offset=1))
    got = np.concatenate([y.numpy() for _, y, _ in batches])
    weights = np.concatenate([w.numpy() for _, _, w in batches])
    assert got[weights > 0].tolist() == labels and weights.sum() == held
    with pytest.raises(ValueError, match="validation_images 41 is more than the 40 training images"):
        records.held_out_per_shard(fake, 41)


def test_the_whitening_init_reads_no_validation_image(fake):
    """airbench94's whitening is computed from training images: never the validation images held out."""
    from trainer.airbench import whitening_images

    held = records.held_out_per_shard(fake, 16)
    every = whitening_images(fake, 16, count=100)
    kept = whitening_images(fake, 16, count=100, held_out=16)
    assert len(every) == NUM_TRAIN and len(kept) == NUM_TRAIN - 16
    shown = {image.tobytes() for image in kept}
    # read one from each shard in turn: the first three are the shards' first images, held out
    assert held == [6, 5, 5] and not any(every[i].tobytes() in shown for i in range(3))
    assert every[-1].tobytes() in shown  # the last shard's last image is trained on
