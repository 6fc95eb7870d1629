"""amoeba report DIR [DIR ...] [--output=FILE]: one self-contained report.html of search and promote
dirs (figures inline, no network needed to view it), and the same tables printed here.

DIR: an `amoeba search` output dir or an `amoeba promote` output dir; give several to put runs side
by side (e.g. a regularized-evolution and a random search, and the promote of the first).
"""

from __future__ import annotations

SUMMARY = "one self-contained report.html of searches and promotions"  # for `amoeba --help`

import os

from absl import app, flags

FLAGS = flags.FlagValues()
flags.DEFINE_string("output", None, "Where to write the report (default: DIR/report.html of the first DIR).",
                    flag_values=FLAGS)


def main(args: list[str]) -> None:
    if not args:
        raise app.UsageError("report needs at least one search or promote dir")
    from experiments.report.driver import build_report, load_run
    from core.storage import write_text

    try:
        runs = [load_run(folder) for folder in args]
    except (FileNotFoundError, ValueError) as err:
        raise app.UsageError(str(err)) from None
    page, text = build_report(runs)
    output = FLAGS.output or os.path.join(args[0], "report.html")
    write_text(output, page)
    print(text)
    print(f"\nwrote {output}")
