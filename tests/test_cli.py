"""The `amoeba` command's cheap paths: show, usage errors, flagfiles."""

import json
import os
import shutil
import subprocess

import pytest

from searchspace.references import AMOEBANET_D
from tests.conftest import AMOEBA, REPO
from tests.conftest import amoeba as run_amoeba



def amoeba(*args):
    return run_amoeba(*args, check=False, timeout=120)


def test_show_a_reference_by_name():
    result = amoeba("show", "amoebanet_d")
    assert result.returncode == 0
    assert "h6 = avg_pool_3x3(h1) + conv_1x1(h5)" in result.stdout
    assert "output = concat(h0, h3, h4, h6)" in result.stdout


def test_show_json_text_and_file(tmp_path):
    text = json.dumps(AMOEBANET_D.to_json())
    assert amoeba("show", text).stdout == amoeba("show", "amoebanet_d").stdout
    path = tmp_path / "g.json"
    path.write_text(text)
    assert amoeba("show", str(path)).stdout == amoeba("show", "amoebanet_d").stdout


def test_show_bad_genotype_names_the_field(tmp_path):
    data = AMOEBANET_D.to_json()
    data["reduction"]["blocks"][2]["inputs"][0] = 7
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = amoeba("show", str(path))
    assert result.returncode != 0
    assert "reduction cell, block 2, inputs[0]: 7" in result.stderr


def test_show_a_search_dir_shows_its_best_genotype_or_says_what_to_give(tmp_path):
    (tmp_path / "best_genotype.json").write_text(json.dumps({"genotype": AMOEBANET_D.to_json()}))
    assert amoeba("show", str(tmp_path)).stdout == amoeba("show", "amoebanet_d").stdout
    (tmp_path / "empty").mkdir()
    result = amoeba("show", str(tmp_path / "empty"))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"{tmp_path / 'empty'}: a directory without best_genotype.json; give a search's output dir" in result.stderr


def test_an_unknown_subcommand_is_one_line_with_the_nearest_name():
    result = amoeba("serch")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "amoeba: unknown subcommand 'serch' (did you mean search?); amoeba --help lists them: " +
        ", ".join(__import__("experiments.cli", fromlist=["COMMANDS"]).COMMANDS)]
    assert "did you mean" not in amoeba("train-everything").stderr


def test_flagfile_is_read_and_validated(tmp_path):
    config = os.path.join(REPO, "experiments", "configs", "search_digits.cfg")
    flagfile = tmp_path / "bad.cfg"
    flagfile.write_text(open(config).read() + f"--output_dir={tmp_path / 'out'}\n--sample_size=11\n")
    result = amoeba("search", f"--flagfile={flagfile}")
    assert result.returncode != 0 and "sample_size" in result.stderr
    assert not (tmp_path / "out").exists()  # nothing written: no search_config.json, no lock file


@pytest.mark.integration  # a fresh process importing TensorFlow
def test_tensorflow_start_up_chatter_shows_when_asked_for(shared_dir, tmp_path):
    """--verbosity=1 lets TensorFlow's C++ start-up lines through; without it a command is quiet
    (test_train.py's killed `amoeba train`, a fresh process too, checks that)."""
    src = os.path.join(shared_dir, "data", "cifar10-mini")  # two of its JPEGs (not the prepared dir)
    rows = open(os.path.join(src, "train_set.csv")).read().splitlines()[1:3]
    csv = tmp_path / "two.csv"
    csv.write_text("".join(f"{os.path.join(src, row)}\n" for row in rows))
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    run = subprocess.run(AMOEBA + ["prepare", f"--train_csv={csv}", f"--eval_csv={csv}", f"--output_dir={tmp_path / 'out'}",
                                   "--verbosity=1"], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "InitializeLog" in run.stderr  # everything, with --verbosity=1


def test_show_draws_a_genotype_as_dot_and_json():
    dot = amoeba("show", "amoebanet_d", "--format=dot").stdout
    assert dot.startswith("digraph genotype {") and 'subgraph cluster_reduction' in dot
    assert dot.count("_out [label=\"concat\"") == 2 and "n_h0 -> n_out;" in dot  # h0 is in the normal concat
    assert json.loads(amoeba("show", "amoebanet_d", "--format=json").stdout) == AMOEBANET_D.to_json()


def test_show_draws_svg_and_png_with_graphviz(tmp_path):
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (make installs it as root: apt-get install graphviz)")
    svg = amoeba("show", "amoebanet_d", "--format=svg")
    assert svg.returncode == 0 and "<svg" in svg.stdout and "normal cell" in svg.stdout
    png = tmp_path / "cell.png"
    assert amoeba("show", "nasnet_a", "--format=png", f"--output={png}").returncode == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_graphviz_drawing_says_how_to_get_it(tmp_path):
    env = {**os.environ, "PATH": os.path.dirname(AMOEBA[0])}  # the venv's python, no dot
    result = subprocess.run(AMOEBA + ["show", "amoebanet_d", "--format=svg"], capture_output=True, text=True,
                            cwd=REPO, env=env, timeout=120)
    assert result.returncode == 1 and "apt-get install graphviz" in result.stderr


def test_train_and_promote_say_epochs_as_search_does_and_still_read_num_epochs(capsys):
    from absl import flags

    from experiments.recipe_flags import define_recipe_flags, recipe_from_flags

    for given, warned in (("--epochs=3", False), ("--num_epochs=3", True)):
        values = flags.FlagValues()
        define_recipe_flags(values)
        values(["amoeba", given, "--lr_decay_epochs=1,2.5"])
        recipe = recipe_from_flags(values, "promote")
        assert (recipe["num_epochs"], recipe["lr_decay_epochs"]) == (3.0, (1.0, 2.5))
        assert ("amoeba promote: --num_epochs is deprecated; use --epochs" in capsys.readouterr().err) == warned


def tiny_export_and_photos(folder) -> tuple[str, list[str], bytes]:
    """A 2-class model exported to folder/export (8x8 input, untrained) and 8 small JPEGs:
    (export dir, the JPEGs' paths, the first one's bytes)."""
    import keras
    import numpy as np
    import tensorflow as tf

    from trainer.export import export_model

    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(2)])
    export_dir = str(folder / "export")
    export_model(model, export_dir, image_size=8, labels=["cat", "dog"], images=np.random.rand(4, 8, 8, 3),
                 formats=("saved_model", "tflite"))
    images = []
    for i in range(8):
        images.append(str(folder / f"{i}.jpg"))
        pixels = tf.fill([12, 10, 3], tf.constant(30 * i, tf.uint8))
        (folder / f"{i}.jpg").write_bytes(tf.io.encode_jpeg(pixels).numpy())
    return export_dir, images, open(images[0], "rb").read()


def test_predict_classifies_the_readable_images_and_names_each_unreadable_one(tmp_path):
    """Ten photos, one truncated and one missing: the others are predicted, each bad one gets one
    line in our words (no `{{function_node ...}}`), and the exit status is 1."""
    from tests.conftest import amoeba_here

    export_dir, images, good = tiny_export_and_photos(tmp_path)
    (tmp_path / "cut.jpg").write_bytes(good[: len(good) // 2])
    images[3:3] = [str(tmp_path / "cut.jpg"), str(tmp_path / "gone.jpg")]
    result = amoeba_here("predict", f"--export_dir={export_dir}", *images, check=False)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"amoeba predict: {tmp_path / 'cut.jpg'}: truncated JPEG (no end-of-image marker)",
        f"amoeba predict: {tmp_path / 'gone.jpg'}: file not found",
        "amoeba predict: 2 of 10 image(s) could not be read; 8 classified"]
    shown = [line for line in result.stdout.splitlines() if not line.startswith("  ")]
    assert shown == [p for p in images if "cut" not in p and "gone" not in p]
    as_json = json.loads(amoeba_here("predict", f"--export_dir={export_dir}", "--format=json", *images,
                                     check=False).stdout)
    assert [entry["image"] for entry in as_json] == images
    assert as_json[3] == {"image": images[3], "error": "truncated JPEG (no end-of-image marker)"}
    assert [len(entry.get("predictions", [])) for entry in as_json] == [2, 2, 2, 0, 0, 2, 2, 2, 2, 2]
    assert amoeba_here("predict", f"--export_dir={export_dir}", images[0]).returncode == 0
    lite = json.loads(amoeba_here("predict", f"--export_dir={export_dir}", "--export_format=tflite", "--format=json",
                                  *images, check=False).stdout)  # LiteRT's interpreter, the same answers
    assert [[p["label"] for p in e.get("predictions", [])] for e in lite] == [
        [p["label"] for p in e.get("predictions", [])] for e in as_json]
    assert [e.get("error") for e in lite] == [e.get("error") for e in as_json]
    missing = amoeba_here("predict", f"--export_dir={export_dir}", "--export_format=onnx", images[0], check=False)
    assert missing.returncode != 0 and "no onnx export here (exported: saved_model, tflite; " in missing.stderr


@pytest.mark.integration  # a fresh process importing TensorFlow
def test_predict_as_a_user_runs_it_shows_our_lines_not_libjpegs(tmp_path):
    export_dir, images, good = tiny_export_and_photos(tmp_path)
    (tmp_path / "cut.jpg").write_bytes(good[: len(good) // 2])
    table = good.index(b"\xff\xc4")  # a Huffman table claiming more codes than 16 bits allow: libjpeg says so
    (tmp_path / "bogus.jpg").write_bytes(good[:table + 5] + b"\xff" * 16 + good[table + 21:])
    fresh = amoeba("predict", f"--export_dir={export_dir}", images[0], str(tmp_path / "bogus.jpg"),
                   str(tmp_path / "cut.jpg"))
    assert fresh.returncode == 1 and fresh.stdout.startswith(images[0])
    assert fresh.stderr.splitlines() == [  # our lines only, not libjpeg's or TensorFlow's
        f"amoeba predict: {tmp_path / 'bogus.jpg'}: not a decodable image (jpeg::Uncompress failed. Invalid JPEG "
        f"data or crop window.)",
        f"amoeba predict: {tmp_path / 'cut.jpg'}: truncated JPEG (no end-of-image marker)",
        "amoeba predict: 2 of 3 image(s) could not be read; 1 classified"]


def test_an_image_the_checks_pass_but_the_model_cannot_read_fails_alone():
    import numpy as np
    import tensorflow as tf

    from trainer.export import _classify

    def signature(image_bytes):
        if b"odd" in image_bytes.numpy():
            raise tf.errors.InvalidArgumentError(None, None, "{{function_node __wrapped__DecodeImage}} odd [Op:X]")
        return {"probabilities": tf.fill([len(image_bytes), 2], 0.5)}

    out = _classify(signature, [b"fine", b"odd", b"fine"])
    assert out[1] == "the model could not read it (odd)"
    np.testing.assert_allclose(np.stack([out[0], out[2]]), 0.5)
