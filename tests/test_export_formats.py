"""Export formats (issue 37): the table's checks, parity and its tolerance, and real models of our
families exported to every format and read back by each runtime."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.export_formats import FORMATS, check_formats, check_runtimes, require


def test_format_names_are_checked_and_a_missing_runtime_is_named_with_its_pip_line(monkeypatch):
    assert check_formats(["tflite", "onnx", "tflite"]) == ("tflite", "onnx")
    with pytest.raises(ValueError, match="export_format: \\['tf_lite'\\]: choose among saved_model, tflite"):
        check_formats(["tf_lite"])
    with pytest.raises(ValueError, match="none given"):
        check_formats([])
    monkeypatch.setitem(FORMATS, "onnx", FORMATS["onnx"].__class__(
        **{**vars(FORMATS["onnx"]), "reads_with": "onnxruntime_not_installed_here"}))
    with pytest.raises(ImportError, match=r"export format 'onnx' needs onnxruntime_not_installed_here, which is not "
                                          r"installed: pip install 'amoeba-nas\[onnx\]' \(or: pip install tf2onnx"):
        check_runtimes(["saved_model", "onnx"])
    assert require("json", "onnx") is json


def test_parity_holds_float_formats_to_their_logits_and_int8_to_their_spread_and_agreement():
    from trainer.export_formats import parity

    keras_logits = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 5.0], [0.2, 0.1, 0.0]])
    close = parity(keras_logits, keras_logits + 1e-4, "tflite")
    assert close["within_tolerance"] and close["top1_agreement"] == 1.0 and close["images"] == 4
    assert close["max_logit_diff"] == pytest.approx(1e-4) and close["max_logit_diff_allowed"] == pytest.approx(5e-3)
    far = parity(keras_logits, keras_logits + [[0, 0, 0.02]] * 4, "onnx")  # 0.02 > 1e-3 x 5: beyond, same top-1
    assert not far["within_tolerance"] and far["top1_agreement"] == 1.0
    spread = float(np.sqrt(np.mean(np.square(keras_logits - keras_logits.mean(1, keepdims=True)))))
    int8 = parity(keras_logits, keras_logits + 0.1, "tflite_int8")  # within 0.5 x the spread, classes the same
    assert int8["within_tolerance"] and int8["logit_spread"] == pytest.approx(spread)
    assert int8["max_logit_diff_allowed"] == pytest.approx(0.5 * spread) and int8["relative_to"] == "spread"
    assert not parity(keras_logits, keras_logits + 0.5 * spread + 0.01, "tflite_int8")["within_tolerance"]
    flipped = keras_logits.copy()
    flipped[0] = [1.45, 1.55, 0.0]  # the logits within 0.5 x the spread, but one of the three clear images
    assert parity(keras_logits, flipped, "tflite_int8")["top1_agreement_clear"] == 0.6667  # changes its class
    assert not parity(keras_logits, flipped, "tflite_int8")["within_tolerance"]
    with pytest.raises(ValueError, match="logits of shape \\(4, 2\\), the Keras model's \\(4, 3\\)"):
        parity(keras_logits, keras_logits[:, :2], "onnx")


def untrained_logits(images: int = 256, classes: int = 3) -> np.ndarray:
    """An untrained network's logits: near-uniform, a little noise about a small offset of one class
    (which wins on nearly every image)."""
    return np.random.default_rng(0).normal(0, 0.01, size=(images, classes)) + np.eye(classes)[0] * 0.05


def test_int8_parity_fails_a_file_of_noise_that_agrees_with_an_untrained_model_by_chance():
    """Issue 52: an untrained model's logits are near-uniform, so a broken file agreed on top-1 (0.99
    here: class 0 wins either way) and its logits, unbounded, went unchecked. Held to 0.5 x the
    logits' spread, noise of the image-dependent logits' own scale fails."""
    from trainer.export_formats import parity

    keras_logits = untrained_logits()
    noise = np.random.default_rng(1).normal(0, 0.01, size=keras_logits.shape)
    broken = parity(keras_logits, keras_logits.mean(0) + noise, "tflite_int8")  # the images' own part: noise
    assert broken["top1_agreement"] >= 0.9  # what the old rule looked at, alone
    assert not broken["within_tolerance"] and broken["max_logit_diff"] > broken["max_logit_diff_allowed"]
    shuffled = np.random.default_rng(2).permuted(keras_logits, axis=1)
    assert not parity(keras_logits, shuffled, "tflite_int8")["within_tolerance"]
    rounded = keras_logits + np.random.default_rng(3).normal(0, 0.01 * 0.02, size=keras_logits.shape)
    assert parity(keras_logits, rounded, "tflite_int8")["within_tolerance"]  # int8's size of error: fine


def test_int8_agreement_counts_only_images_without_a_near_tie_and_says_when_none_is_clear():
    from trainer.export_formats import parity, parity_line

    keras_logits = np.array([[1.0, 0.0, -1.0], [0.0, 1.0, -1.0], [-1.0, 0.0, 1.0], [0.5, 0.49, -1.0]])
    near_tie_flipped = keras_logits.copy()
    near_tie_flipped[3] = [0.49, 0.5, -1.0]  # a margin of 0.01 < 0.1 x the spread: rounding may flip it
    check = parity(keras_logits, near_tie_flipped, "tflite_int8")
    assert check["top1_agreement"] == 0.75 and check["clear_images"] == 3 and check["top1_agreement_clear"] == 1.0
    assert check["within_tolerance"]
    assert parity_line("tflite_int8", check).startswith(
        "top-1 agreement 1.0 on the 3 images without a near tie (0.75 on all), least 0.9, largest logit difference "
        "0.01 (allowed 0.")
    ties = np.zeros((4, 3)) + [[0.0, 1e-9, 0.0]]  # every image a tie: agreement is not judged
    check = parity(ties, ties + [[1e-9, 0.0, 0.0]], "tflite_int8")
    assert check["clear_images"] == 0 and check["top1_agreement_clear"] is None
    assert "top-1 agreement not judged, every image a near tie (0.0 on all)" in parity_line("tflite_int8", check)


@pytest.fixture(scope="module")
def airbench_export(tmp_path_factory):
    """airbench94 at an eighth of its width (the whitening conv, GELU, BN with a fixed scale, the
    scaled linear head) exported to every format: (its dir, the Keras model, the images checked)."""
    from trainer.export import export_model
    from trainer.models import ModelSpec, build_model

    model = build_model(ModelSpec("airbench94", num_classes=3, image_size=16, width_multiplier=0.125))
    images = np.random.default_rng(0).normal(size=(24, 16, 16, 3)).astype(np.float32)
    export_dir = str(tmp_path_factory.mktemp("export") / "airbench")
    checks = export_model(model, export_dir, 16, ["a", "b", "c"], images=images, formats=tuple(FORMATS))
    return export_dir, model, images, checks


def test_every_format_of_a_real_network_agrees_with_keras_and_says_so_in_parity_json(airbench_export):
    import os

    export_dir, _, _, checks = airbench_export
    saved = json.loads(open(os.path.join(export_dir, "parity.json")).read())
    assert saved == json.loads(json.dumps(checks)) and set(saved) == set(FORMATS)
    for name, check in saved.items():
        assert check["within_tolerance"] and check["images"] == 24, name
        assert os.path.exists(os.path.join(export_dir, check["file"])), name
    assert saved["tflite"]["max_logit_diff"] < 1e-3 and saved["onnx"]["max_logit_diff"] < 1e-3
    quantized = saved["tflite_int8"]  # measured: about 0.03 x the spread (issue 52), allowed 0.5 x
    assert quantized["top1_agreement_clear"] >= 0.9 and quantized["max_logit_diff"] < 0.25 * quantized["logit_spread"]
    int8, float32 = (os.path.getsize(os.path.join(export_dir, f)) for f in ("model_int8.tflite", "model.tflite"))
    assert int8 < 0.6 * float32  # int8 weights
    assert json.loads(open(os.path.join(export_dir, "export.json")).read()) == {
        "image_size": 16, "center_crop": True, "formats": list(FORMATS)}


def test_amoeba_predict_reads_every_format_and_each_ranks_the_classes_alike(airbench_export, tmp_path):
    import tensorflow as tf

    from tests.conftest import amoeba_here

    photo = tmp_path / "photo.jpg"  # another size than the export's: predict resizes it
    pixels = np.random.default_rng(1).integers(0, 256, size=(20, 24, 3), dtype=np.uint8)
    photo.write_bytes(tf.io.encode_jpeg(pixels).numpy())
    ranked = {}
    for name in FORMATS:
        out = amoeba_here("predict", f"--export_dir={airbench_export[0]}", f"--export_format={name}", str(photo),
                          "--format=json", "--top_k=3").stdout
        ranked[name] = [p["class_id"] for p in json.loads(out)[0]["predictions"]]
    assert sorted(ranked["saved_model"]) == [0, 1, 2]
    assert ranked["tflite"] == ranked["onnx"] == ranked["saved_model"]
    assert sorted(ranked["tflite_int8"]) == [0, 1, 2]  # int8 may rank a near tie otherwise


def test_the_real_int8_file_passes_and_broken_files_of_it_do_not(airbench_export):
    """Issue 52: the quantized airbench94 is within its tolerance; its logits shuffled across the
    classes, or with noise of the logits' own spread added, or a file ignoring its input, are not."""
    from trainer.export_formats import logit_spread, logits_model, parity, runner

    export_dir, model, images, _ = airbench_export
    keras_logits = logits_model(model, 16).predict_on_batch(images).astype(np.float64)
    int8 = runner(export_dir, "tflite_int8")(images)
    assert parity(keras_logits, int8, "tflite_int8")["within_tolerance"]
    rng = np.random.default_rng(0)
    for broken in (rng.permuted(int8, axis=1), int8 + rng.normal(0, logit_spread(keras_logits), int8.shape),
                   np.broadcast_to(int8.mean(0), int8.shape)):
        assert not parity(keras_logits, broken, "tflite_int8")["within_tolerance"]


def test_a_file_beyond_its_tolerance_is_an_error_naming_the_format(airbench_export, monkeypatch, tmp_path):
    from trainer import export as export_module
    from trainer.export import export_model

    _, model, images, _ = airbench_export
    real = export_module.runner
    monkeypatch.setattr(export_module, "runner", lambda folder, fmt: (lambda x: real(folder, fmt)(x) + (
        0.05 if fmt == "tflite" else 0.0)))
    with pytest.raises(ValueError, match=r"beyond tolerance: tflite \(top-1 agreement 1.0, largest logit "
                                         r"difference 0.05 \(allowed 0.001: 0.001 x max\(1, largest \|logit\|\)\)\) "
                                         r"\(parity.json\)"):
        export_model(model, str(tmp_path / "bad"), 16, ["a", "b", "c"], images=images,
                     formats=("saved_model", "tflite"))
    assert json.loads((tmp_path / "bad" / "parity.json").read_text())["saved_model"]["within_tolerance"]


def test_an_unknown_format_on_the_command_line_is_a_usage_error_naming_the_choices(tmp_path):
    from tests.conftest import amoeba_here

    result = amoeba_here("evaluate", f"--model_dir={tmp_path}", f"--export_dir={tmp_path / 'e'}",
                         "--export_format=saved_model,tf_lite", check=False)
    assert result.returncode != 0 and "export_format: choose among saved_model, tflite" in result.stderr
    assert "Traceback" not in result.stderr


def test_converted_formats_of_a_16_bit_model_are_refused_before_training():
    """A bfloat16 airbench94 does not convert (TFLite: 'tf.Conv2D op is neither a custom op nor a flex op')."""
    from core.export_formats import check_precision
    from core.proxy_config import ProxyConfig

    check_precision(["saved_model"], "bfloat16")  # the SavedModel keeps 16-bit compute
    check_precision(["tflite", "onnx"], "float32")
    with pytest.raises(ValueError, match="export_format tflite, onnx: needs a model trained with precision float32, "
                                         "not bfloat16"):
        check_precision(["saved_model", "tflite", "onnx"], "bfloat16")
    with pytest.raises(ValueError, match="proxy latency_runtime: tflite converts float32 networks only"):
        ProxyConfig(latency_runtime="tflite", precision="mixed_float16")
