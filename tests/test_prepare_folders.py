"""`amoeba prepare --train_dir`: photos in class folders, said in the words of folders and files
(paths, not CSV lines), the split's file lists, and a truncated JPEG reported in our own words."""

import csv
import json
import os
import subprocess
import sys
import threading

import pytest

from tests.conftest import amoeba as run_amoeba
from tests.test_prepare import amoeba, jpeg, read_records, small  # noqa: F401 (amoeba, small: fixtures)
from tests.conftest import QUIET_TF, REPO
from trainer.prepare import BadInputError, PrepareConfig, prepare
from trainer.prepare_images import decoder_lines_hidden
from trainer.prepare_inputs import BadRow, bad_rows_csv


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
    assert "1 bad image(s) left out, listed in bad_rows.csv" in summary.describe()
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
        "amoeba prepare: 3 bad image(s); no shard was written (--skip_bad_rows leaves them out and lists them in "
        "bad_rows.csv):",
        f"  {photos}/cat/bogus.jpg: not a decodable image (jpeg::Uncompress failed. Invalid JPEG data or crop window.)",
        f"  {photos}/cat/half.jpg: truncated JPEG (no end-of-image marker)",
        f"  {photos}/cat/tail.jpg: truncated JPEG (no end-of-image marker)"]
    assert result.stdout.splitlines() == ["checking 12 images", "  12/12 images (100%)"]


def test_bad_rows_csv_has_the_columns_of_the_inputs_given_not_of_the_rows_that_were_bad(small):
    """CSV rows keep csv,line; with no CSV given (folders only) the columns are path,reason. Whether
    a CSV was given decides, not which rows were bad, nor whether any was."""
    tmp_path, train_csv, eval_csv = small
    photos = tmp_path / "img"
    clean = tmp_path / "clean"
    prepare(PrepareConfig(train_csv, eval_csv, str(clean), skip_bad_rows=True), verbose=False)
    assert (clean / "bad_rows.csv").read_text() == "csv,line,path,reason\n"  # none bad: still the CSV columns

    (photos / "cat" / "broken.jpg").write_bytes(b"not a jpeg")
    mixed = tmp_path / "mixed"  # class folders to train, a CSV to evaluate; only a folder image is bad
    with pytest.raises(BadInputError, match="^1 bad row"):
        prepare(PrepareConfig(train_dir=str(photos), eval_csv=eval_csv, dry_run=True), verbose=False)
    prepare(PrepareConfig(train_dir=str(photos), eval_csv=eval_csv, output_dir=str(mixed), skip_bad_rows=True),
            verbose=False)
    report = list(csv.reader(open(mixed / "bad_rows.csv")))
    assert report[0] == ["csv", "line", "path", "reason"] and report[1][:3] == ["", "", f"{photos}/cat/broken.jpg"]
    bad = [BadRow(str(photos), 0, "cat/x.jpg", "empty file")]
    assert bad_rows_csv([], from_csv=False) == "path,reason\n"
    assert bad_rows_csv(bad, from_csv=False) == f"path,reason\n{photos}/cat/x.jpg,empty file\n"


@pytest.fixture
def quiet_tf(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")  # as the `amoeba` command sets it: decoder lines hidden


DECODER_LINES = (b"E0000 00:00:1700000000.1 42 jpeg_mem.cc:331] Premature end of JPEG data\n",
                 b"Corrupt JPEG data: 2 extraneous bytes before marker 0xd9\n", b"Bogus Huffman table definition\n",
                 b"Improper call to JPEG library in state 201\n", b"Premature end of JPEG file\n")


def test_decoder_lines_are_dropped_and_every_other_stderr_line_reaches_stderr(quiet_tf, capfd):
    before = os.fstat(2)
    with decoder_lines_hidden():
        with decoder_lines_hidden():  # nested: only the outer use swaps fd 2
            for line in (b"a line of ours\n", *DECODER_LINES, b"a fatal check: no end of line"):
                os.write(2, line)
        os.write(2, b"\nbetween\n")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "a line of ours\na fatal check: no end of line\nbetween\nafter\n"
    assert (os.fstat(2).st_dev, os.fstat(2).st_ino) == (before.st_dev, before.st_ino)


def test_overlapping_uses_from_two_threads_leave_stderr_as_it_was(quiet_tf, capfd):
    before = os.fstat(2)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with decoder_lines_hidden():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with decoder_lines_hidden():
            second_in.set()
            first_out.wait(10)
            os.write(2, b"from the second\n")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    os.write(2, b"after both\n")
    assert capfd.readouterr().err == "from the second\nafter both\n"
    assert (os.fstat(2).st_dev, os.fstat(2).st_ino) == (before.st_dev, before.st_ino)


@pytest.mark.integration  # a fresh process importing TensorFlow
def test_a_fatal_message_written_inside_the_block_reaches_stderr_before_the_process_dies():
    code = ("import os\nfrom trainer.prepare_images import decoder_lines_hidden\n"
            "with decoder_lines_hidden():\n"
            "    os.write(2, b'Corrupt JPEG data: premature end of data segment\\nF0000 a fatal check failed\\n')\n"
            "    os.abort()\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=QUIET_TF, cwd=REPO,
                            timeout=120)
    assert result.returncode != 0 and "F0000 a fatal check failed" in result.stderr.splitlines()
    assert "Corrupt JPEG" not in result.stderr
