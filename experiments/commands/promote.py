"""amoeba promote --search_dir=DIR --top_k=3 --baselines=resnet20 --data=DIR --output_dir=DIR [flags]:
retrain a search's best cells beside baselines under one recipe, and compare them.

The top-k distinct genotypes of each --search_dir (by validation accuracy; ties to fewer parameters)
and each --baselines model train on --data's training split with the recipe flags (the same as
`amoeba train`'s; a flagfile such as experiments/configs/promote_cifar10_cpu.cfg sets them), each
as a Ray trial (--cpus/--gpus/--tpus_per_trial as in search), and are evaluated on its evaluation
split, which a search never reads. --match_params=resnet20 (or a number) sizes each cell's filters
to within 10% of that many parameters; with --baselines and neither --match_params nor --filters,
the cells are sized to the first baseline (a comparison is fair at equal size). Rerun the same
command to resume: finished models are not retrained, the others resume from their checkpoints.
Writes comparison.csv and comparison.json.
"""

from __future__ import annotations

SUMMARY = "train the best searched cells and baselines under one recipe and compare them"  # for `amoeba --help`

import os

from absl import app, flags

from experiments.promote import PromoteConfig, comparison_text, default_match_params, run_promote
from experiments.recipe_flags import define_recipe_flags, recipe_from_flags
from experiments.search import ClusterTooSmall, SearchConfig

FLAGS = flags.FlagValues()
USES_TENSORFLOW = True
_SEARCH = SearchConfig(output_dir="")
F = {"flag_values": FLAGS}
flags.DEFINE_list("search_dir", [], "Output dirs of `amoeba search` to promote cells from.", **F)
flags.DEFINE_integer("top_k", 3, "Distinct genotypes promoted from each search.", **F)
flags.DEFINE_list("baselines", [], "Named models trained beside them (trainer/models.py's table, e.g. "
                  "resnet20,resnet56,amoebanet_d).", **F)
flags.DEFINE_string("data", None, "A dir made by `amoeba prepare` (local or gs://).", **F)
flags.DEFINE_string("output_dir", None, "Folder for the models, the plan and the comparison; rerun to resume.",
                    **F)
flags.DEFINE_string("match_params", None, "A model name or a parameter count: each cell's --filters is set so "
                    "its parameters are within 10% of it (default with --baselines and no --filters: the first "
                    "baseline).", **F)
flags.DEFINE_float("target_top1", 0.0, "Time to this top-1 accuracy (DAWNBench: the first evaluation at or over "
                   "it; 0: not measured).", **F)
flags.DEFINE_float("target_top5", 0.0, "Time to this top-5 accuracy (0: not measured).", **F)
flags.DEFINE_float("cost_per_hour", 0.0, "Price of one trial's resources per hour: the cost to the targets "
                   "(DAWNBench's cost; 0: not shown).", **F)
flags.DEFINE_float("cpus_per_trial", _SEARCH.cpus_per_trial, "CPUs per model (0: the cluster's CPUs shared out "
                   "among the concurrent models).", **F)
flags.DEFINE_float("gpus_per_trial", _SEARCH.gpus_per_trial, "GPUs per model; a fraction shares a GPU.", **F)
flags.DEFINE_integer("tpus_per_trial", _SEARCH.tpus_per_trial, "TPU chips per model (Ray's TPU resource; "
                     "trains under a TPUStrategy on them).", **F)
flags.DEFINE_integer("max_concurrent", _SEARCH.max_concurrent, "Models trained at the same time (0: as many as the "
                     "resources allow).", **F)
flags.DEFINE_integer("max_failures", _SEARCH.max_failures, "Retries of a model whose worker died; each resumes "
                     "from its checkpoint.", **F)
flags.DEFINE_string("ray_address", None, "Join a running Ray cluster: auto or HOST:PORT (default: a private one "
                    "on 127.0.0.1).", **F)
define_recipe_flags(FLAGS)


def main(args: list[str]) -> None:
    if args:
        raise app.UsageError(f"promote takes no positional arguments, got {args}")
    for name in ("data", "output_dir"):
        if not FLAGS[name].value:
            raise app.UsageError(f"promote needs --{name}")
    data = FLAGS.data if FLAGS.data.startswith("gs://") else os.path.abspath(FLAGS.data)
    match_params = FLAGS.match_params
    if not match_params:
        match_params, note = default_match_params(FLAGS.output_dir, tuple(FLAGS.baselines), bool(FLAGS.search_dir),
                                                  FLAGS["filters"].present)
        if note:
            print(note, flush=True)
    try:
        config = PromoteConfig(
            output_dir=FLAGS.output_dir, data=data, recipe=recipe_from_flags(FLAGS, "promote"),
            search_dirs=tuple(os.path.abspath(d) for d in FLAGS.search_dir), top_k=FLAGS.top_k, baselines=tuple(FLAGS.baselines),
            match_params=match_params, target_top1=FLAGS.target_top1, target_top5=FLAGS.target_top5,
            cost_per_hour=FLAGS.cost_per_hour, cpus_per_trial=FLAGS.cpus_per_trial,
            gpus_per_trial=FLAGS.gpus_per_trial, tpus_per_trial=FLAGS.tpus_per_trial,
            max_concurrent=FLAGS.max_concurrent, max_failures=FLAGS.max_failures, ray_address=FLAGS.ray_address)
        table = run_promote(config)
    except (ValueError, FileNotFoundError, ClusterTooSmall) as err:
        raise app.UsageError(str(err)) from None
    print(comparison_text(table))
    print(f"wrote {os.path.join(FLAGS.output_dir, 'comparison.csv')} and comparison.json")
    failed = table[table.status != "ok"]
    if len(failed):
        raise app.UsageError(f"{len(failed)} of {len(table)} models did not finish ("
                             f"{', '.join(f'{n}: {e or s}' for n, s, e in zip(failed.name, failed.status, failed.error))}"
                             "); rerun the same command to resume them")
