"""Indexing TFRecords made elsewhere: metadata.json from one scan of the shards."""

import json
import os

import pytest

from trainer.fake_imagenet import write_fake_imagenet
from trainer.index_records import index_tfrecords


@pytest.fixture
def foreign_records(tmp_path):
    """A fake ImageNet whose metadata.json and labels.txt are removed, as imagenet_to_gcs leaves it."""
    out = str(tmp_path / "imagenet")
    write_fake_imagenet(out, num_train=60, num_eval=20, num_classes=4, image_size=16, label_offset=1,
                        num_shards_train=3)
    original = json.load(open(os.path.join(out, "metadata.json")))
    os.remove(os.path.join(out, "metadata.json"))
    os.remove(os.path.join(out, "labels.txt"))
    return out, original


def test_index_reproduces_the_metadata(foreign_records):
    out, original = foreign_records
    info = index_tfrecords(out, label_offset=1)
    assert (info.num_train_images, info.num_eval_images, info.num_classes) == (60, 20, 4)
    indexed = json.load(open(os.path.join(out, "metadata.json")))
    for key in ("num_train_images", "num_eval_images", "num_label_classes", "labels", "label_offset", "splits"):
        assert indexed[key] == original[key], key
    assert open(os.path.join(out, "labels.txt")).read().split() == original["labels"]
    with pytest.raises(ValueError, match="indexed"):
        index_tfrecords(out, label_offset=1)


def test_a_wrong_label_offset_is_named(foreign_records):
    out, _ = foreign_records
    with pytest.raises(ValueError, match=r"class ids \[0\] have no image \(label_offset 0\?\)"):
        index_tfrecords(out, label_offset=0)
    with pytest.raises(ValueError, match="below label_offset 2"):
        index_tfrecords(out, label_offset=2)
    assert not os.path.exists(os.path.join(out, "metadata.json"))
