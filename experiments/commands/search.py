"""amoeba search --output_dir=DIR [flags]: a search through Ray Tune; rerun to resume."""

from __future__ import annotations

SUMMARY = "search cells by regularized evolution through Ray Tune; rerun to resume"  # for `amoeba --help`

import os

from absl import app, flags

from evolution import ALGORITHMS, MEASURES, JournalLocked
from experiments.commands import whole_numbers
from experiments.search import ClusterTooSmall, SearchConfig, SearchHalted, open_search, run_search, summary
from core.storage import is_gcs
from core.proxy_config import DATA_DIR_DATASET, PRECISIONS, PROXY_DATASETS, ProxyConfig

FLAGS = flags.FlagValues()
_PROXY = ProxyConfig()  # flag defaults come from the config objects, not a second copy
_SEARCH = SearchConfig(output_dir="")

flags.DEFINE_string("output_dir", None, "Folder for the journal and results; rerun to resume.", flag_values=FLAGS)
flags.DEFINE_enum("algorithm", _SEARCH.algorithm, sorted(ALGORITHMS), "Search algorithm.",
                  flag_values=FLAGS)
flags.DEFINE_string("data", None, "A dir made by `amoeba prepare` to search on (its training split only; "
                    "the evaluation split is never read).", flag_values=FLAGS)
flags.DEFINE_enum("dataset", None, sorted(PROXY_DATASETS), f"Proxy dataset (default: {_PROXY.dataset}, or "
                  f"{DATA_DIR_DATASET} with --data).", flag_values=FLAGS)
flags.DEFINE_integer("image_size", _PROXY.image_size, "Image size candidates see; images are resized "
                     "(0: the dataset's own: " + ", ".join(f"{k} {v.image_size}" for k, v in PROXY_DATASETS.items())
                     + ").", flag_values=FLAGS)
flags.DEFINE_integer("validation_images", _PROXY.validation_images, "Images held out of the training split "
                     "(stratified, fixed seed) to score candidates (0: " + ", ".join(
                         f"{k} {v.validation_fraction:.0%}" for k, v in PROXY_DATASETS.items()) + ").",
                     flag_values=FLAGS)
flags.DEFINE_integer("train_images", _PROXY.train_images, "Cap on the training images a candidate trains on "
                     "(0: all that are not held out).", flag_values=FLAGS)
flags.DEFINE_integer("max_trials", _SEARCH.max_trials, "Total number of trials of the search.", flag_values=FLAGS)
flags.DEFINE_integer("population_size", _SEARCH.population_size, "P: population size.", flag_values=FLAGS)
flags.DEFINE_integer("sample_size", _SEARCH.sample_size, "S: tournament sample size.", flag_values=FLAGS)
flags.DEFINE_integer("max_concurrent", _SEARCH.max_concurrent, "Trials trained at the same time (0: as many as "
                     "the cluster's CPUs, GPUs and TPUs allow for the per-trial amounts).", flag_values=FLAGS)
flags.DEFINE_integer("epochs", _PROXY.epochs, "Proxy training epochs per candidate.", flag_values=FLAGS)
flags.DEFINE_list("rungs", list(map(str, _SEARCH.rungs)), "Multi-fidelity: epochs at which each candidate "
                  "reports and ASHA continues or stops it (e.g. 1,3,9; the last replaces --epochs).",
                  flag_values=FLAGS)
flags.DEFINE_float("reduction_factor", _SEARCH.reduction_factor, "With --rungs, ASHA's eta: the top 1/eta at "
                   "a rung goes on (evolution/rungs.py).", flag_values=FLAGS)
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
flags.DEFINE_float("cpus_per_trial", _SEARCH.cpus_per_trial, "CPUs per trial (0: the cluster's CPUs shared out "
                   "among the concurrent trials).", flag_values=FLAGS)
flags.DEFINE_float("gpus_per_trial", _SEARCH.gpus_per_trial, "GPUs per trial; a fraction shares a GPU (0.5: two "
                   "trials per GPU, each taking only the memory it uses).", flag_values=FLAGS)
flags.DEFINE_integer("tpus_per_trial", _SEARCH.tpus_per_trial, "TPU chips per trial (Ray's TPU resource).",
                     flag_values=FLAGS)
flags.DEFINE_enum("precision", _PROXY.precision, list(PRECISIONS), "Compute precision of the proxy training: "
                  "bfloat16 and mixed_float16 compute in 16 bits and keep float32 weights.", flag_values=FLAGS)
flags.DEFINE_integer("max_params", _SEARCH.max_params, "A child with more trainable parameters is rejected "
                     "before it is trained and another proposed (0: no limit).", flag_values=FLAGS)
flags.DEFINE_integer("max_multiply_adds", _SEARCH.max_multiply_adds, "A child with more multiply-adds per image is "
                     "rejected before it is trained (0: no limit).", flag_values=FLAGS)
flags.DEFINE_float("max_latency_ms", _SEARCH.max_latency_ms, "A candidate slower at batch 1 on its trial's device "
                   "is measured, recorded infeasible and not trained (0: no limit).", flag_values=FLAGS)
flags.DEFINE_float("latency_target_ms", _SEARCH.latency_target_ms, "> 0: score candidates by MnasNet's reward, "
                   "val_accuracy x (cost / target)^latency_weight, the cost being --cost_metric.", flag_values=FLAGS)
flags.DEFINE_float("latency_weight", _SEARCH.latency_weight, "The reward's exponent w (MnasNet: -0.07).",
                   flag_values=FLAGS)
flags.DEFINE_enum("cost_metric", _SEARCH.cost_metric, sorted(MEASURES), "The reward's cost measure.",
                  flag_values=FLAGS)
flags.DEFINE_list("objectives", list(_SEARCH.objectives), "With --algorithm=pareto_evolution: MEASURE:max|min "
                  "goals (default val_accuracy:max,latency_ms:min); measures: " + ", ".join(sorted(MEASURES)) + ".",
                  flag_values=FLAGS)
flags.DEFINE_float("train_seconds", _PROXY.train_seconds, "> 0: train each candidate this many seconds of its own "
                   "steady training steps (the step count fixed from its first steps) instead of --epochs.",
                   flag_values=FLAGS)
flags.DEFINE_integer("max_failures", _SEARCH.max_failures, "Retries of a trial whose worker died (a lost node, "
                     "a crash); a failed candidate is not retried.", flag_values=FLAGS)
flags.DEFINE_integer("max_consecutive_failures", _SEARCH.max_consecutive_failures, "Stop the search after this "
                     "many failed candidates in a row, showing the last error (0: never).", flag_values=FLAGS)
flags.DEFINE_bool("reuse_workers", _SEARCH.reuse_workers, "Keep each trial worker process warm for the next "
                  "trial (Ray Tune actor reuse); --noreuse_workers starts a fresh process per trial.",
                  flag_values=FLAGS)
flags.DEFINE_string("ray_address", None, "Join a running Ray cluster: auto or HOST:PORT (default: start a "
                    "private one on this machine, on 127.0.0.1 only).", flag_values=FLAGS)
flags.DEFINE_list("initial", [], "Cells that open the first population, in order, before random ones: reference names "
                  "(amoebanet_a, amoebanet_d, nasnet_a) or JSON files (a genotype, or a search's best_genotype.json).",
                  flag_values=FLAGS)
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
            gpus_per_trial=FLAGS.gpus_per_trial,
            tpus_per_trial=FLAGS.tpus_per_trial,
            max_failures=FLAGS.max_failures,
            max_consecutive_failures=FLAGS.max_consecutive_failures,
            reuse_workers=FLAGS.reuse_workers,
            ray_address=FLAGS.ray_address,
            upload_to=FLAGS.upload_to,
            rungs=tuple(whole_numbers("rungs", FLAGS.rungs)),
            reduction_factor=FLAGS.reduction_factor,
            objectives=tuple(FLAGS.objectives),
            max_params=FLAGS.max_params,
            max_multiply_adds=FLAGS.max_multiply_adds,
            max_latency_ms=FLAGS.max_latency_ms,
            latency_target_ms=FLAGS.latency_target_ms,
            latency_weight=FLAGS.latency_weight,
            cost_metric=FLAGS.cost_metric,
            initial=tuple(_initial(item) for item in FLAGS.initial),
            proxy=ProxyConfig(
                dataset=FLAGS.dataset or (DATA_DIR_DATASET if FLAGS.data else _PROXY.dataset),
                data=FLAGS.data if not FLAGS.data or is_gcs(FLAGS.data) else os.path.abspath(FLAGS.data),
                image_size=FLAGS.image_size,
                validation_images=FLAGS.validation_images,
                train_images=FLAGS.train_images,
                epochs=FLAGS.epochs,
                num_cells=FLAGS.num_cells,
                filters=FLAGS.filters,
                batch_size=FLAGS.batch_size,
                learning_rate=FLAGS.learning_rate,
                seed=FLAGS.seed,
                timeout_s=FLAGS.trial_timeout_s,
                train_seconds=FLAGS.train_seconds,
                precision=FLAGS.precision,
            ),
        )
        algorithm = open_search(config)
    except (ValueError, FileNotFoundError) as err:  # a config error: fail at once, before any trial
        raise app.UsageError(str(err)) from None
    except JournalLocked as err:
        raise app.UsageError(f"another driver is running this search: {err}") from None
    try:
        run_search(config, algorithm)
    except SearchHalted as err:
        print(summary(algorithm, config.output_dir))
        raise app.UsageError(str(err)) from None
    except ClusterTooSmall as err:  # a config error found once Ray is up: no trial ran
        raise app.UsageError(str(err)) from None
    print(summary(algorithm, config.output_dir))


def _initial(item: str) -> dict:
    """A --initial item as genotype JSON; the error names the item."""
    from experiments.commands.show import load_genotype

    try:
        return load_genotype(item).to_json()
    except ValueError as err:
        raise ValueError(f"initial: {err}") from None

