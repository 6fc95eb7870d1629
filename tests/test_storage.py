"""core.storage against local files and a local gcp-storage-emulator (started here)."""

import os

import pytest

from core import storage


def test_local_writes_are_atomic_and_round_trip(tmp_path):
    path = str(tmp_path / "sub" / "meta.json")
    storage.write_json(path, {"a": 1})
    assert storage.read_json(path) == {"a": 1} and storage.exists(path)
    storage.write_text(path, "replaced\n")
    assert storage.read_text(path) == "replaced\n"
    assert os.listdir(tmp_path / "sub") == ["meta.json"]  # no temp files left behind


def test_gcs_objects_through_google_cloud_storage(gcs_emulator, tmp_path):
    base = storage.join(gcs_emulator, "runs", "x")
    path = storage.join(base, "metadata.json")
    assert path == "gs://amoeba-test/runs/x/metadata.json"
    assert not storage.exists(path)
    storage.write_json(path, {"num_label_classes": 3})
    assert storage.exists(path) and storage.read_json(path) == {"num_label_classes": 3}
    storage.write_text(path, "v2")
    assert storage.read_text(path) == "v2"

    local = tmp_path / "results"
    (local / "tune").mkdir(parents=True)
    (local / "results.csv").write_text("trial_id\n0\n")
    (local / "tune" / "error.txt").write_text("boom")
    assert storage.copy_tree_to_gcs(str(local), storage.join(gcs_emulator, "copy")) == 2
    assert storage.read_text(storage.join(gcs_emulator, "copy", "tune", "error.txt")) == "boom"


def test_bad_gcs_path_is_named():
    with pytest.raises(ValueError, match="gs://"):
        storage.split_gcs("gs://")
