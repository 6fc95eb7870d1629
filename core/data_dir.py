"""What to tell a user whose `--data=DIR` holds no metadata.json: the dir does not exist (and the
nearest name beside it that does), it is a folder of class folders not yet prepared (the
`amoeba prepare --train_dir` command to run), or it holds prepared dirs one level down.

Used by trainer/records.py (train, evaluate, promote) and core/proxy_config.py (search). Pure
Python: this module must not import TensorFlow; gs:// dirs get the plain message.
"""

from __future__ import annotations

import difflib
import os

METADATA_FILE = "metadata.json"
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")  # what `amoeba prepare --train_dir` reads (the one list)
MAX_ENTRIES = 1000  # entries read in a subfolder (and the folders in it) to tell a class folder of images
SHOWN = 3  # class folders or prepared dirs named in a message, at most
PLAIN_FIX = "make the data dir with `amoeba prepare` (own images) or `amoeba prepare --fake_imagenet`"


def _subdirs(path: str) -> list[str]:
    try:
        return sorted(entry.name for entry in os.scandir(path) if entry.is_dir() and not entry.name.startswith("."))
    except OSError:
        return []


def _has_images(folder: str) -> bool:
    """Whether `folder` (CLASS/IMAGE.jpg) or a folder in it (CLASS/SUB/IMAGE.jpg) holds a file named
    as an image: at most MAX_ENTRIES entries in all are read, so that `--data=$HOME` costs little."""
    budget = MAX_ENTRIES
    queue = [(folder, True)]  # (a folder, whether to look into its folders)
    for path, deeper in queue:
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.name.lower().endswith(IMAGE_EXTENSIONS) and entry.is_file():
                        return True
                    if deeper and not entry.name.startswith(".") and entry.is_dir():
                        queue.append((entry.path, False))
                    budget -= 1
                    if budget == 0:
                        return False
        except OSError:
            continue
    return False


def _missing(data_dir: str) -> str:
    parent = os.path.dirname(os.path.normpath(data_dir)) or "."
    name = os.path.basename(os.path.normpath(data_dir))
    near = difflib.get_close_matches(name, _subdirs(parent), n=1, cutoff=0.6)
    hint = f" (did you mean {os.path.join(os.path.dirname(os.path.normpath(data_dir)), near[0])}?)" if near else ""
    return f"{data_dir}: no such directory{hint}"


def no_metadata_message(data_dir: str, fix: str = PLAIN_FIX) -> str:
    """Why `data_dir` (which has no metadata.json) is not a data dir, and what to give instead;
    `fix` ends the message when nothing more particular is found."""
    if "://" in data_dir:
        return f"{data_dir}: no {METADATA_FILE}; {fix}"
    if not os.path.exists(data_dir):
        return _missing(data_dir)
    if not os.path.isdir(data_dir):
        return f"{data_dir}: not a directory; give a dir made by `amoeba prepare`"
    subdirs = _subdirs(data_dir)
    prepared = [os.path.join(data_dir, d) for d in subdirs if os.path.exists(os.path.join(data_dir, d, METADATA_FILE))]
    if prepared:
        more = f" and {len(prepared) - SHOWN} more" if len(prepared) > SHOWN else ""
        return (f"{data_dir}: no {METADATA_FILE}, but it holds a prepared data dir: "
                f"{', '.join(prepared[:SHOWN])}{more}; give that")
    classes = [d for d in subdirs if _has_images(os.path.join(data_dir, d))]
    if classes:
        shown = ", ".join(classes[:SHOWN]) + (", ..." if len(classes) > SHOWN else "")
        return (f"{data_dir}: class folders of images ({shown}), not a prepared data dir; run "
                f"`amoeba prepare --train_dir={data_dir} --eval_fraction=0.1 --output_dir=DATA` first, then give "
                f"--data=DATA")
    return f"{data_dir}: no {METADATA_FILE}; {fix}"
