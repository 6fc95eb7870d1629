"""airbench's training-step pieces (trainer/fast_recipe.py) and its augmentation (trainer/records.py):
the BN offsets' own learning rate and decay, the whitening bias's freeze, lookahead, the
2-pixel reflect translation with the alternating flip, and the Trainer running them together."""

import numpy as np
import pytest
import tensorflow as tf

from core.train_config import TrainConfig


def tiny_airbench():
    from trainer.airbench import build_airbench

    return build_airbench((12, 12, 3), 3, width_multiplier=1 / 32)


def test_bn_offsets_take_their_own_rate_and_decay_the_others_are_untouched():
    from trainer.fast_recipe import ParameterGroups, batch_norm_offsets

    model = tiny_airbench()
    groups = ParameterGroups(model, bn_lr_factor=64.0, bn_weight_decay=0.5, freeze_whiten_bias_at=0)
    norms = batch_norm_offsets(model)
    assert len(norms) == 6 and all("beta" in v.path for v in norms)  # airbench's BN has no scale
    gradients = [tf.ones_like(v) for v in model.trainable_variables]
    scaled = groups.scale_gradients(gradients)
    by_path = {v.path: g for v, g in zip(model.trainable_variables, scaled)}
    for variable in model.trainable_variables:
        expected = 64.0 if any(variable is n for n in norms) else 1.0
        assert np.all(by_path[variable.path].numpy() == expected), variable.path
    for variable in norms:
        variable.assign(tf.fill(variable.shape, 2.0))
    size = sum(int(np.prod(v.shape)) for v in norms)
    assert float(groups.decay_loss()) == pytest.approx(0.5 * size * 4.0 / 2)
    assert ParameterGroups(model, 1.0, 0.0, 0).decay_loss() == 0.0
    from trainer.resnet import build_resnet9

    scaled_bn = build_resnet9((16, 16, 3), 3, width_multiplier=0.125)  # BN with a scale: the offsets only
    groups = ParameterGroups(scaled_bn, 64.0, 0.0, 0)
    factors = {v.path: float(g.numpy().flat[0]) for v, g in zip(
        scaled_bn.trainable_variables, groups.scale_gradients([tf.ones_like(v) for v in scaled_bn.trainable_variables]))}
    assert {p.rsplit("/", 1)[-1] for p, f in factors.items() if f == 64.0} == {"beta"}
    assert all(f == 1.0 for p, f in factors.items() if p.endswith("gamma"))


def test_the_whitening_bias_keeps_its_value_from_the_last_step_it_trains():
    from trainer.airbench import whitening_layer
    from trainer.fast_recipe import ParameterGroups
    from trainer.resnet import build_resnet9

    model = tiny_airbench()
    bias = whitening_layer(model).bias
    groups = ParameterGroups(model, 1.0, 0.0, freeze_whiten_bias_at=2)
    groups.start()
    for step, value in ((1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0)):
        bias.assign(tf.fill(bias.shape, value))  # what the optimizer's step did
        groups.after_step(tf.constant(step, tf.int64))
        groups.after_sync()
        assert np.all(bias.numpy() == min(value, 2.0)), step
    bias.assign(tf.fill(bias.shape, 1.5))  # a lookahead sync moves a frozen bias too, as airbench's
    groups.after_sync()
    bias.assign(tf.fill(bias.shape, 9.0))  # the next step's gradient does not
    groups.after_step(tf.constant(5, tf.int64))
    assert np.all(bias.numpy() == 1.5)
    resnet9 = build_resnet9((16, 16, 3), 3, width_multiplier=0.125)
    with pytest.raises(ValueError, match="no whitening conv bias to freeze"):
        ParameterGroups(resnet9, 1.0, 0.0, 2)
    candidate = ParameterGroups(resnet9, 1.0, 0.0, 2, whitening_required=False)  # a search's: nothing to freeze
    assert candidate.whiten_bias is None and candidate.freeze_at == 0


def test_lookahead_averages_every_k_steps_with_a_cubic_decay_and_ends_on_the_average():
    import keras

    from trainer.fast_recipe import Lookahead

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, use_bias=False)])
    kernel = model.weights[0]
    kernel.assign([[0.0], [0.0]])
    lookahead = Lookahead(model, every=2, decay=0.5, total_steps=5)
    average = np.zeros((2, 1))
    for step in range(1, 6):
        raw = np.full((2, 1), float(step))
        kernel.assign(raw)  # the optimizer's step
        lookahead.after_step(tf.constant(step, tf.int64))
        if step % 2 == 0:
            decay = 0.5 * (step / 5) ** 3
            average = average + (1 - decay) * (raw - average)
            np.testing.assert_allclose(kernel.numpy(), average, rtol=1e-6)  # copied back
        elif step < 5:
            np.testing.assert_array_equal(kernel.numpy(), raw)  # untouched between syncs
    np.testing.assert_allclose(kernel.numpy(), average, rtol=1e-6)  # the last step: the average
    np.testing.assert_allclose(lookahead.average[0].numpy(), average, rtol=1e-6)


def testairbench_augmentation_translates_by_reflection_and_flips_by_the_images_bit_and_the_epoch():
    from trainer.records import airbench_augment, _flip_bit

    image = tf.reshape(tf.range(6 * 6 * 3, dtype=tf.float32), [6, 6, 3])
    padded = tf.pad(image, [[2, 2], [2, 2], [0, 0]], mode="REFLECT").numpy()
    windows = [padded[y:y + 6, x:x + 6] for y in range(5) for x in range(5)]
    seen = set()
    for i in range(40):
        seed = tf.constant([i, 7], tf.int64)
        plain = airbench_augment(image, seed, tf.constant(0), tf.constant(0)).numpy()
        offset = next(k for k, w in enumerate(windows) if np.array_equal(w, plain))  # a reflect translation
        seen.add(offset)
        np.testing.assert_array_equal(airbench_augment(image, seed, tf.constant(0), tf.constant(1)).numpy(),
                                      plain[:, ::-1])  # the next epoch: mirrored
        np.testing.assert_array_equal(airbench_augment(image, seed, tf.constant(1), tf.constant(1)).numpy(), plain)
        np.testing.assert_array_equal(airbench_augment(image, seed, tf.constant(1), tf.constant(2)).numpy(),
                                      plain[:, ::-1])
    assert len(seen) > 10  # translations of -2..2 pixels both ways, not one
    bits = [int(_flip_bit(tf.constant(f"image {i}"), 0)) for i in range(200)]
    assert 70 < sum(bits) < 130  # about half flipped in the first epoch
    assert bits == [int(_flip_bit(tf.constant(f"image {i}"), 0)) for i in range(200)]
    assert bits != [int(_flip_bit(tf.constant(f"image {i}"), 1)) for i in range(200)]  # another key


def test_the_airbench_pipeline_flips_each_cached_image_in_every_other_epoch(tmp_path, monkeypatch):
    from trainer import records
    from trainer.fake_imagenet import write_fake_imagenet

    monkeypatch.setattr(records, "AIRBENCH_TRANSLATE", 0)  # no translation: each view is the image or its mirror
    data = str(tmp_path / "data")
    write_fake_imagenet(data, num_train=8, num_eval=2, num_classes=2, image_size=16)

    def epochs(first):
        batches = iter(records.train_dataset(data, 8, 16, augmentation="airbench", cache=True, first_example=first))
        return [{image.tobytes() for image in next(batches)[0].numpy()} for _ in range(2)]

    def mirrored(views):
        return {np.frombuffer(v, np.float32).reshape(16, 16, 3)[:, ::-1].tobytes() for v in views}

    first, second = epochs(0)
    assert len(first) == 8 and first != second and mirrored(second) == first  # every image flipped over
    resumed_first, _ = epochs(8)  # a resume at the start of epoch 1 keeps its parity
    assert resumed_first == second


def test_trainer_runs_the_airbench_recipe_and_refuses_to_resume_without_its_average(tmp_path):
    from trainer.airbench import whitening_layer
    from trainer.fake_imagenet import write_fake_imagenet
    from trainer.train import Trainer

    data, model_dir = str(tmp_path / "data"), str(tmp_path / "m")
    write_fake_imagenet(data, num_train=16, num_eval=8, num_classes=2, image_size=12)
    config = TrainConfig(model="airbench94", width_multiplier=1 / 32, data=data, model_dir=model_dir, train_steps=4,
                         image_size=12, train_batch_size=8, eval_batch_size=8, augmentation="airbench",
                         optimizer="momentum", nesterov=True, learning_rate=0.2, bn_lr_factor=64.0,
                         bn_weight_decay=1e-4, lookahead_every=3, whiten_bias_epochs=0.5, iterations_per_loop=4)
    trainer = Trainer(config)
    bias = whitening_layer(trainer.model).bias
    result = trainer.train()  # 2 steps an epoch: the bias trains for the first step only
    assert np.isfinite(result["loss"])
    frozen = bias.numpy()
    assert not np.allclose(frozen, 0.0)
    for average, weight in zip(trainer.lookahead.average, trainer.lookahead.weights):  # step 4 of 4, no sync due:
        np.testing.assert_allclose(average.numpy(), weight.numpy())  # the last step made the model the average
    longer = Trainer(TrainConfig(**{**config.__dict__, "train_steps": 6}))
    longer.train()
    np.testing.assert_array_equal(whitening_layer(longer.model).bias.numpy(), frozen)  # stays after a resume
    with pytest.raises(ValueError, match="trained with --lookahead_every=3: resume it with it"):
        Trainer(TrainConfig(**{**config.__dict__, "train_steps": 8, "lookahead_every": 0})).train()


def test_the_proxy_speaks_amoeba_trains_recipe_and_checks_it_alike():
    from core.proxy_config import ProxyConfig

    fast = ProxyConfig(train_batch_size=32, lr_schedule="triangular", label_smoothing=0.2, bn_lr_factor=64.0,
                       lookahead_every=5, eval_tta="flip", augmentation="airbench", nesterov=False)
    assert fast.fast_recipe_changes() == ["nesterov", "lr_schedule", "label_smoothing", "bn_lr_factor",
                                          "lookahead_every", "augmentation", "eval_tta"]
    assert ProxyConfig().fast_recipe_changes() == []
    for change, message in (({"label_smoothing": 1.0}, r"proxy label_smoothing: in \[0, 1\)"),
                            ({"lr_schedule": "triangular", "lr_warmup_epochs": 1.0}, "proxy lr_schedule triangular: "
                                                                                       "its own warm-up"),
                            ({"lr_schedule": "triangular", "train_seconds": 5.0}, "not with --train_seconds"),
                            ({"lr_schedule": "exponential"}, "proxy lr_schedule: unknown 'exponential'"),
                            ({"augmentation": "inception"}, "proxy augmentation: unknown 'inception'"),
                            ({"eval_tta": "all"}, "proxy eval_tta: unknown 'all'"),
                            ({"bn_lr_factor": 0.0}, "proxy bn_lr_factor: must be positive")):
        with pytest.raises(ValueError, match=message):
            ProxyConfig(**change)
    with pytest.raises(ValueError, match="bn_lr_factor: only with optimizer 'momentum' or 'sgd'"):
        TrainConfig(model="resnet20", data="d", model_dir="m", num_epochs=1, bn_lr_factor=2.0)  # rmsprop's default


def test_the_proxy_trains_digits_with_the_fast_recipe():
    from core.proxy_config import ProxyConfig
    from searchspace import Block, NasNetGenotype, make_cell
    from trainer.candidate import train_candidate

    cell = NasNetGenotype(make_cell([Block((0, 1), ("sep_conv_3x3", "none"))]),
                          make_cell([Block((0, 1), ("max_pool_3x3", "none"))]))
    proxy = ProxyConfig(epochs=3, filters=8, lr_schedule="triangular", label_smoothing=0.2, bn_lr_factor=4.0,
                        bn_weight_decay=1e-4, lookahead_every=5, eval_tta="flip", nesterov=False)
    metrics = train_candidate(cell, proxy)
    assert metrics["val_accuracy"] > 0.5  # chance is 0.1


def test_the_proxys_airbench_pipeline_flips_each_image_over_in_the_next_epoch(monkeypatch):
    from trainer import records
    from trainer.proxy_data import train_pipeline

    monkeypatch.setattr(records, "AIRBENCH_TRANSLATE", 0)  # no translation: each view is the image or its mirror
    x = np.random.default_rng(0).integers(0, 255, (16, 8, 8, 3), dtype=np.uint8)
    y = np.arange(16, dtype=np.int64)  # each image its own label: found again after a shuffle

    def epoch(e):
        images, labels = next(train_pipeline(x, y, 16, seed=e, augment="airbench", epoch=e).as_numpy_iterator())
        return {int(label): image for image, label in zip(images, labels)}

    first, second = epoch(0), epoch(1)
    pixels = x.astype(np.float32) / 127.5 - 1.0
    flipped = [i for i in range(16) if np.allclose(first[i], pixels[i][:, ::-1])]
    assert all(i in flipped or np.allclose(first[i], pixels[i]) for i in range(16))
    assert 2 <= len(flipped) <= 14  # a random share mirrored in the first epoch
    for i in range(16):
        np.testing.assert_allclose(second[i], first[i][:, ::-1])  # every image flipped over the next


def test_the_proxys_weight_average_follows_each_step_and_is_swapped_in_and_out():
    from trainer.fast_recipe import WeightAverage

    model = tiny_airbench()
    average = WeightAverage(model, decay=0.75)
    start = [v.numpy() for v in average.variables]
    expected = [w.copy() for w in start]
    for step in range(1, 3):
        for variable in average.variables:
            variable.assign_add(tf.fill(variable.shape, float(step)))
        tf.function(average.after_step, autograph=False)()
        expected = [0.75 * e + 0.25 * v.numpy() for e, v in zip(expected, average.variables)]
    raw = [v.numpy() for v in average.variables]
    with average.in_place():
        for variable, value in zip(average.variables, expected):
            np.testing.assert_allclose(variable.numpy(), value, rtol=1e-5, atol=1e-6)
    for variable, value in zip(average.variables, raw):
        np.testing.assert_array_equal(variable.numpy(), value)  # the raw weights back, to train on
    assert len(average.trackable()["weight_average"]) == len(model.trainable_variables)


def test_a_rung_checkpoint_keeps_the_weight_average_and_a_resume_reads_it_back(tmp_path):
    from types import SimpleNamespace

    from trainer.rung_state import rung_checkpoint
    from trainer.fast_recipe import WeightAverage
    from trainer.rung_state import restore_rung, save_rung

    def state(model):
        average = WeightAverage(model, decay=0.5)
        return average, SimpleNamespace(accumulators=[tf.Variable(tf.zeros_like(v)) for v in average.variables])

    model = tiny_airbench()
    average, optimizer = state(model)
    for variable in average.variables:
        variable.assign_add(tf.ones_like(variable))
    average.after_step()  # the average now lags the weights by half a step
    save_rung(rung_checkpoint(model, optimizer, average), str(tmp_path), 0, 1, [{"rung": 0}])
    fresh = tiny_airbench()
    resumed, fresh_optimizer = state(fresh)
    assert restore_rung(rung_checkpoint(fresh, fresh_optimizer, resumed), str(tmp_path)) == (1, [{"rung": 0}])
    for saved, read, weight in zip(average.average, resumed.average, fresh.trainable_variables):
        np.testing.assert_array_equal(read.numpy(), saved.numpy())
        assert not np.allclose(read.numpy(), weight.numpy())  # the average, not the weights again
    with pytest.raises(AssertionError):  # a trial resumed without its average is refused, not half-read
        restore_rung(rung_checkpoint(tiny_airbench(), fresh_optimizer, None), str(tmp_path))


def test_the_proxy_evaluates_the_average_and_sets_bn_momentum_and_epsilon():
    import keras

    from core.proxy_config import ProxyConfig
    from searchspace import Block, NasNetGenotype, make_cell
    from trainer.candidate import train_candidate
    from trainer.candidate_network import proxy_network

    cell = NasNetGenotype(make_cell([Block((0, 1), ("sep_conv_3x3", "none"))]),
                          make_cell([Block((0, 1), ("max_pool_3x3", "none"))]))
    proxy = ProxyConfig(epochs=2, filters=8, bn_momentum=0.6, bn_epsilon=1e-4, ema_decay=0.999999)
    assert proxy.fast_recipe_changes() == ["ema_decay", "bn_momentum", "bn_epsilon"]
    model, _ = proxy_network(cell, proxy, (8, 8, 1), 10, fused_batch_norm=True)
    norms = [layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.BatchNormalization)]
    assert norms and all(n.momentum == 0.6 and n.epsilon == 1e-4 for n in norms)
    # an average that hardly moves from the initial weights: evaluated, it scores near chance (0.1)
    assert train_candidate(cell, proxy)["val_accuracy"] < 0.3
    with pytest.raises(ValueError, match=r"proxy ema_decay: in \[0, 1\)"):
        ProxyConfig(ema_decay=1.0)
