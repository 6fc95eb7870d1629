"""One preprocessing for every path to a model (issue 52): the search's proxy, training, evaluation with
and without cache and the exported SavedModel see the same pixels of a photo, and a cache holds what
the model reads, not full-size decoded images."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from trainer import proxy_data, records

SIZE = 32
WIDTH, HEIGHT = 1024, 768  # a landscape photo: its centred square is x 128..895
LABELS = ("red", "stripes")


def red_left_third() -> np.ndarray:
    pixels = np.full((HEIGHT, WIDTH, 3), 255, np.uint8)
    pixels[:, : WIDTH // 3, 1:] = 0  # red (255, 0, 0) on white
    return pixels


def stripes() -> np.ndarray:
    pixels = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    pixels[:, (np.arange(WIDTH) // 4) % 2 == 1] = 255  # 4 px black, 4 px white
    return pixels


def red_share(image: np.ndarray) -> float:
    """The share of the image that is red, from the blue channel (0 in red, 1 in white) of [-1, 1] floats."""
    return float(np.mean(1.0 - (image[..., 2] + 1.0) / 2.0))


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> tuple[str, dict[str, bytes]]:
    """A dir prepared by `amoeba prepare` from the two photos (each in both splits), and their JPEG bytes."""
    from trainer.prepare import PrepareConfig, prepare

    folder = tmp_path_factory.mktemp("photos")
    encoded = {}
    for label, pixels in zip(LABELS, (red_left_third(), stripes())):
        encoded[label] = tf.io.encode_jpeg(pixels, quality=95).numpy()
        (folder / f"{label}.jpg").write_bytes(encoded[label])
    rows = "".join(f"{folder / label}.jpg,{label}\n" for label in LABELS)
    (folder / "train.csv").write_text(rows)
    (folder / "eval.csv").write_text(rows)
    out = str(folder / "data")
    prepare(PrepareConfig(str(folder / "train.csv"), str(folder / "eval.csv"), out, trust_labels=True), verbose=False)
    return out, encoded


def by_label(images, labels) -> dict[str, np.ndarray]:
    """Each label's images, stacked [n, S, S, 3]; every label must be there."""
    images, labels = np.asarray(images), np.asarray(labels)
    found = {name: images[labels == i] for i, name in enumerate(LABELS)}
    assert all(len(found[name]) for name in LABELS), labels
    return found


def test_the_preprocessing_keeps_the_centre_square_and_averages_fine_detail(photos):
    _, encoded = photos
    red = records.preprocess_for_eval(encoded["red"], SIZE, center_crop=False).numpy()
    assert red.shape == (SIZE, SIZE, 3) and red_share(red) == pytest.approx((WIDTH // 3 - 128) / HEIGHT, abs=0.01)
    striped = records.preprocess_for_eval(encoded["stripes"], SIZE, center_crop=False).numpy()
    assert np.abs(striped).max() < 0.1  # 4-px stripes at 32 px: uniform grey, not black or white
    for image in (red, striped):  # whole uint8 levels, scaled
        np.testing.assert_allclose((image + 1) * 127.5, np.round((image + 1) * 127.5), atol=1e-3)
    small = tf.io.encode_jpeg(tf.cast(tf.random.stateless_uniform([SIZE, SIZE, 3], [1, 2], maxval=256, dtype=tf.int32),
                                      tf.uint8))
    np.testing.assert_array_equal(  # a CIFAR image at its own size: decoded, scaled, nothing else
        records.preprocess_for_eval(small, SIZE, center_crop=False).numpy(),
        tf.cast(tf.io.decode_jpeg(small), tf.float32).numpy() / 127.5 - 1.0)


def test_the_search_training_evaluation_and_the_saved_model_see_the_same_pixels(photos, monkeypatch, tmp_path):
    from core.proxy_config import ProxyConfig

    data, encoded = photos
    expected = {label: records.preprocess_for_eval(encoded[label], SIZE, center_crop=False).numpy()
                for label in LABELS}
    seen = {}
    proxy = proxy_data.load_prepared(ProxyConfig(dataset="prepared", data=data, image_size=SIZE, train_batch_size=1,
                                                 validation_images=1))
    seen["search"] = by_label(np.concatenate([proxy.x_train, proxy.x_val]).astype(np.float32) / 127.5 - 1.0,
                              np.concatenate([proxy.y_train, proxy.y_val]))
    for cache in (False, True):
        images, labels, weights = next(iter(records.eval_dataset(data, 2, SIZE, cache=cache, center_crop=False)))
        assert weights.numpy().tolist() == [1.0, 1.0]
        seen[f"evaluation, cache={cache}"] = by_label(images, labels)
        monkeypatch.setattr(records, "airbench_augment", lambda image, seed, bit, epoch: image)  # no augmentation
        training = records.train_dataset(data, 16, SIZE, cache=cache, augmentation="airbench", shuffle_buffer=2)
        seen[f"training, cache={cache}"] = by_label(*next(iter(training)))  # both photos, but for a chance of 2**-15
    seen["saved_model"] = saved_model_inputs(tmp_path, encoded)
    for path, images in seen.items():
        for label in LABELS:
            np.testing.assert_allclose(images[label], np.broadcast_to(expected[label], images[label].shape), atol=1e-6,
                                       err_msg=f"{path}: {label}")


def saved_model_inputs(tmp_path, encoded: dict[str, bytes]) -> dict[str, np.ndarray]:
    """What the exported SavedModel's bytes signature (serving_default) feeds its model: a model whose
    logits are its input image, flattened."""
    import keras

    from trainer.export import export_model

    model = keras.Sequential([keras.Input((SIZE, SIZE, 3)), keras.layers.Flatten()])
    export_dir = str(tmp_path / "export")
    export_model(model, export_dir, SIZE, [str(i) for i in range(SIZE * SIZE * 3)], center_crop=False,
                 images=np.zeros((1, SIZE, SIZE, 3), np.float32))
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    logits = serve(image_bytes=tf.constant([encoded[label] for label in LABELS]))["logits"].numpy()
    return {label: logits[i].reshape(1, SIZE, SIZE, 3) for i, label in enumerate(LABELS)}


def cached_elements(data: tf.data.Dataset) -> list[tf.TensorSpec]:
    """The element spec of what `data`'s cache (its one CacheDataset) holds, from the pipeline's graph."""
    from tensorflow.core.framework import graph_pb2

    policy = tf.data.experimental.ExternalStatePolicy.WARN
    graph = graph_pb2.GraphDef.FromString(data._as_serialized_graph(external_state_policy=policy).numpy())
    caches = [node for node in graph.node if node.op.startswith("CacheDataset")]
    assert len(caches) == 1, [node.op for node in graph.node]
    attrs = caches[0].attr
    return [tf.TensorSpec(tf.TensorShape(shape), tf.dtypes.as_dtype(dtype))
            for dtype, shape in zip(attrs["output_types"].list.type, attrs["output_shapes"].list.shape)]


def test_a_cache_holds_what_the_model_reads_not_decoded_full_size_photos(photos):
    data, _ = photos
    pixels = tf.TensorSpec([SIZE, SIZE, 3], tf.uint8)  # 3 KB an image, not a 1024x768 photo's 2.4 MB
    for augmentation in ("airbench", "cifar"):
        cached = cached_elements(records.train_dataset(data, 2, SIZE, cache=True, augmentation=augmentation))
        assert cached == [pixels, tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int64)], augmentation
    inception = cached_elements(records.train_dataset(data, 2, SIZE, cache=True, augmentation="inception"))
    assert inception[0] == tf.TensorSpec([], tf.string)  # the random crop needs the whole photo: its JPEG bytes
    for center_crop in (False, True):
        assert cached_elements(records.eval_dataset(data, 2, SIZE, cache=True, center_crop=center_crop)) == [
            pixels, tf.TensorSpec([], tf.int32)]
