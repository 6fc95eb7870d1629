"""amoeba promote --search_dir=DIR --top_k=3 --baselines=resnet20 --data=DIR --output_dir=DIR [flags]:
retrain a search's best cells beside baselines under one recipe, and compare them.

The top-k distinct genotypes of each --search_dir (as the search ranks them: experiments/search/ranking.py)
and each --baselines model train on --data's training split with the recipe flags (the same as
`amoeba train`'s; a flagfile such as experiments/configs/promote_cifar10_cpu.cfg sets them), each
as a Ray trial (--cpus/--gpus/--tpus_per_trial as in search), and are evaluated on its evaluation
split, which a search never reads. --match_params=resnet20 (or a number) sizes each cell's filters
to within 10% of that many parameters; with --baselines and neither --match_params nor --filters,
the cells are sized to the first baseline (a comparison is fair at equal size). Rerun the same
command to resume: finished models are not retrained, the others resume from their checkpoints.
Writes comparison.csv and comparison.json; with --export_dir, exports the model --export_choice
picks among each search's pick and the baselines (experiments/promote/comparison.py) on a validation split
held out of the training split (--validation_images, sized to the data by default), and says why.
"""

from __future__ import annotations

SUMMARY = "train the best searched cells and baselines under one recipe and compare them"  # for `amoeba --help`

import dataclasses
import os

from absl import app, flags

from core.export_formats import check_runtimes
from experiments.promote.comparison import comparison_text, same_net_sentences
from experiments.export_flags import exported_lines
from experiments.promote.driver import PromoteConfig, export_winner, histories, run_promote, step_seconds
from experiments.promote.promote_plan import default_match_params, open_plan, own_size_searches
from experiments.promote.seed_race import seed_race_sentences
from experiments.recipe_flags import define_recipe_flags, recipe_from_flags
from experiments.search.resources import ClusterTooSmall
from experiments.settings import build, define_flags, flag_settings

FLAGS = flags.FlagValues()
USES_TENSORFLOW = True
SETTINGS = define_flags(PromoteConfig, FLAGS, module_name=__name__)  # experiments/promote/promote_config.py's fields
define_recipe_flags(FLAGS)


def main(args: list[str]) -> None:
    if args:
        raise app.UsageError(f"promote takes no positional arguments, got {args}")
    for name in ("data", "output_dir"):
        if not FLAGS[name].value:
            raise app.UsageError(f"promote needs --{name}")
    fields = flag_settings(SETTINGS, FLAGS)
    fields["data"] = fields["data"] if fields["data"].startswith("gs://") else os.path.abspath(fields["data"])
    fields["search_dirs"] = tuple(os.path.abspath(d) for d in fields["search_dirs"])
    recipe = recipe_from_flags(FLAGS, "promote")
    try:
        if sized_searches(fields["search_dirs"]):
            _size(fields, recipe)
    except ValueError as err:
        raise app.UsageError(str(err)) from None
    if not fields["match_params"]:
        nasnet = bool(fields["search_dirs"]) and not own_size_searches(fields["search_dirs"])  # macro: own size
        fields["match_params"], note = default_match_params(FLAGS.output_dir, fields["baselines"], nasnet,
                                                            FLAGS["filters"].present)
    else:
        note = None
    try:
        size_flags = tuple(name for name in ("filters", "num_cells") if FLAGS[name].present)
        config = build(PromoteConfig, {**fields, "recipe": recipe,
                                       "size_flags": size_flags})
        if not FLAGS["validation_images"].present:  # once the settings are known to be good
            config = dataclasses.replace(config, recipe={
                **recipe, "validation_images": promote_validation_images(config.output_dir, config.data)})
        if config.export_dir:
            check_runtimes(config.export_format)  # before the training, not after it
        if note:  # once the settings are known to be good
            print(note, flush=True)
        table = run_promote(config)
    except (ValueError, FileNotFoundError, ClusterTooSmall, ImportError) as err:
        raise app.UsageError(str(err)) from None
    print(comparison_text(table))
    for sentence in same_net_sentences(table):
        print(sentence)
    seeded = seed_race_sentences(table, histories(config, open_plan(config)), step_seconds(config.output_dir))
    if seeded:  # the race at each net's own pace (--race_seeds), beside the wall clock's
        print(" ".join(seeded))
    print(f"wrote {os.path.join(FLAGS.output_dir, 'comparison.csv')} and comparison.json")
    if config.export_dir:
        try:
            name, why, checks = export_winner(config, table)
        except (ValueError, ImportError) as err:
            raise app.UsageError(str(err)) from None
        print(exported_lines(config.export_dir, checks, f"{name} ({why}) "))
    failed = table[table.status != "ok"]
    if len(failed):
        reasons = ", ".join(f"{n}: {e or s}" for n, s, e in zip(failed.name, failed.status, failed.error))
        raise app.UsageError(f"{len(failed)} of {len(table)} models did not finish ({reasons}); rerun the same "
                             "command to resume them")


def sized_searches(search_dirs: tuple[str, ...]) -> bool:
    """Whether every search of `search_dirs` was sized to its data (`amoeba search --data` without
    --space: experiments/search/sizing.py); a dir without its search_config.json is not."""
    from core import storage
    from experiments.layout import CONFIG

    paths = [os.path.join(d, CONFIG) for d in search_dirs]
    return bool(paths) and all(os.path.exists(p) and storage.read_json(p).get("sized_to_data") for p in paths)


def promote_validation_images(output_dir: str, data: str) -> int:
    """--validation_images when not given: a promote already planned keeps what its plan was made with
    (0 for a plan made before the setting, so the same command resumes it); a new one holds out as a
    sized search holds out its own (experiments/search/sizing.py's rule: a tenth, at least 20 a class but at
    most a fifth, at most 2,000; none of a single image), so the export and the race's target are
    chosen on images no model trains on, not on the evaluation split."""
    from core import storage
    from experiments.search import sizing
    from experiments.layout import PLAN

    plan = storage.join(output_dir, PLAN)
    if storage.exists(plan):
        return int((storage.read_json(plan)["settings"].get("recipe") or {}).get("validation_images", 0))
    return sizing.promote_held_out(sizing.DataFacts.read(data))


def _size(fields: dict, recipe: dict) -> None:
    """The promote settings and recipe fields not given, from experiments/search/sizing.py's rule for --data."""
    from experiments.search import sizing
    from experiments.recipe_flags import given_recipe

    settings, sized = sizing.promote_settings(sizing.DataFacts.read(fields["data"]))
    fields.update({name: value for name, value in settings.items() if not FLAGS[name].present})
    given = given_recipe(FLAGS)
    recipe.update({name: value for name, value in sized.items() if name not in given})
