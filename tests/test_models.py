"""The NASNet builder (tpu amoeba_net layout), ResNet v1.5, multiply-add counting, named models."""

import keras
import numpy as np
import pytest

from searchspace import Block, NasNetGenotype, make_cell
from searchspace.ops import NASNET_OP_SPECS, NASNET_OPS, OpSpec
from searchspace.references import AMOEBANET_D, REFERENCES
from trainer.flops import count_multiply_adds
from trainer.models import MODEL_NAMES, ModelSpec, build_model, model_report
from trainer.nasnet import (
    OP_BUILDERS,
    NasNetConfig,
    ScheduledDropPath,
    build_nasnet,
    cell_layout,
    reduction_indices,
    set_training_progress,
)
from trainer.resnet import build_resnet

TINY = NasNetGenotype(make_cell([Block((0, 1), ("sep_conv_3x3", "none"))]),
                      make_cell([Block((0, 1), ("max_pool_3x3", "none"))]))
CIFAR3 = NasNetConfig(num_cells=3, filters=4, stem="cifar")
# Parameter counts the if/elif op builder gave before the op table: the table must keep them.
OP_PARAMS = {"none": 3166, "avg_pool_3x3": 2334, "max_pool_3x3": 2334, "sep_conv_3x3": 10366, "sep_conv_5x5": 15486,
             "sep_conv_7x7": 23166, "dil_sep_conv_3x3": 6370, "conv_1x7_7x1": 6076, "conv_1x1": 4894, "conv_3x3": 5305,
             "max_pool_2x2": 2334}  # test_every_op_builds_in_normal_and_reduction_cells's model
REFERENCE_PARAMS = {"amoebanet_a": 92210, "amoebanet_d": 48786, "nasnet_a": 114498}  # NasNetConfig(6, 8, "cifar")


def images(n: int, size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, size, size, 3)).astype("float32")


def out_shape(model: keras.Model, layer_name: str) -> tuple:
    return tuple(model.get_layer(layer_name).output.shape[1:])


# ---- NASNet builder ----------------------------------------------------------------------------


@pytest.mark.parametrize("op", NASNET_OP_SPECS)
def test_every_op_builds_in_normal_and_reduction_cells(op):
    # The op reads h0 and h1 (strided in the reduction cell) and a block output (never strided).
    cell = make_cell([Block((0, 1), (op, op)), Block((2, 0), (op, "none"))])
    model = build_nasnet(NasNetGenotype(cell, cell), (16, 16, 3), 10, CIFAR3)
    logits = model(images(2, 16), training=True)
    assert logits.shape == (2, 10) and np.all(np.isfinite(np.asarray(logits)))
    assert out_shape(model, "cell0_out") == (16, 16, 4)
    assert out_shape(model, "reduction_cell0_out") == (8, 8, 8)
    assert out_shape(model, "reduction_cell1_out") == (4, 4, 16)
    assert model.count_params() == OP_PARAMS.get(op, model.count_params())


def test_every_op_kind_has_one_builder_and_every_builder_a_kind():
    assert NASNET_OPS == tuple(NASNET_OP_SPECS)
    assert {spec.kind for spec in NASNET_OP_SPECS.values()} == set(OP_BUILDERS)


def test_a_new_op_of_a_known_kind_is_one_table_entry(monkeypatch):
    monkeypatch.setitem(NASNET_OP_SPECS, "dil_sep_conv_5x5", OpSpec("dil_sep_conv", 5, dilation=2))
    cell = make_cell([Block((0, 1), ("dil_sep_conv_5x5", "none"))])
    model = build_nasnet(NasNetGenotype(cell, cell), (16, 16, 3), 10, CIFAR3)
    layer = model.get_layer("reduction_cell0_b0l_dil_sep_conv_5x5_sep")
    assert layer.kernel_size == (5, 5) and layer.dilation_rate == (2, 2)
    assert out_shape(model, "reduction_cell0_b0l_dil_sep_conv_5x5_subsample") == (8, 8, 8)


def test_an_op_whose_kind_has_no_builder_names_the_table(monkeypatch):
    monkeypatch.setitem(NASNET_OP_SPECS, "warp_3x3", OpSpec("warp", 3))
    cell = make_cell([Block((0, 1), ("warp_3x3", "none"))])
    with pytest.raises(ValueError, match=r"op 'warp_3x3' has no builder: its kind 'warp' is not in OP_BUILDERS"):
        build_nasnet(NasNetGenotype(cell, cell), (16, 16, 3), 10, CIFAR3)


def test_the_reference_cells_keep_their_parameter_counts():
    counts = {name: build_nasnet(genotype, (32, 32, 3), 10, NasNetConfig(6, 8, "cifar")).count_params()
              for name, genotype in REFERENCES.items()}
    assert counts == REFERENCE_PARAMS


@pytest.mark.parametrize("name", sorted(REFERENCES))
@pytest.mark.parametrize("stem,size,filters,final_size", [("cifar", 9, 4, 3), ("imagenet", 64, 8, 2)])  # odd too
def test_reference_genotypes_build_with_both_stems(name, stem, size, filters, final_size):
    genotype = REFERENCES[name]
    model = build_nasnet(genotype, (size, size, 3), 7, NasNetConfig(3, filters, stem))
    assert model(images(2, size), training=False).shape == (2, 7)
    # The last normal cell concatenates len(concat) states of width 4F at 1/4 (cifar: 9 -> 5 -> 3) or 1/32.
    width = 4 * filters * len(genotype.normal.concat)
    assert out_shape(model, "cell2_out") == (final_size, final_size, width)
    if stem == "imagenet":  # 64 -> 31 (3x3/2 VALID) -> 16 -> 8 in two stem reduction cells at F/4, F/2
        assert out_shape(model, "stem_conv")[:2] == (31, 31)
        assert out_shape(model, "stem_cell0_b0_add") == (16, 16, filters // 4)
        assert out_shape(model, "stem_cell1_b0_add") == (8, 8, filters // 2)


def test_amoebanet_d_layout_has_reductions_after_normal_cells_2_and_4():
    config = NasNetConfig(num_cells=6, filters=256, stem="imagenet")
    assert reduction_indices(6) == (2, 4) and reduction_indices(18) == (6, 12)
    expected = ["stem_reduction"] * 2 + ["normal", "normal", "reduction"] * 2 + ["normal"] * 2
    assert cell_layout(config) == expected
    model = build_nasnet(AMOEBANET_D, (32, 32, 3), 10, NasNetConfig(num_cells=6, filters=4, stem="cifar"))
    cells = [layer.name for layer in model.layers if layer.name.endswith("_out")]
    assert cells == ["cell0_out", "cell1_out", "reduction_cell0_out", "cell2_out", "cell3_out",
                     "reduction_cell1_out", "cell4_out", "cell5_out"]
    # The normal cell after a reduction takes the reduction cell's input as h1: a factorized reduction.
    names = {layer.name for layer in model.layers}
    assert {"cell2_h1_path1_conv", "cell4_h1_path1_conv"} <= names
    assert not any(n.startswith(("cell1_h1_path", "cell3_h1_path")) for n in names)


def test_proxy_width_layout_is_f_2f_2f_4f_4f():
    model = build_nasnet(TINY, (8, 8, 1), 10, CIFAR3)
    widths = [layer.output.shape[-1] for layer in model.layers if isinstance(layer, keras.layers.Add)]
    assert widths == [4, 8, 8, 16, 16]


def test_conv_ops_are_bottlenecked():
    cell = make_cell([Block((0, 1), ("conv_3x3", "conv_1x7_7x1"))])
    model = build_nasnet(NasNetGenotype(cell, cell), (16, 16, 3), 10, NasNetConfig(3, 8, "cifar"))
    assert model.get_layer("cell0_b0l_conv_3x3_pre_conv").filters == 2  # 8 / 4
    assert model.get_layer("cell0_b0l_conv_3x3_3x3_conv").filters == 2
    assert model.get_layer("cell0_b0l_conv_3x3_post_conv").filters == 8
    assert model.get_layer("reduction_cell0_b0r_conv_1x7_7x1_1x7_conv").strides == (1, 2)
    assert model.get_layer("reduction_cell0_b0r_conv_1x7_7x1_7x1_conv").strides == (2, 1)


def drop_path_model(keep: float) -> keras.Model:
    cell = make_cell([Block((0, 1), ("sep_conv_3x3", "avg_pool_3x3")), Block((2, 0), ("conv_1x1", "none"))])
    config = NasNetConfig(num_cells=3, filters=4, stem="cifar", drop_path_keep_prob=keep)
    return build_nasnet(NasNetGenotype(cell, cell), (16, 16, 3), 10, config)


def test_scheduled_drop_path_follows_training_progress():
    model = drop_path_model(0.5)
    x = images(8, 16)
    drops = [layer for layer in model.layers if isinstance(layer, ScheduledDropPath)]
    assert len(drops) == 3 * 5  # three ops but `none` per cell, five cells
    assert {layer.keep_prob for layer in drops} == {0.5}  # tpu's v1: one target, ramped over training
    assert len({id(layer.progress) for layer in drops}) == 1  # one shared variable

    set_training_progress(model, 0.0)
    inference = np.asarray(model(x, training=False))
    set_training_progress(model, 1.0)
    np.testing.assert_array_equal(np.asarray(model(x, training=False)), inference)  # inference unaffected
    set_training_progress(model, 0.0)  # no drop yet: training calls are deterministic (batch BN stats)
    a, b = np.asarray(model(x, training=True)), np.asarray(model(x, training=True))
    np.testing.assert_array_equal(a, b)
    set_training_progress(model, 1.0)
    c, d = np.asarray(model(x, training=True)), np.asarray(model(x, training=True))
    assert not np.allclose(c, d)
    assert not np.allclose(a, c)
    with pytest.raises(ValueError):
        set_training_progress(model, -0.1)
    set_training_progress(model, 3.0)  # clipped like tpu's burn-in ratio
    assert float(drops[0].progress.numpy()) == 1.0


def test_drop_path_drops_whole_examples_and_rescales():
    layer = ScheduledDropPath(0.25)
    layer.progress.assign(1.0)
    y = np.asarray(layer(np.ones((4000, 2, 2, 3), "float32"), training=True))
    per_example = y.reshape(4000, -1)
    assert np.all(per_example == per_example[:, :1])  # whole example kept or dropped
    assert set(np.unique(y)) <= {0.0, 4.0}
    assert abs(np.mean(y[:, 0, 0, 0] > 0) - 0.25) < 0.04
    layer.progress.assign(0.5)  # keep = 1 - 0.5 * 0.75
    y = np.asarray(layer(np.ones((4000, 1, 1, 1), "float32"), training=True))
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.625)}
    np.testing.assert_array_equal(np.asarray(layer(np.ones((3, 1, 1, 1), "float32"))), 1.0)  # inference


def test_no_drop_path_layers_without_drop_path():
    assert not [layer for layer in drop_path_model(1.0).layers if isinstance(layer, ScheduledDropPath)]


@pytest.mark.parametrize("size,pool", [(32, keras.layers.AveragePooling2D),
                                       (8, keras.layers.GlobalAveragePooling2D)])
def test_aux_head_gives_two_outputs(size, pool):
    config = NasNetConfig(num_cells=3, filters=4, stem="cifar", aux_head=True)
    model = build_nasnet(TINY, (size, size, 3), 6, config)
    logits, aux = model(images(2, size), training=True)
    assert logits.shape == (2, 6) and aux.shape == (2, 6)
    # After the normal cell just before the second reduction; 5x5/3 VALID pooling, or global
    # pooling where the map is under 5x5 (16x16 and 4x4 here).
    assert model.get_layer("aux_relu").input is model.get_layer("cell1_out").output
    assert isinstance(model.get_layer("aux_pool"), pool)
    assert model.get_layer("aux_full_conv").filters == 768


def test_logits_are_float32_under_mixed_bfloat16():
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        config = NasNetConfig(num_cells=3, filters=4, stem="cifar", aux_head=True, drop_path_keep_prob=0.7)
        model = build_nasnet(REFERENCES["amoebanet_a"], (16, 16, 3), 5, config)
        set_training_progress(model, 0.5)
        logits, aux = model(images(2, 16), training=True)
        assert model.get_layer("cell0_h0_conv").compute_dtype == "bfloat16"
        assert logits.dtype == "float32" and aux.dtype == "float32"
        resnet = build_resnet(18, (32, 32, 3), 4)
        assert resnet(images(1, 32)).dtype == "float32"
    finally:
        keras.mixed_precision.set_global_policy(previous)


def test_config_is_validated():
    with pytest.raises(ValueError, match="stem"):
        NasNetConfig(3, 8, "mnist")
    with pytest.raises(ValueError, match="num_cells"):
        NasNetConfig(2, 8, "cifar")
    with pytest.raises(ValueError, match="filters"):
        NasNetConfig(3, 4, "imagenet")


# ---- ResNet, multiply-adds, named models -------------------------------------------------------


@pytest.fixture(scope="module")
def resnet50():
    return build_resnet(50, (224, 224, 3), 1000)


def test_resnet50_has_the_published_parameter_count(resnet50):
    assert model_report(resnet50)["params"] == 25_557_032
    assert resnet50.get_layer("stage2_block1_2_conv").strides == (2, 2)  # v1.5: stride on the 3x3


def test_resnet50_multiply_adds_are_about_4_1e9(resnet50):
    assert count_multiply_adds(resnet50) == pytest.approx(4.1e9, rel=0.03)


def test_resnet18_forward_on_32x32():
    model = build_resnet(18, (32, 32, 3), 10)
    logits = model(images(2, 32), training=False)
    assert logits.shape == (2, 10) and np.all(np.isfinite(np.asarray(logits)))
    assert model_report(model)["params"] == 11_181_642  # torchvision resnet18 with 10 classes


@pytest.mark.parametrize("depth, params", [(20, 269_722), (32, 464_154), (44, 658_586), (56, 853_018),
                                           (110, 1_727_962)])
def test_cifar_resnets_have_the_papers_sizes(depth, params):
    """He et al. 2016, table 6: 0.27M, 0.46M, 0.66M, 0.85M, 1.7M (option A: shortcuts without
    parameters); depth counts the conv and dense layers."""
    model = build_model(ModelSpec(f"resnet{depth}", num_classes=10, image_size=32))
    assert model_report(model)["params"] == params
    assert sum(isinstance(l, (keras.layers.Conv2D, keras.layers.Dense)) for l in model.layers) == depth
    if depth == 20:
        logits = model(images(2, 32), training=False)
        assert logits.shape == (2, 10) and logits.dtype == "float32"
        assert model.get_layer("stage3_block1_shortcut").output.shape == (None, 8, 8, 64)
        assert count_multiply_adds(model) == pytest.approx(41e6, rel=0.02)


@pytest.mark.parametrize("width, params", [(1.0, 6_573_120), (0.25, 412_944)])
def test_resnet9_has_pages_size_and_shape(width, params):
    """Page's DAWNBench net: 6.57M parameters at width 1 (bias-free linear layer); 412,944 at 0.25."""
    model = build_model(ModelSpec("resnet9", num_classes=10, image_size=32, width_multiplier=width))
    assert model_report(model)["params"] == params
    assert sum(isinstance(l, (keras.layers.Conv2D, keras.layers.Dense)) for l in model.layers) == 9
    assert model.get_layer("layer3_add").output.shape == (None, 4, 4, round(512 * width))
    if width < 1:
        logits = model(images(2, 32), training=False)
        assert logits.shape == (2, 10) and logits.dtype == "float32"


def test_mobilenet_v3_small_is_keras_own_trained_from_scratch_at_32_pixels():
    """The mobile reference row: Keras's net without weights, logits out, its strides taking 32 px to 1x1."""
    model = build_model(ModelSpec("mobilenet_v3_small", num_classes=10, image_size=32, width_multiplier=0.5))
    assert model_report(model)["params"] == 578_474
    logits = model(images(2, 32), training=False)
    assert logits.shape == (2, 10) and logits.dtype == "float32"
    assert min(l.output.shape[1] for l in model.layers if len(l.output.shape) == 4 and l.output.shape[1]) == 1
    norms = [l for l in model.layers if isinstance(l, keras.layers.BatchNormalization)]
    assert len(norms) == 34 and {l.momentum for l in norms} == {0.9}  # not Keras's 0.999: chance after 781 steps


def test_only_a_family_with_widths_takes_a_width_multiplier():
    with pytest.raises(ValueError, match="width_multiplier: .*resnet9.*got 0.5 for 'resnet20'"):
        ModelSpec("resnet20", num_classes=10, image_size=32, width_multiplier=0.5)
    with pytest.raises(ValueError, match="width_multiplier"):
        ModelSpec("resnet9", num_classes=10, image_size=32, width_multiplier=0)


def test_multiply_adds_are_exact_on_a_hand_built_model():
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, strides=2, padding="same")(inputs)      # 4x4x4: 16*27*4 = 1728
    x = keras.layers.Conv2D(4, 3, padding="valid")(x)                     # 2x2x4: 4*36*4 = 576
    x = keras.layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same")(x)  # 2x2x8: 4*9*8 = 288
    x = keras.layers.SeparableConv2D(6, 3, strides=2, padding="same")(x)  # 1x1x6: 9*8 + 8*6 = 120
    x = keras.layers.Conv2D(4, 1, groups=2)(x)                            # 1x1x4: 3*4 = 12
    x = keras.layers.MaxPooling2D(1)(keras.layers.BatchNormalization()(x))  # not counted
    x = keras.layers.Dense(5)(keras.layers.Flatten()(x))                  # 4*5 = 20
    model = keras.Model(inputs, x)
    assert count_multiply_adds(model) == 1728 + 576 + 288 + 120 + 12 + 20


def test_model_spec_names_stems_and_errors():
    with pytest.raises(ValueError, match="resnet50.*amoebanet_d"):
        ModelSpec("vgg16", num_classes=10, image_size=32)
    with pytest.raises(ValueError, match="genotype"):
        ModelSpec("genotype", num_classes=10, image_size=32)
    assert ModelSpec("amoebanet_d", 10, 224).resolved_stem == "imagenet"
    assert ModelSpec("amoebanet_d", 10, 32).resolved_stem == "cifar"
    assert set(MODEL_NAMES) >= {"resnet18", "resnet200", "resnet20", "resnet110", "amoebanet_a", "amoebanet_d",
                                "nasnet_a", "genotype"}
    with pytest.raises(ValueError, match="NASNet options"):
        ModelSpec("resnet56", num_classes=10, image_size=32, aux_head=True)


def test_build_model_and_report():
    spec = ModelSpec("genotype", num_classes=10, image_size=16, num_cells=1, filters=4, genotype=TINY)
    model = build_model(spec)
    assert model.input_shape == (None, 16, 16, 3) and model.output_shape == (None, 10)
    with_aux = build_model(ModelSpec("genotype", 10, 16, num_cells=1, filters=4, aux_head=True,
                                     genotype=TINY))
    report = model_report(model)
    assert model_report(with_aux) == report  # the training-only aux head is not reported
    assert report["params"] == sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    assert report["multiply_adds"] == count_multiply_adds(model) > 0
    ref = build_model(ModelSpec("amoebanet_a", num_classes=5, image_size=32, num_cells=1, filters=4))
    assert ref(images(1, 32)).shape == (1, 5)


def test_fused_batch_norm_matches_keras_in_training_and_inference():
    from trainer.nasnet import FusedBatchNormalization

    x = np.random.default_rng(0).normal(2.0, 3.0, (16, 5, 5, 4)).astype("float32")
    keras_bn = keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5)
    fused_bn = FusedBatchNormalization(momentum=0.9, epsilon=1e-5)
    for layer in (keras_bn, fused_bn):
        layer.build(x.shape)
        layer.gamma.assign(np.linspace(0.5, 2.0, 4))
        layer.beta.assign(np.linspace(-1.0, 1.0, 4))
    for training in (True, True, False):  # two updates of the moving averages, then inference
        np.testing.assert_allclose(fused_bn(x, training=training), keras_bn(x, training=training), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fused_bn.moving_mean, keras_bn.moving_mean, rtol=1e-5)
    np.testing.assert_allclose(fused_bn.moving_variance, keras_bn.moving_variance, rtol=1e-5)
