"""airbench94 as a model family (trainer/airbench.py): its size by hand, the whitening conv that
whitens and stays frozen, the 1/9 head, the width multiplier, the table entry, the trainer's hook."""

import dataclasses

import keras
import numpy as np
import pytest

from tests.conftest import amoeba_here
from trainer.airbench import (PartialIdentity, WHITEN_EPS, build_airbench, group_widths, init_from_training_data,
                              patches, set_whitening, whitening_kernel)
from trainer.models import MODEL_FAMILIES, ModelSpec, build_model, init_from_data, model_report


def correlated_images(n=64, size=12, seed=0):
    """Images whose neighbouring pixels and channels are strongly correlated (as photos are): a
    smooth random field, its channels mixed, scaled into [-1, 1]."""
    rng = np.random.default_rng(seed)
    field = rng.normal(size=(n, size + 2, size + 2, 3))
    smooth = (field[:, :-2, :-2] + field[:, 1:-1, 1:-1] + field[:, 2:, 2:] + field[:, 1:-1, :-2]) / 4
    mixed = smooth @ np.array([[1.0, 0.8, 0.6], [0.0, 0.5, 0.4], [0.0, 0.0, 0.3]])
    return (0.4 * mixed).astype("float32")


def whitened_outputs(model, images):
    """The whitening conv's outputs (its bias is zero at first) as rows of 24 channels."""
    whiten = keras.Model(model.input, model.get_layer("whiten").output)
    return keras.ops.convert_to_numpy(whiten(images)).reshape(-1, 24).astype(np.float64)


def test_the_size_at_width_1_is_the_hand_count():
    """Trainable: the whitening bias 24; group 1: 3*3*24*64 + 3*3*64*64 convs and 2 BN betas of 64;
    groups 2 and 3: 3*3*64*256 + 3 * 3*3*256*256 and 4 BN betas of 256; the head 256*10 (no bias)."""
    by_hand = 24 + (9 * 24 * 64 + 9 * 64 * 64 + 2 * 64) + (9 * 64 * 256 + 3 * 9 * 256 * 256 + 4 * 256) + 256 * 10
    assert by_hand == 1_971_352
    model = build_model(ModelSpec("airbench94", num_classes=10, image_size=32))
    assert model_report(model)["params"] == by_hand
    assert sum(int(np.prod(w.shape)) for w in model.non_trainable_weights if "kernel" in w.path) == 2 * 2 * 3 * 24
    assert model.get_layer("group3_2_conv").output.shape == (None, 3, 3, 256)  # 32 -> 31 -> 15 -> 7 -> 3


def test_the_whitening_kernel_whitens_the_patches_of_its_images():
    images = correlated_images()
    raw = np.cov(patches(images).T)
    correlation = np.corrcoef(patches(images).T)
    assert np.abs(correlation - np.eye(12)).max() > 0.5  # the patches are far from white to begin with
    model = build_airbench((12, 12, 3), 10, width_multiplier=0.125)
    kernel = set_whitening(model, images, eps=0.0)
    assert kernel.shape == (2, 2, 3, 24)
    out = whitened_outputs(model, images)
    np.testing.assert_allclose(np.cov(out[:, :12].T), np.eye(12), atol=1e-3)  # the 12 kept directions
    np.testing.assert_allclose(out[:, 12:], -out[:, :12], atol=1e-5)  # and their negations

    eigenvalues = np.sort(np.linalg.eigvalsh(raw))[::-1]
    set_whitening(model, images)  # eps 5e-4 x the pixel variance: each direction lambda / (lambda + eps v)
    covariance = np.cov(whitened_outputs(model, images)[:, :12].T)
    damping = WHITEN_EPS * images.reshape(-1, 3).astype(np.float64).var(axis=0).mean()
    np.testing.assert_allclose(covariance, np.diag(eigenvalues / (eigenvalues + damping)), atol=1e-3)
    assert np.diag(covariance)[0] > 0.99
    tiny = whitened_outputs(model, images)
    set_whitening(model, images / 8)  # the same images in a smaller range: the same whitened outputs
    np.testing.assert_allclose(whitened_outputs(model, images / 8), tiny, atol=1e-4)


def test_the_whitening_conv_is_frozen_and_its_bias_trains():
    model = build_airbench((16, 16, 3), 10, width_multiplier=0.125)
    whiten = model.get_layer("whiten")
    assert [w.name for w in whiten.trainable_weights] == ["bias"]
    assert [w.name for w in whiten.non_trainable_weights] == ["kernel"]
    model.trainable = False
    model.trainable = True  # as fine-tuning code does: the bias trains again, the kernel stays frozen
    assert [w.name for w in whiten.trainable_weights] == ["bias"]
    assert all(not layer.trainable_weights or layer.name == "whiten"
               for layer in model.layers if isinstance(layer, keras.layers.Conv2D) and layer.use_bias)
    kernel = keras.ops.convert_to_numpy(whiten.kernel).copy()
    images = np.random.default_rng(0).uniform(-1, 1, (4, 16, 16, 3)).astype("float32")
    optimizer = keras.optimizers.SGD(0.5)
    import tensorflow as tf

    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(images, training=True)))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(whiten.kernel), kernel)
    assert np.abs(keras.ops.convert_to_numpy(whiten.bias)).max() > 0


def test_the_head_is_a_global_max_pool_and_a_bias_free_linear_layer_times_one_ninth():
    model = build_airbench((16, 16, 3), 7, width_multiplier=0.125, activation="relu")
    assert model.output_shape == (None, 7) and not model.get_layer("linear").use_bias
    images = np.random.default_rng(1).uniform(-1, 1, (3, 16, 16, 3)).astype("float32")
    pooled = keras.Model(model.input, model.get_layer("final_pool").output)(images)
    weights = keras.ops.convert_to_numpy(model.get_layer("linear").kernel)
    logits = model(images, training=False)
    assert logits.dtype == "float32"
    np.testing.assert_allclose(keras.ops.convert_to_numpy(logits), pooled @ weights / 9, rtol=1e-5, atol=1e-6)
    bn = model.get_layer("group1_1_bn")
    assert not bn.scale and bn.momentum == 0.6 and bn.epsilon == 1e-12
    assert model.get_layer("group2_2_relu") and not any("gelu" in layer.name for layer in model.layers)


def test_the_width_multiplier_scales_the_groups_as_resnet9s():
    assert group_widths(1.0) == (64, 256, 256) and group_widths(0.25) == (16, 64, 64) and group_widths(0.001) == (1, 1, 1)
    model = build_model(ModelSpec("airbench94", num_classes=10, image_size=32, width_multiplier=0.25))
    assert [model.get_layer(f"group{g}_{i}_conv").filters for g in (1, 2, 3) for i in (1, 2)] == [16, 16, 64, 64, 64, 64]
    by_hand = 24 + (9 * 24 * 16 + 9 * 16 * 16 + 2 * 16) + (9 * 16 * 64 + 3 * 9 * 64 * 64 + 4 * 64) + 64 * 10
    assert model_report(model)["params"] == by_hand
    with pytest.raises(ValueError, match="width_multiplier"):
        group_widths(0)


def test_identity_initialisation_passes_the_first_channels_through():
    kernel = keras.ops.convert_to_numpy(PartialIdentity(seed=0)((3, 3, 4, 6)))
    x = np.random.default_rng(2).normal(size=(1, 5, 5, 4)).astype("float32")
    y = keras.ops.convert_to_numpy(keras.ops.conv(x, kernel, padding="same"))
    np.testing.assert_allclose(y[..., :4], x, atol=1e-6)  # filters 0-3: the identity
    rest = kernel[..., 4:]  # filters 4-5: PyTorch's default, uniform in +-1/sqrt(fan_in) = +-1/6
    assert 0 < np.abs(rest).max() <= 1 / 6 and np.abs(rest).mean() > 1 / 24


def test_airbench94_is_in_the_model_table_and_builds_through_it():
    for name, activation in (("airbench94", "gelu"), ("airbench94_relu", "relu")):
        family = MODEL_FAMILIES[name]
        assert family.widths and not family.nasnet and not family.space
        model = build_model(ModelSpec(name, num_classes=10, image_size=16, width_multiplier=0.125))
        assert model.get_layer(f"group1_1_{activation}") and model.output_shape == (None, 10)
    with pytest.raises(ValueError, match="NASNet options"):
        ModelSpec("airbench94", num_classes=10, image_size=32, dropout=0.1)
    with pytest.raises(ValueError, match="at least 9 pixels"):
        build_airbench((8, 8, 3), 10)


def test_whitening_kernel_takes_a_tensor_and_any_channel_count():
    images = keras.ops.convert_to_tensor(correlated_images(n=8, size=8)[..., :1])
    assert whitening_kernel(images).shape == (2, 2, 1, 8)


@pytest.mark.integration
def test_the_trainers_hook_whitens_from_the_training_images_of_a_data_dir(cifar_mini, tmp_path):
    """`init_from_data` (the table's `from_data`): the whitening of cifar10-mini's 1,000 training
    images, preprocessed as the trainer's evaluation; a family without data-set weights is left alone."""
    from core.train_config import TrainConfig
    from trainer.airbench import whitening_images

    _, data = cifar_mini
    config = TrainConfig(model="airbench94", data=data, model_dir=str(tmp_path), image_size=32, train_steps=1,
                         augmentation="cifar")
    images = whitening_images(data, 32)
    assert images.shape == (1000, 32, 32, 3) and -1 <= images.min() < images.max() <= 1
    model = build_model(ModelSpec("airbench94", num_classes=10, image_size=32, width_multiplier=0.125))
    assert MODEL_FAMILIES["airbench94"].from_data is init_from_training_data and init_from_data(model, config)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model.get_layer("whiten").kernel),
                               whitening_kernel(images), rtol=1e-4, atol=1e-4)
    resnet = build_model(ModelSpec("resnet20", num_classes=10, image_size=32))
    assert not init_from_data(resnet, dataclasses.replace(config, model="resnet20"))
    assert not init_from_training_data(resnet, config)  # no whitening conv: nothing to set
    from trainer.train import Trainer

    trainer = Trainer(dataclasses.replace(config, width_multiplier=0.125, train_batch_size=32, eval_batch_size=200))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(trainer.model.get_layer("whiten").kernel),
                               whitening_kernel(images), rtol=1e-4, atol=1e-4)  # the trainer calls the hook


@pytest.mark.integration
def test_amoeba_train_trains_airbench94_a_few_steps(cifar_mini, tmp_path):
    _, data = cifar_mini
    result = amoeba_here(
        "train", "--model=airbench94_relu", "--width_multiplier=0.125", "--image_size=32", "--augmentation=cifar",
        "--train_batch_size=32", "--eval_batch_size=200", "--train_steps=2", "--iterations_per_loop=2",
        "--optimizer=momentum", "--learning_rate=0.1", "--label_smoothing=0.2", f"--data={data}",
        f"--model_dir={tmp_path / 'model'}")
    assert "step 2/2" in result.stdout and "final eval: top1" in result.stdout


def test_the_airbench94_config_is_a_valid_amoeba_train_recipe():
    """experiments/configs/airbench94_cifar10.cfg reads as `amoeba train` reads it (9.9 epochs: fractional)."""
    import os

    from experiments.commands import train
    from tests.conftest import REPO

    flagfile = os.path.join(REPO, "experiments", "configs", "airbench94_cifar10.cfg")
    train.FLAGS.unparse_flags()
    try:
        train.FLAGS(["amoeba train", f"--flagfile={flagfile}", "--data=d", "--model_dir=m"])
        config = train.config_from_flags()
    finally:
        train.FLAGS.unparse_flags()
    assert (config.model, config.train_batch_size, config.num_epochs) == ("airbench94", 1024, 9.9)
    assert (config.momentum, config.label_smoothing, config.image_size) == (0.85, 0.2, 32)
