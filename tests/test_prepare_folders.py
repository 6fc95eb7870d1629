"""`amoeba prepare --train_dir`: photos in class folders, said in the words of folders and files
(paths, not CSV lines), the split's file lists, and a truncated JPEG reported in our own words."""

import csv
import json
import os

import pytest

from tests.conftest import amoeba as run_amoeba
from tests.test_prepare import amoeba, jpeg, read_records, small  # noqa: F401 (amoeba, small: fixtures)
from trainer.prepare import BadInputError, PrepareConfig, prepare


def test_photos_in_class_folders_with_a_held_out_share_or_an_eval_folder(small, amoeba):
    tmp_path, _, _ = small
    photos = tmp_path / "img"  # img/CLASS/N.jpg: 3 classes of 3
    (photos / "cat" / "notes.txt").write_text("not an image: skipped, as Keras skips it")
    out = tmp_path / "out"
    summary = prepare(PrepareConfig(train_dir=str(photos), eval_fraction=0.34, output_dir=str(out)), verbose=False)
    assert (summary.num_train_images, summary.num_eval_images) == (6, 3)
    assert summary.labels == ("airplane", "cat", "ship")
    assert (out / "labels.txt").read_text() == "airplane\ncat\nship\n"
    evaluated = read_records(str(out / "validation-*"))
    assert sorted(r["image/class/text"].decode() for r in evaluated) == ["airplane", "cat", "ship"]
    assert json.loads((out / "metadata.json").read_text())["source"]["eval_fraction"] == 0.34

    both = prepare(PrepareConfig(train_dir=str(photos), eval_dir=str(photos), output_dir=None, dry_run=True))
    assert (both.num_train_images, both.num_eval_images) == (9, 9)
    code, stdout, _ = amoeba(f"--train_dir={photos}", "--eval_fraction=0.34", "--dry_run")
    assert code == 0 and "would write: 6 training images in 1 shard(s), 3 evaluation images in 1 shard(s), 3 cl" in stdout


def test_class_folders_name_a_bad_image_by_its_path_and_an_empty_class(small):
    tmp_path, _, _ = small
    photos = tmp_path / "img"
    (photos / "cat" / "broken.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(BadInputError, match=f"{photos}/cat/broken.jpg: "):
        prepare(PrepareConfig(train_dir=str(photos), eval_fraction=0.34, dry_run=True))
    (photos / "cat" / "broken.jpg").unlink()
    (photos / "dog").mkdir()
    with pytest.raises(ValueError, match="'dog'"):
        prepare(PrepareConfig(train_dir=str(photos), eval_fraction=0.34, dry_run=True))
    with pytest.raises(ValueError, match="give one of --eval_csv, --eval_dir or --eval_fraction"):
        PrepareConfig(train_dir=str(photos), dry_run=True)
    with pytest.raises(ValueError, match="not a folder"):
        prepare(PrepareConfig(train_dir=str(tmp_path / "nowhere"), eval_fraction=0.2, dry_run=True))


def test_a_folder_of_one_photo_is_a_class_and_gets_a_warning_that_it_has_no_evaluation_image(tmp_path):
    photos = tmp_path / "photos"  # 3 classes of 20 photos, and a folder the user made with one
    for label, count in (("airplane", 20), ("cat", 20), ("ship", 20), ("zebra", 1)):
        (photos / label).mkdir(parents=True)
        for i in range(count):
            (photos / label / f"{i}.jpg").write_bytes(jpeg(value=20 * i))
    (photos / "cat" / "broken.jpg").write_bytes(b"not a jpeg")
    out = tmp_path / "out"
    summary = prepare(PrepareConfig(train_dir=str(photos), eval_fraction=0.1, output_dir=str(out),
                                    skip_bad_rows=True), verbose=False)
    assert summary.labels == ("airplane", "cat", "ship", "zebra")  # not stopped as a likely typo
    assert summary.warnings == (
        f"1 class(es) with no evaluation image, so their accuracy is not measured: 'zebra' (1 image in "
        f"{photos}, all used for training)",)
    assert f"warning: {summary.warnings[0]}" in summary.describe()
    assert f"  {photos}/cat/broken.jpg: not a decodable image" in summary.describe()
    assert list(csv.reader(open(out / "bad_rows.csv")))[0] == ["path", "reason"]  # no CSV line numbers
    assert [row[0] for row in csv.reader(open(out / "bad_rows.csv"))][1:] == [f"{photos}/cat/broken.jpg"]

    evaluation = tmp_path / "eval"  # an evaluation folder without one of the classes
    (evaluation / "cat").mkdir(parents=True)
    (photos / "cat" / "0.jpg").rename(evaluation / "cat" / "0.jpg")
    (photos / "cat" / "broken.jpg").unlink()
    (photos / "zebra" / "1.jpg").write_bytes(jpeg())
    checked = prepare(PrepareConfig(train_dir=str(photos), eval_dir=str(evaluation), dry_run=True), verbose=False)
    assert checked.warnings == (f"3 class(es) with no evaluation image, so their accuracy is not measured: "
                                f"'airplane', 'ship', 'zebra' (not in {evaluation})",)


def test_class_folders_spelt_alike_are_named_by_folder_not_csv_line(small):
    tmp_path, _, _ = small
    photos = tmp_path / "img"
    (photos / "Cat").mkdir()
    (photos / "cat" / "0.jpg").rename(photos / "Cat" / "0.jpg")
    with pytest.raises(ValueError) as err:
        prepare(PrepareConfig(train_dir=str(photos), eval_dir=str(photos), dry_run=True), verbose=False)
    assert f"'Cat': 1 image(s), close to 'cat' (2 images): {photos}/Cat/0.jpg" in str(err.value)
    assert ":0" not in str(err.value)


def test_the_split_is_listed_file_by_file_in_shard_order(small):
    tmp_path, train_csv, eval_csv = small
    photos = tmp_path / "img"
    out = tmp_path / "out"
    prepare(PrepareConfig(train_dir=str(photos), eval_fraction=0.34, output_dir=str(out)), verbose=False)
    listed = {name: list(csv.reader(open(out / name))) for name in ("train_files.csv", "eval_files.csv")}
    for name, prefix in (("train_files.csv", "train"), ("eval_files.csv", "validation")):
        header, *rows = listed[name]
        assert header == ["path", "label"]
        stored = read_records(str(out / f"{prefix}-*"))
        assert rows == [[os.path.join(str(photos), r["image/filename"].decode()), r["image/class/text"].decode()]
                        for r in stored]
    everything = sorted(path for name in listed for path, _ in listed[name][1:])
    assert everything == sorted(str(p) for p in photos.glob("*/*.jpg"))  # each photo in exactly one list
    assert len(listed["eval_files.csv"]) == 1 + 3

    again = tmp_path / "again"  # a list is a CSV that `amoeba prepare --train_csv` reads back
    summary = prepare(PrepareConfig(str(out / "train_files.csv"), str(out / "eval_files.csv"), str(again)),
                      verbose=False)
    assert (summary.num_train_images, summary.num_eval_images) == (6, 3)
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["split_files"] == {"train": "train_files.csv", "validation": "eval_files.csv"}

    csv_out = tmp_path / "from_csv"  # CSV mode: the paths as read, absolute
    prepare(PrepareConfig(train_csv, eval_csv, str(csv_out)), verbose=False)
    rows = list(csv.reader(open(csv_out / "eval_files.csv")))[1:]
    assert rows == [[str(tmp_path / f"img/{label}/2.jpg"), label] for label in ("cat", "airplane", "ship")]


@pytest.mark.integration  # a fresh process importing TensorFlow
def test_bad_jpegs_are_reported_in_our_words_without_tensorflows_or_libjpegs_lines(small):
    """A fresh `amoeba prepare`, as a user runs it: the C++ lines about a truncated or corrupt JPEG
    (`E0000 ... jpeg_mem.cc:331] Premature end of JPEG data`, libjpeg's `Improper call to JPEG
    library`, `Bogus Huffman table definition`) do not reach the terminal; our lines naming each
    file do, and nothing else."""
    tmp_path, _, _ = small
    photos = tmp_path / "img"
    data = (photos / "cat" / "0.jpg").read_bytes()
    for name, size in (("half.jpg", len(data) // 2), ("tail.jpg", len(data) - 10)):  # each of libjpeg's two messages
        (photos / "cat" / name).write_bytes(data[:size])
    table = data.index(b"\xff\xc4")  # a Huffman table claiming more codes than 16 bits allow
    (photos / "cat" / "bogus.jpg").write_bytes(data[:table + 5] + b"\xff" * 16 + data[table + 21:])
    result = run_amoeba("prepare", f"--train_dir={photos}", "--eval_fraction=0.34", "--dry_run", check=False,
                        timeout=300)  # TF_CPP_MIN_LOG_LEVEL=2, as the CLI sets it for a user
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "amoeba prepare: 3 bad row(s); no shard was written (--skip_bad_rows leaves them out and lists them in "
        "bad_rows.csv):",
        f"  {photos}/cat/bogus.jpg: not a decodable image (jpeg::Uncompress failed. Invalid JPEG data or crop window.)",
        f"  {photos}/cat/half.jpg: truncated JPEG (no end-of-image marker)",
        f"  {photos}/cat/tail.jpg: truncated JPEG (no end-of-image marker)"]
    assert result.stdout.splitlines() == ["checking 12 images", "  12/12 rows (100%)"]
