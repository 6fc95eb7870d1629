"""Proxy data for a search: the split plan, loading a prepared dir into memory, the pipelines."""

import glob
import os
import subprocess
import sys

import numpy as np
import pytest

from trainer import proxy_data
from trainer.fake_imagenet import write_fake_imagenet
from tests.conftest import REPO
from core.proxy_config import (MAX_PROXY_BYTES, PROXY_DATASETS, ProxyConfig, ProxyDataset, check_data_dir, check_proxy,
                           plan_split)
from trainer.proxy_data import ArrayDataset, eval_pipeline, hold_out, load_prepared, load_proxy_data, train_pipeline

NUM_TRAIN, NUM_CLASSES = 200, 4


@pytest.fixture(scope="module")
def fake(tmp_path_factory) -> str:
    """A prepared dir of 40x40 images, stored labels 1..4 (ImageNet's offset), 3 training shards,
    and an evaluation split the proxy must never open (its shards are made unreadable)."""
    out = str(tmp_path_factory.mktemp("proxy") / "fake")
    write_fake_imagenet(out, num_train=NUM_TRAIN, num_eval=20, num_classes=NUM_CLASSES, image_size=40,
                        label_offset=1, num_shards_train=3)
    for path in glob.glob(os.path.join(out, "validation-*")):
        with open(path, "wb") as f:
            f.write(b"not a TFRecord: the search must never read the evaluation split")
    return out


def proxy(data: str, **kwargs) -> ProxyConfig:
    return ProxyConfig(dataset="prepared", data=data, train_batch_size=16, **kwargs)


def test_the_default_hold_out_is_a_tenth_of_the_training_split():
    plan = plan_split(proxy("d"), 50_000)
    assert (plan.pool, plan.num_validation, plan.num_train) == (50_000, 5_000, 45_000)
    assert plan_split(ProxyConfig(), 1797).num_validation == 360  # digits: 20%, as before


def test_train_images_caps_what_is_read_and_validation_images_is_exact():
    plan = plan_split(proxy("d", train_images=900), 50_000)
    assert (plan.pool, plan.num_validation, plan.num_train) == (1000, 100, 900)
    plan = plan_split(proxy("d", train_images=900, validation_images=5000), 50_000)
    assert (plan.pool, plan.num_validation, plan.num_train) == (5900, 5000, 900)


def test_a_cap_beyond_the_data_holds_out_the_usual_fraction_of_what_there_is():
    plan = plan_split(proxy("d", train_images=5000), 1000)
    assert (plan.pool, plan.num_validation, plan.num_train) == (1000, 100, 900)
    assert plan_split(proxy("d", train_images=63), 50_000).num_validation == 7  # ceil(63 / 9), no float slop


def test_a_built_in_dataset_is_checked_before_the_search_starts():
    from core.proxy_config import check_proxy

    assert check_proxy(ProxyConfig()).num_train == 1437
    with pytest.raises(ValueError, match="digits: 1797 training-split images leave 0 to train on"):
        check_proxy(ProxyConfig(validation_images=5000))


def test_a_split_too_small_for_a_batch_names_the_dir():
    with pytest.raises(ValueError, match="mydata: 100 training-split images leave 0 to train on"):
        plan_split(proxy("mydata", validation_images=100), 100)


def test_data_dir_errors_name_the_dir_and_the_fix(fake, tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}: no metadata.json"):
        check_data_dir(proxy(str(tmp_path)))
    assert NUM_TRAIN * 4096 * 4096 * 3 > MAX_PROXY_BYTES  # 200 images at 4096 px: 10 GB
    with pytest.raises(ValueError, match="cap them with --train_images or a smaller --image_size"):
        check_data_dir(proxy(fake, image_size=4096))
    with pytest.raises(ValueError, match="needs --data"):
        ProxyConfig(dataset="prepared")
    with pytest.raises(ValueError, match="reads no --data"):
        ProxyConfig(dataset="digits", data=fake)


def test_a_prepared_dir_loads_its_training_split_only_with_a_stratified_hold_out(fake):
    data = load_prepared(proxy(fake, image_size=16, validation_images=40))
    assert data.x_train.shape == (160, 16, 16, 3) and data.x_val.shape == (40, 16, 16, 3)
    assert data.x_train.dtype == np.uint8 and data.num_classes == NUM_CLASSES
    assert sorted(set(data.y_train)) == list(range(NUM_CLASSES))  # label_offset 1 removed
    assert np.bincount(data.y_val).tolist() == [10, 10, 10, 10]  # stratified
    again = load_prepared(proxy(fake, image_size=16, validation_images=40))
    np.testing.assert_array_equal(data.y_val, again.y_val)  # a fixed hold-out
    np.testing.assert_array_equal(data.x_val, again.x_val)


def test_images_are_decoded_once_per_worker(fake):
    config = proxy(fake, train_images=100)
    first = load_proxy_data(config)
    assert load_proxy_data(ProxyConfig(**{**config.to_dict(), "seed": 5, "epochs": 9})) is first
    assert load_proxy_data(proxy(fake, train_images=50)) is not first  # other images: loaded anew
    assert len(proxy_data._CACHE) == 1  # one data set kept at a time


def test_augmented_batches_keep_their_shape_and_repeat_for_a_seed():
    x = np.arange(8 * 32 * 32 * 3, dtype=np.int64).reshape(8, 32, 32, 3) % 256
    x, y = x.astype(np.uint8), np.arange(8, dtype=np.int32)

    def batches(seed):
        return [b for b in train_pipeline(x, y, 4, seed=seed, augment=True).as_numpy_iterator()]

    a, b, c = batches(1), batches(1), batches(2)
    assert [images.shape for images, _ in a] == [(4, 32, 32, 3)] * 2 and a[0][0].dtype == np.float32
    assert all(np.array_equal(p[0], q[0]) for p, q in zip(a, b))
    assert not all(np.array_equal(p[0], q[0]) for p, q in zip(a, c))
    assert -1.0 <= min(images.min() for images, _ in a) and max(images.max() for images, _ in a) <= 1.0
    plain = next(train_pipeline(x, y, 8, seed=1).as_numpy_iterator())[0]
    assert sorted(np.round((plain + 1) * 127.5).astype(int).ravel().tolist()) == sorted(x.ravel().tolist())


def test_eval_pipeline_scales_uint8_images_like_the_records_pipeline():
    x = np.full((3, 4, 4, 3), 255, np.uint8)
    images, _, weights = next(eval_pipeline(x, np.zeros(3, np.int32), 4).as_numpy_iterator())
    assert images.shape == (4, 4, 4, 3) and images[:3].min() == 1.0 and weights.tolist() == [1, 1, 1, 0]


def test_the_proxy_pipelines_run_without_the_autotuner_whose_iterators_wait_to_be_deleted():
    x, y = np.zeros((8, 4, 4, 3), np.uint8), np.zeros(8, np.int32)
    pipelines = [eval_pipeline(x, y, 4)] + [train_pipeline(x, y, 4, seed=0, augment=augment)
                                            for augment in (False, True, "airbench")]
    assert [p.options().autotune.enabled for p in pipelines] == [False] * 4


def test_digits_honour_train_images_as_a_data_dir_does():
    data = proxy_data.load_digits(ProxyConfig(train_images=300))
    assert len(data.x_train) == 300 and len(data.x_val) == 75  # the 20% of the pool held out
    everything = proxy_data.load_digits(ProxyConfig())
    assert len(everything.x_train) + len(everything.x_val) == 1797


# ---- the dataset table --------------------------------------------------------------------------


def load_stripes(proxy: ProxyConfig) -> ArrayDataset:
    """A test's dataset: 64 8x8x1 images, horizontal (0) or vertical (1) stripes."""
    y = (np.arange(64) % 2).astype("int32")
    stripes = (np.arange(8) % 2).astype("float32")
    x = np.where(y[:, None, None] == 0, stripes[None, :, None], stripes[None, None, :])[..., None]
    plan = plan_split(proxy, len(y))
    train, val = hold_out(y[:plan.pool], plan)
    return ArrayDataset(x[train], y[train], x[val], y[val], num_classes=2)


def test_every_proxy_dataset_names_a_loader_that_imports():
    for name, spec in PROXY_DATASETS.items():
        assert callable(spec.load_function()), name


def test_a_new_dataset_is_one_table_entry(monkeypatch):
    monkeypatch.setitem(PROXY_DATASETS, "stripes", ProxyDataset(
        "stripes", image_size=8, validation_fraction=0.25, loader="tests.test_proxy_data:load_stripes",
        num_images=64, channels=1, num_classes=2))
    monkeypatch.setattr(proxy_data, "_CACHE", {})
    stripes = ProxyConfig(dataset="stripes", train_batch_size=16)
    assert check_proxy(stripes).num_validation == 16
    data = load_proxy_data(stripes)
    assert data.x_train.shape == (48, 8, 8, 1) and data.x_val.shape == (16, 8, 8, 1) and data.num_classes == 2


def test_a_bad_loader_names_itself():
    with pytest.raises(ValueError, match="loader: needs 'module:function', got 'load_stripes'"):
        ProxyDataset("x", 8, 0.1, loader="load_stripes")
    with pytest.raises(AttributeError, match="'trainer.proxy_data:load_nothing': trainer.proxy_data has no"):
        ProxyDataset("x", 8, 0.1, loader="trainer.proxy_data:load_nothing").load_function()


def test_the_dataset_table_imports_no_tensorflow():
    probe = "import sys, core.proxy_config, experiments.search.driver; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": REPO})
    assert out.stdout.strip() == "False"


def test_a_search_on_a_typod_or_unprepared_data_dir_says_what_to_give(tmp_path):
    (tmp_path / "photos" / "dog").mkdir(parents=True)
    (tmp_path / "photos" / "dog" / "1.JPG").write_bytes(b"a photo")
    with pytest.raises(FileNotFoundError, match=f"photo: no such directory \\(did you mean {tmp_path}/photos\\?\\)"):
        check_data_dir(proxy(str(tmp_path / "photo")))
    with pytest.raises(FileNotFoundError, match=f"run `amoeba prepare --train_dir={tmp_path / 'photos'} "):
        check_data_dir(proxy(str(tmp_path / "photos")))
