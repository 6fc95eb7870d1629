"""amoeba search --output_dir=DIR [flags]: a search through Ray Tune; rerun to resume."""

from __future__ import annotations

from absl import app, flags

from experiments.search import SearchConfig, open_search, run_search, summary
from trainer.proxy import ProxyConfig

FLAGS = flags.FlagValues()
_PROXY = ProxyConfig()  # flag defaults come from the config objects, not a second copy
_SEARCH = SearchConfig(output_dir="")

flags.DEFINE_string("output_dir", None, "Folder for the journal and results; rerun to resume.", flag_values=FLAGS)
flags.DEFINE_enum("algorithm", _SEARCH.algorithm, ["regularized_evolution", "random"], "Search algorithm.",
                  flag_values=FLAGS)
flags.DEFINE_string("dataset", _PROXY.dataset, "Proxy dataset (built-in: digits).", flag_values=FLAGS)
flags.DEFINE_integer("max_trials", _SEARCH.max_trials, "Total number of trials of the search.", flag_values=FLAGS)
flags.DEFINE_integer("population_size", _SEARCH.population_size, "P: population size.", flag_values=FLAGS)
flags.DEFINE_integer("sample_size", _SEARCH.sample_size, "S: tournament sample size.", flag_values=FLAGS)
flags.DEFINE_integer("max_concurrent", _SEARCH.max_concurrent, "Trials trained at the same time.", flag_values=FLAGS)
flags.DEFINE_integer("epochs", _PROXY.epochs, "Proxy training epochs per candidate.", flag_values=FLAGS)
flags.DEFINE_integer("num_cells", _PROXY.num_cells, "N: normal cells per stack of the proxy network.",
                     flag_values=FLAGS)
flags.DEFINE_integer("filters", _PROXY.filters, "F: filters of the first stack of the proxy network.",
                     flag_values=FLAGS)
flags.DEFINE_integer("batch_size", _PROXY.batch_size, "Proxy training batch size.", flag_values=FLAGS)
flags.DEFINE_float("learning_rate", _PROXY.learning_rate, "Proxy peak learning rate (SGD, cosine decay).",
                   flag_values=FLAGS)
flags.DEFINE_integer("num_blocks", _SEARCH.num_blocks, "B: blocks per cell.", flag_values=FLAGS)
flags.DEFINE_integer("seed", _SEARCH.seed, "Seed of the search and of candidate training.", flag_values=FLAGS)
flags.DEFINE_float("trial_timeout_s", _PROXY.timeout_s, "A candidate still training after this fails (0: no limit).",
                   flag_values=FLAGS)
flags.DEFINE_float("cpus_per_trial", _SEARCH.cpus_per_trial, "CPUs per trial (0: CPUs / max_concurrent).",
                   flag_values=FLAGS)
flags.DEFINE_string("ray_address", None, "Address of an existing Ray cluster (default: local).", flag_values=FLAGS)
flags.DEFINE_string("upload_to", None, "gs://BUCKET/PATH: keep a copy of the journal and results there "
                    "(google-cloud-storage; the output dir stays the state).", flag_values=FLAGS)


def main(args: list[str]) -> None:
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
            upload_to=FLAGS.upload_to,
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
        algorithm = open_search(config)
    except ValueError as err:  # a config error: fail at once, before any trial
        raise app.UsageError(str(err)) from None
    run_search(config, algorithm)
    print(summary(algorithm, config.output_dir))
