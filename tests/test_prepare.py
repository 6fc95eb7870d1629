"""`amoeba prepare`: CSVs of your own images -> sharded TFRecords, and every bad-input case."""

import csv
import json
import os
import shutil
import struct

import pytest
import tensorflow as tf

from experiments.cli import run
from trainer import records
from trainer.prepare import BadInputError, PrepareConfig, prepare, write_shard

KEYS = ("image/encoded", "image/format", "image/class/label", "image/class/text", "image/height",
        "image/width", "image/filename")


def cifar(shared_dir: str) -> str:
    return os.path.join(shared_dir, "data", "cifar10-mini")


def read_records(pattern: str) -> list[dict]:
    """Every record of the files matching `pattern`, as {key: python value}."""
    out = []
    for path in sorted(tf.io.gfile.glob(pattern)):
        for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
            features = tf.train.Example.FromString(raw).features.feature
            out.append({key: (features[key].bytes_list.value or features[key].int64_list.value)[0]
                        for key in features})
    return out


def write_csv(path, rows) -> str:
    path.write_text("".join(row + "\n" for row in rows))
    return str(path)


def jpeg(height=12, width=10, channels=3, value=128) -> bytes:
    return tf.io.encode_jpeg(tf.fill([height, width, channels], tf.constant(value, tf.uint8))).numpy()


def cmyk_jpeg(values=(10, 200, 90, 30)) -> bytes:
    """An 8x8 flat-colour baseline JPEG with 4 components (Adobe CMYK), written by hand: each
    component is one block with only a DC coefficient (quantisation 1, level shift 128)."""

    def segment(marker: int, payload: bytes) -> bytes:
        return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload

    adobe = segment(0xEE, b"Adobe" + struct.pack(">HHHB", 100, 0, 0, 0))  # transform 0: no YCC
    dqt = segment(0xDB, b"\x00" + b"\x01" * 64)
    sof = segment(0xC0, struct.pack(">BHHB", 8, 8, 8, 4) + b"".join(bytes([i + 1, 0x11, 0]) for i in range(4)))
    dht_dc = segment(0xC4, b"\x00" + bytes([0, 0, 0, 12] + [0] * 12) + bytes(range(12)))  # sizes 0-11: 4 bits
    dht_ac = segment(0xC4, b"\x10" + bytes([1] + [0] * 15) + b"\x00")  # only EOB, code "0"
    sos = segment(0xDA, bytes([4]) + b"".join(bytes([i + 1, 0x00]) for i in range(4)) + b"\x00\x3f\x00")
    bits = ""
    for value in values:
        dc = 8 * (value - 128)
        size = abs(dc).bit_length()
        bits += format(size, "04b") + (format(dc if dc > 0 else dc + (1 << size) - 1, f"0{size}b") if size else "")
        bits += "0"
    bits += "1" * (-len(bits) % 8)
    data = bytearray()
    for i in range(0, len(bits), 8):
        data.append(int(bits[i:i + 8], 2))
        if data[-1] == 0xFF:
            data.append(0)
    return b"\xff\xd8" + adobe + dqt + sof + dht_dc + dht_ac + sos + bytes(data) + b"\xff\xd9"


@pytest.fixture
def small(shared_dir, tmp_path):
    """3 classes x 3 cifar10-mini JPEGs copied under tmp_path/img, train and eval CSVs beside them."""
    source = os.path.join(cifar(shared_dir), "train")
    train, evaluation = [], []
    for label in ("cat", "airplane", "ship"):
        os.makedirs(tmp_path / "img" / label)
        for i in range(3):
            shutil.copy(os.path.join(source, label, f"{i:04d}.jpg"), tmp_path / "img" / label / f"{i}.jpg")
            (train if i < 2 else evaluation).append(f"img/{label}/{i}.jpg,{label}")
    return tmp_path, write_csv(tmp_path / "train.csv", train), write_csv(tmp_path / "eval.csv", evaluation)


def test_cifar10_mini_end_to_end(shared_dir, tmp_path):
    data = cifar(shared_dir)
    out = str(tmp_path / "out")
    labels = open(os.path.join(data, "labels.txt")).read().split()
    summary = prepare(PrepareConfig(os.path.join(data, "train_set.csv"), os.path.join(data, "eval_set.csv"), out,
                                    labels=os.path.join(data, "labels.txt"), num_shards_train=3,
                                    num_shards_eval=2, num_workers=2), verbose=False)
    assert (summary.num_train_images, summary.num_eval_images, summary.labels) == (1000, 200, tuple(labels))
    assert sorted(os.listdir(out)) == ["eval_files.csv", "labels.txt", "metadata.json", "train-00000-of-00003",
                                       "train-00001-of-00003", "train-00002-of-00003",
                                       "train_files.csv", "validation-00000-of-00002", "validation-00001-of-00002"]
    meta = json.load(open(os.path.join(out, "metadata.json")))
    assert (meta["num_train_images"], meta["num_eval_images"], meta["num_label_classes"]) == (1000, 200, 10)
    assert meta["labels"] == labels and meta["label_offset"] == 0
    assert meta["splits"]["train"]["images_per_shard"] == [333, 333, 334]
    assert meta["source"]["train_csv"].endswith("train_set.csv") and meta["created"]
    assert records.read_metadata(out) == records.DataInfo(1000, 200, 10, tuple(labels), 0)
    for split, csv_name in (("train", "train_set.csv"), ("validation", "eval_set.csv")):
        rows = dict(csv.reader(open(os.path.join(data, csv_name))))
        found = read_records(os.path.join(out, f"{split}-*"))
        assert sorted(r["image/filename"].decode() for r in found) == sorted(rows)  # each exactly once
        for record in found:
            assert set(record) == set(KEYS) and record["image/format"] == b"JPEG"
            text = record["image/class/text"].decode()
            assert text == rows[record["image/filename"].decode()]
            assert record["image/class/label"] == labels.index(text)
            assert (record["image/height"], record["image/width"]) == (32, 32)
    original = open(os.path.join(data, "train/cat/0000.jpg"), "rb").read()
    assert original in [r["image/encoded"] for r in read_records(os.path.join(out, "train-*"))]  # stored as is


def test_labels_derived_when_absent(small):
    folder, train, evaluation = small
    out = folder / "out"
    prepare(PrepareConfig(train, evaluation, str(out)), verbose=False)
    assert (out / "labels.txt").read_text() == "airplane\ncat\nship\n"
    assert records.read_metadata(str(out)).labels == ("airplane", "cat", "ship")
    for record in read_records(str(out / "*-of-*")):
        assert record["image/class/label"] == ["airplane", "cat", "ship"].index(record["image/class/text"].decode())


def test_label_ids_follow_labels_txt_order(small):
    folder, train, evaluation = small
    (folder / "labels.txt").write_text("ship\ncat\n\nairplane\n")
    out = folder / "out"
    prepare(PrepareConfig(train, evaluation, str(out), labels=str(folder / "labels.txt")), verbose=False)
    assert (out / "labels.txt").read_text() == "ship\ncat\nairplane\n"
    assert records.read_metadata(str(out)).labels == ("ship", "cat", "airplane")
    found = read_records(str(out / "*-of-*"))
    assert len(found) == 9
    for record in found:
        assert record["image/class/label"] == ["ship", "cat", "airplane"].index(record["image/class/text"].decode())


def test_a_failed_shard_leaves_no_complete_looking_file(tmp_path):
    def killed_midway():
        yield b"record"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_shard(str(tmp_path / "train-00000-of-00001"), killed_midway())
    assert os.listdir(tmp_path) == []
    assert write_shard(str(tmp_path / "train-00000-of-00001"), [b"a", b"b"]) == 2
    assert os.listdir(tmp_path) == ["train-00000-of-00001"]


def test_skip_bad_rows_still_needs_a_training_image_per_class(small):
    folder, _, evaluation = small
    train = write_csv(folder / "t.csv", ["img/cat/0.jpg,cat", "img/gone.jpg,ship"])
    with pytest.raises(ValueError, match="1 class\\(es\\) with no training image: 'ship' \\(id 1\\)"):
        prepare(PrepareConfig(train, evaluation, str(folder / "out"), skip_bad_rows=True), verbose=False)
    assert not (folder / "out").exists()


def test_header_blank_lines_relative_and_absolute_paths(small):
    folder, _, evaluation = small
    absolute = str(folder / "img" / "ship" / "0.jpg")
    train = write_csv(folder / "t.csv", ["path,label", "img/cat/0.jpg,cat", "", f"{absolute},ship",
                                         "  img/airplane/0.jpg , airplane"])
    summary = prepare(PrepareConfig(train, evaluation, str(folder / "out"), num_workers=1), verbose=False)
    assert summary.num_train_images == 3 and summary.labels == ("airplane", "cat", "ship")
    names = sorted(r["image/filename"].decode() for r in read_records(str(folder / "out" / "train-*")))
    assert names == sorted(["img/cat/0.jpg", absolute, "img/airplane/0.jpg"])


def test_every_bad_row_is_reported_before_anything_is_written(small):
    folder, train, _ = small
    data = open(folder / "img" / "cat" / "0.jpg", "rb").read()
    (folder / "img" / "truncated.jpg").write_bytes(data[: len(data) // 2])
    (folder / "img" / "junk.jpg").write_bytes(b"not an image at all")
    (folder / "img" / "empty.jpg").write_bytes(b"")
    evaluation = write_csv(folder / "bad_eval.csv", [
        "img/cat/2.jpg,cat",          # 1: good
        "img/missing.jpg,cat",        # 2
        "img/truncated.jpg,cat",      # 3
        "img/junk.jpg,ship",          # 4
        "img/empty.jpg,ship",         # 5
        "img/ship/2.jpg,dog",         # 6: unknown label
        "img/ship/2.jpg,ship,extra",  # 7
        ",ship",                      # 8
        "img/ship/2.jpg,",            # 9
    ])
    out = folder / "out"
    with pytest.raises(BadInputError) as err:
        prepare(PrepareConfig(train, evaluation, str(out)), verbose=False)
    message = str(err.value)
    expected = [
        (2, "img/missing.jpg: file not found"),
        (3, "img/truncated.jpg: truncated JPEG"),
        (4, "img/junk.jpg: not a decodable image (Unknown image file format"),
        (5, "img/empty.jpg: empty file"),
        (6, "img/ship/2.jpg: unknown label 'dog'"),
        (7, "img/ship/2.jpg,ship,extra: malformed line: expected 2 fields (path,label), got 3"),
        (8, ",ship: malformed line: empty path"),
        (9, "img/ship/2.jpg: malformed line: empty label"),
    ]
    assert message.startswith("8 bad row(s); no shard was written")
    for line, text in expected:
        assert f"{evaluation}:{line}: {text}" in message
    assert f"{evaluation}:1:" not in message
    assert len(err.value.bad_rows) == 8 and not out.exists()


def test_error_lists_twenty_bad_rows_and_counts_the_rest(small):
    folder, train, _ = small
    evaluation = write_csv(folder / "e.csv", ["img/cat/2.jpg,cat"] + [f"img/gone{i}.jpg,cat" for i in range(25)])
    with pytest.raises(BadInputError) as err:
        prepare(PrepareConfig(train, evaluation, str(folder / "out")), verbose=False)
    assert str(err.value).count("file not found") == 20 and "... and 5 more" in str(err.value)
    assert len(err.value.bad_rows) == 25


def test_non_rgb_images_are_converted_to_rgb_jpeg(small):
    folder, _, evaluation = small
    (folder / "grey.jpg").write_bytes(jpeg(channels=1))
    (folder / "alpha.png").write_bytes(tf.io.encode_png(tf.fill([9, 11, 4], tf.constant(200, tf.uint8))).numpy())
    (folder / "cmyk.jpg").write_bytes(cmyk_jpeg())
    train = write_csv(folder / "t.csv", ["grey.jpg,cat", "alpha.png,airplane", "cmyk.jpg,ship"])
    prepare(PrepareConfig(train, evaluation, str(folder / "out")), verbose=False)
    found = {r["image/filename"].decode(): r for r in read_records(str(folder / "out" / "train-*"))}
    sizes = {"grey.jpg": (12, 10), "alpha.png": (9, 11), "cmyk.jpg": (8, 8)}
    for name, (height, width) in sizes.items():
        encoded = found[name]["image/encoded"]
        assert bool(tf.io.is_jpeg(encoded)) and list(tf.image.extract_jpeg_shape(encoded).numpy()) == [height, width, 3]
        assert (found[name]["image/height"], found[name]["image/width"]) == (height, width)


def test_skip_bad_rows_writes_a_report_and_goes_on(small):
    folder, train, _ = small
    evaluation = write_csv(folder / "e.csv", ["img/cat/2.jpg,cat", "img/gone.jpg,cat", "img/ship/2.jpg,dog"])
    out = folder / "out"
    summary = prepare(PrepareConfig(train, evaluation, str(out), skip_bad_rows=True), verbose=False)
    assert summary.num_eval_images == 1 and len(summary.bad_rows) == 2
    report = list(csv.reader(open(out / "bad_rows.csv")))
    assert report == [["csv", "line", "path", "reason"], [evaluation, "2", "img/gone.jpg", "file not found"],
                      [evaluation, "3", "img/ship/2.jpg", "unknown label 'dog' (not in the labels of "
                                                          f"{train})"]]
    meta = json.load(open(out / "metadata.json"))
    assert meta["num_eval_images"] == 1 and meta["source"]["num_bad_rows"] == 2


def test_dry_run_checks_and_writes_nothing(small):
    folder, train, evaluation = small
    summary = prepare(PrepareConfig(train, evaluation, str(folder / "out"), dry_run=True), verbose=False)
    assert (summary.num_train_images, summary.num_eval_images, len(summary.labels)) == (6, 3, 3)
    assert "would write" in summary.describe() and not (folder / "out").exists()
    bad = write_csv(folder / "e.csv", ["img/gone.jpg,cat"])
    with pytest.raises(BadInputError, match="file not found"):
        prepare(PrepareConfig(train, bad, None, dry_run=True), verbose=False)


def test_refuses_a_non_empty_output_dir(small):
    folder, train, evaluation = small
    (folder / "out").mkdir()
    (folder / "out" / "old.txt").write_text("x")
    with pytest.raises(ValueError, match=r"out: not empty \(old.txt\)"):
        prepare(PrepareConfig(train, evaluation, str(folder / "out")), verbose=False)


def test_empty_csv_missing_csv_and_class_without_training_image(small):
    folder, train, evaluation = small
    empty = write_csv(folder / "empty.csv", ["path,label", ""])
    with pytest.raises(ValueError, match=f"CSV {empty}: no rows"):
        prepare(PrepareConfig(empty, evaluation, str(folder / "out")), verbose=False)
    with pytest.raises(ValueError, match="nothere.csv: file not found"):
        prepare(PrepareConfig(train, str(folder / "nothere.csv"), str(folder / "out")), verbose=False)
    labels = folder / "labels.txt"
    labels.write_text("airplane\ncat\ndog\nship\n")
    with pytest.raises(ValueError, match=f"{labels}: 1 class\\(es\\) with no training image: 'dog' \\(id 2\\)"):
        prepare(PrepareConfig(train, evaluation, str(folder / "out"), labels=str(labels)), verbose=False)
    labels.write_text("airplane\ncat\nairplane\n")
    with pytest.raises(ValueError, match=f"{labels}:3: label 'airplane' repeats line 1"):
        prepare(PrepareConfig(train, evaluation, str(folder / "out"), labels=str(labels)), verbose=False)
    assert not (folder / "out").exists()


@pytest.fixture
def amoeba(capsys):
    """Run `amoeba prepare ARGS` in this process: (exit code, stdout, stderr)."""
    from experiments.commands import prepare as command

    def call(*args: str) -> tuple[int, str, str]:
        command.FLAGS.unparse_flags()  # flags are module state: start from the defaults
        code = 0
        try:
            run(["amoeba", "prepare", *args])
        except SystemExit as exit:
            code = exit.code
        finally:
            command.FLAGS.unparse_flags()
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return call


def test_amoeba_prepare_command(small, amoeba):
    folder, train, evaluation = small
    out = folder / "out"
    code, stdout, _ = amoeba(f"--train_csv={train}", f"--eval_csv={evaluation}", f"--output_dir={out}",
                             "--num_shards_train=2", "--num_workers=2")
    assert code == 0 and "6 training images in 2 shard(s), 3 evaluation images in 1 shard(s)" in stdout
    assert (out / "train-00001-of-00002").exists() and (out / "validation-00000-of-00001").exists()
    code, _, stderr = amoeba(f"--train_csv={train}", f"--eval_csv={evaluation}", f"--output_dir={out}")
    assert code == 1 and "not empty" in stderr
    bad = write_csv(folder / "bad.csv", ["img/gone.jpg,cat", "img/cat/2.jpg,cat"])
    code, stdout, stderr = amoeba(f"--train_csv={train}", f"--eval_csv={bad}", "--dry_run")
    assert code == 1 and f"{bad}:1: img/gone.jpg: file not found" in stderr
    code, stdout, _ = amoeba(f"--train_csv={train}", f"--eval_csv={bad}", "--dry_run", "--skip_bad_rows")
    assert code == 0 and "would write: 6 training images in 1 shard(s), 1 evaluation images" in stdout
    assert f"1 bad row(s) left out:\n  {bad}:1: img/gone.jpg: file not found" in stdout
    code, _, stderr = amoeba("--fake_imagenet", f"--output_dir={folder / 'f'}", f"--train_csv={train}")
    assert code == 1 and "--fake_imagenet does not take --train_csv" in stderr
    code, _, stderr = amoeba(f"--output_dir={folder / 'x'}")
    assert code == 1 and "needs --train_csv or --train_dir, and --eval_csv, --eval_dir or --eval_fraction" in stderr


def test_amoeba_prepare_fake_imagenet(tmp_path, amoeba):
    out = tmp_path / "fake"
    code, stdout, _ = amoeba("--fake_imagenet", f"--output_dir={out}", "--num_train=12", "--num_eval=5",
                             "--num_classes=3", "--image_size=16")
    assert code == 0 and "12 training and 5 evaluation images, 3 classes, label_offset 1" in stdout
    info = records.read_metadata(str(out))
    assert (info.num_train_images, info.num_eval_images, info.num_classes, info.label_offset) == (12, 5, 3, 1)
    labels = sorted(r["image/class/label"] for r in read_records(str(out / "train-*")))
    assert labels == [1] * 4 + [2] * 4 + [3] * 4


def test_progress_into_a_log_is_plain_lines(capsys):
    from trainer.shard_writer import Progress

    progress = Progress(3, "writing", enabled=True)  # capsys's stdout is not a terminal
    for _ in range(3):
        progress.add()
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\b" not in out and "\r" not in out
    assert out.splitlines() == ["writing", "  3/3 rows (100%)"]


def test_a_typod_label_stops_prepare_naming_its_rows_unless_the_classes_are_trusted(small):
    tmp_path, train_csv, eval_csv = small
    typo = write_csv(tmp_path / "typo.csv", open(train_csv).read().splitlines() + ["img/airplane/2.jpg,aeroplane"])
    with pytest.raises(ValueError) as err:
        prepare(PrepareConfig(typo, eval_csv, None, dry_run=True))
    assert f"'aeroplane': 1 row(s), close to 'airplane' (2 rows): {typo}:7" in str(err.value)
    assert "--trust_labels" in str(err.value)
    trusted = prepare(PrepareConfig(typo, eval_csv, None, dry_run=True, trust_labels=True))
    assert len(trusted.labels) == 4


def test_a_label_with_a_handful_of_rows_is_suspect_and_even_classes_are_not():
    from trainer.prepare_inputs import Row, suspicious_labels

    def rows(counts):
        return [Row("t.csv", i + 1, "x.jpg", "x.jpg", label)
                for i, label in enumerate(l for l, n in counts.items() for _ in range(n))]

    cifar_names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    assert suspicious_labels(rows({name: 100 for name in cifar_names})) is None  # cat/car-like pairs, even counts
    found = suspicious_labels(rows({**{name: 100 for name in cifar_names}, "zebra": 3}))
    assert "'zebra': 3 row(s), against a median of 100 rows per class: t.csv:1001, t.csv:1002, t.csv:1003" in found
    assert suspicious_labels(rows({"Cat": 1, "cat": 40, "dog": 40})).startswith("1 label(s)")  # case aside


def test_a_jpeg_with_bytes_after_its_end_is_whole_and_one_cut_anywhere_is_truncated():
    from trainer.prepare_images import ImageInfo, inspect_data, truncated_jpeg

    data = jpeg()
    for whole in (data, data + b"\0" * 8, data + b"MOTION_PHOTO trailer \xff\xd8 after the end"):
        assert not truncated_jpeg(whole) and isinstance(inspect_data(whole), ImageInfo)
    assert all(truncated_jpeg(data[:size]) for size in range(2, len(data) - 1))
    assert not truncated_jpeg(b"not a jpeg") and not truncated_jpeg(cmyk_jpeg())
