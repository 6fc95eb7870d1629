"""The `amoeba` command: `amoeba SUBCOMMAND [--flags] [args]`, absl flags, `--flagfile` supported.

Subcommands: search, show. This module parses and dispatches only.
"""

from __future__ import annotations

import json
import os
import sys

from absl import app, flags

from trainer.proxy import ProxyConfig

FLAGS = flags.FLAGS
_PROXY = ProxyConfig()  # flag defaults come from the config objects, not a second copy

# --- search -------------------------------------------------------------------------------------
flags.DEFINE_string("output_dir", None, "Folder for the journal and results; rerun to resume.")
flags.DEFINE_enum("algorithm", "regularized_evolution", ["regularized_evolution", "random"],
                  "Search algorithm.")
flags.DEFINE_string("dataset", _PROXY.dataset, "Proxy dataset (built-in: digits).")
flags.DEFINE_integer("max_trials", 30, "Total number of trials of the search.")
flags.DEFINE_integer("population_size", 10, "P: population size of regularized evolution.")
flags.DEFINE_integer("sample_size", 3, "S: tournament sample size.")
flags.DEFINE_integer("max_concurrent", 2, "Trials trained at the same time.")
flags.DEFINE_integer("epochs", _PROXY.epochs, "Proxy training epochs per candidate.")
flags.DEFINE_integer("num_cells", _PROXY.num_cells, "N: normal cells per stack in the proxy network.")
flags.DEFINE_integer("filters", _PROXY.filters, "F: filters of the first stack in the proxy network.")
flags.DEFINE_integer("batch_size", _PROXY.batch_size, "Proxy training batch size.")
flags.DEFINE_float("learning_rate", _PROXY.learning_rate, "Proxy peak learning rate (SGD, cosine decay).")
flags.DEFINE_integer("num_blocks", 5, "B: blocks per cell.")
flags.DEFINE_integer("seed", 0, "Seed of the search and of candidate training.")
flags.DEFINE_float("trial_timeout_s", 900.0, "A candidate still training after this fails (0: no limit).")
flags.DEFINE_float("cpus_per_trial", 0.0, "CPUs per trial (0: CPUs / max_concurrent).")
flags.DEFINE_string("ray_address", None, "Address of an existing Ray cluster (default: local).")


def _search(args: list[str]) -> None:
    from experiments.search import SearchConfig, run_search, summary

    if args:
        raise app.UsageError(f"search takes no positional arguments, got {args}")
    if not FLAGS.output_dir:
        raise app.UsageError("search needs --output_dir")
    try:
        config = SearchConfig(
            output_dir=FLAGS.output_dir,
            algorithm=FLAGS.algorithm,
            max_trials=FLAGS.max_trials,
            population_size=FLAGS.population_size,
            sample_size=FLAGS.sample_size,
            max_concurrent=FLAGS.max_concurrent,
            seed=FLAGS.seed,
            num_blocks=FLAGS.num_blocks,
            cpus_per_trial=FLAGS.cpus_per_trial,
            ray_address=FLAGS.ray_address,
            proxy=ProxyConfig(
                dataset=FLAGS.dataset,
                epochs=FLAGS.epochs,
                num_cells=FLAGS.num_cells,
                filters=FLAGS.filters,
                batch_size=FLAGS.batch_size,
                learning_rate=FLAGS.learning_rate,
                seed=FLAGS.seed,
                timeout_s=FLAGS.trial_timeout_s,
            ),
        )
        algorithm = run_search(config)
    except ValueError as err:  # a config error: fail at once, before any trial
        raise app.UsageError(str(err)) from None
    print(summary(algorithm, config.output_dir))


def load_genotype(text: str):
    """A reference name, a JSON string, or a path to a JSON file (a genotype, or a best_genotype.json)."""
    from searchspace import NasNetGenotype
    from searchspace.references import REFERENCES

    if text in REFERENCES:
        return REFERENCES[text]
    if os.path.exists(text):
        with open(text, encoding="utf-8") as f:
            source, raw = text, f.read()
    else:
        source, raw = "argument", text
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{source}: neither a reference name ({', '.join(sorted(REFERENCES))}), "
            f"nor a JSON file, nor JSON ({err})"
        ) from None
    if isinstance(data, dict) and "genotype" in data:
        data = data["genotype"]
    return NasNetGenotype.from_json(data)


def _show(args: list[str]) -> None:
    if len(args) != 1:
        raise app.UsageError("usage: amoeba show NAME_OR_JSON")
    try:
        genotype = load_genotype(args[0])
    except ValueError as err:
        raise app.UsageError(str(err)) from None
    print(genotype.describe())
    print(f"key: {genotype.key()}")


COMMANDS = {"search": _search, "show": _show}


def _main(argv: list[str]) -> None:
    command, args = argv[1], argv[2:]
    COMMANDS[command](args)


def run() -> None:
    """Console-script entry point."""
    argv = sys.argv
    if len(argv) < 2 or argv[1] not in COMMANDS:
        print(f"usage: amoeba {{{','.join(COMMANDS)}}} [--flags] [args]; amoeba SUBCOMMAND --helpfull",
              file=sys.stderr)
        sys.exit(2)
    app.run(_main, argv=argv)
