"""amoeba results DIR [--top=10] [--format=table|csv|json] [--at_target=ACCURACY]: a search's
results, also while it runs.

Reads the search's own files (journal.jsonl, replayed read-only, and search_config.json); starts
no Ray and changes nothing in DIR.
"""

from __future__ import annotations

SUMMARY = "a search's results, also while it runs"  # for `amoeba --help`

import json
import os
from typing import Any

from absl import app, flags

FLAGS = flags.FlagValues()
F = {"flag_values": FLAGS}
flags.DEFINE_integer("top", 10, "Show the best this many trials by the objective (0: every trial, in id order).",
                     lower_bound=0, **F)
flags.DEFINE_enum("format", "table", ["table", "csv", "json"], "Output format.", **F)
flags.DEFINE_bool("front", False, "Show the trials on the front of the search's goals instead (a Pareto "
                  "search: accuracy against its cost), cheapest first.", **F)
flags.DEFINE_float("at_target", None, "A --target_accuracy search's trials scored again at this lower accuracy from "
                   "each one's evaluations (target_curve), without training, best first.", **F)


def main(args: list[str]) -> None:
    from evolution import JournalError, resume
    from evolution.journal import journal_in_use, last_holder
    from experiments.search.progress import journal_pace, status_line
    from experiments.layout import CONFIG, JOURNAL
    from experiments.search.results import as_text, front_trials, results_table, shown_columns, top_trials
    from core.storage import read_json

    if len(args) != 1:
        raise app.UsageError(f"results takes one search dir, got {args or 'none'}")
    out = args[0]
    journal = os.path.join(out, JOURNAL)
    if not os.path.exists(journal):
        raise app.UsageError(f"{out}: no {JOURNAL}: not a search dir (amoeba search --output_dir=...)")
    try:
        algorithm = resume(journal, read_only=True)
    except JournalError as err:
        raise app.UsageError(str(err)) from None
    table = results_table(algorithm)
    if FLAGS.at_target is not None:
        table = _at_target(table, algorithm, out)
    elif FLAGS.front:
        table = front_trials(table, algorithm)
    elif FLAGS.top:
        table = top_trials(table, algorithm, FLAGS.top)
    if FLAGS.format == "csv":
        print(table.to_csv(index=False), end="")
    elif FLAGS.format == "json":
        print(json.dumps(json.loads(table.to_json(orient="records")), indent=1))
    else:
        config_path = os.path.join(out, CONFIG)
        max_trials = read_json(config_path)["max_trials"] if os.path.exists(config_path) else len(algorithm.trials)
        stopped = not journal_in_use(journal)  # nothing holds the lock: no driver runs
        run_started = last_holder(journal).get("time")
        print(f"{out}: {algorithm.name}, {status_line(algorithm, max_trials, stopped)}; "
              f"{journal_pace(algorithm, max_trials, run_started, stopped)}")
        if FLAGS.at_target is not None:
            print(f"scored again at {FLAGS.at_target:g} from each trial's evaluations, best first:")
        print(as_text(table[shown_columns(algorithm, table, status=True)]) if len(table) else
              "no successful trial yet" if algorithm.outcomes else "no trial finished yet")


def _at_target(table: Any, algorithm: Any, out: str) -> Any:
    """`table` scored again at --at_target (experiments/search/results.py at_target), its top --top rows."""
    from experiments.search.results import at_target, searched_target

    if FLAGS.front:
        raise app.UsageError("--at_target ranks every trial by its time to a target; --front is a Pareto "
                             "search's: give one")
    try:
        table = at_target(table, algorithm, searched_target(out), FLAGS.at_target)
    except ValueError as err:
        raise app.UsageError(f"{out}: {err}") from None
    return table.head(FLAGS.top) if FLAGS.top else table
