"""amoeba search --output_dir=DIR [flags]: a search through Ray Tune; rerun to resume.

Its flags are SearchConfig's fields and the proxy's (experiments/search/search_config.py): a new setting
there is a flag here, with nothing to add to this module.
"""

from __future__ import annotations

SUMMARY = "search cells by regularized evolution through Ray Tune; rerun to resume"  # for `amoeba --help`

import os

from absl import app, flags

from evolution import JournalLocked
from experiments.layout import CONFIG
from experiments.search.driver import ClusterTooSmall, SearchConfig, SearchHalted, open_search, run_search, summary
from experiments.settings import Setting, apply_deprecated, build, define_flags, flag_settings
from core.proxy_config import DATA_DIR_DATASET, PROXY_RENAMED
from core.storage import is_gcs, read_json

FLAGS = flags.FlagValues()


def define_search_flags(values: flags.FlagValues, cls: type = SearchConfig) -> list[Setting]:
    """One flag per setting of `cls` (SearchConfig, or a subclass with more fields)."""
    return define_flags(cls, values, module_name=__name__, deprecated=PROXY_RENAMED)


SETTINGS = define_search_flags(FLAGS)


def config_from_flags(values: flags.FlagValues, settings: list[Setting], cls: type = SearchConfig) -> SearchConfig:
    """The search the flags describe. --data without --dataset searches on the dir; a local --data
    path is made absolute (trials run in other working dirs)."""
    apply_deprecated(values, PROXY_RENAMED, "search")
    fields = flag_settings(settings, values, parse={"initial": lambda items: tuple(map(_initial, items))})
    proxy = fields["proxy"]
    if proxy["data"] and not values["dataset"].present:
        proxy["dataset"] = DATA_DIR_DATASET
    if proxy["data"] and not is_gcs(proxy["data"]):
        proxy["data"] = os.path.abspath(proxy["data"])
    if sized_to_data(values):
        _size(fields, given_settings(values, settings))
    return build(cls, fields)


def sized_to_data(values: flags.FlagValues) -> bool:
    """Whether the search is sized to its data (experiments/search/sizing.py): a --data dir, neither --space
    nor --dataset given (on the command line or in a flagfile), and no search in --output_dir that
    was not (one saved before the rule resumes as it was made)."""
    if not values["data"].value or values["space"].present or values["dataset"].present:
        return False
    saved = os.path.join(values["output_dir"].value or "", CONFIG)
    return not os.path.exists(saved) or bool(read_json(saved).get("sized_to_data"))


def given_settings(values: flags.FlagValues, settings: list[Setting]) -> set[tuple[str, ...]]:
    """The field paths the command line or a flagfile set: ("max_trials",), ("proxy", "epochs")."""
    return {s.path for s in settings if values[s.flag].present}


def _size(fields: dict, given: set[tuple[str, ...]]) -> None:
    """`fields` with the settings `given` does not set taken from the rule of experiments/search/sizing.py."""
    from experiments.search import sizing

    proxy = fields["proxy"]
    sized = sizing.proxy_settings(sizing.DataFacts.read(proxy["data"]))
    proxy.update({name: value for name, value in sized.items() if ("proxy", name) not in given})
    fields.update({name: value for name, value in sizing.search_settings().items() if (name,) not in given},
                  sized_to_data=True)
    if ("initial",) not in given:  # the seed fills the first population (trained once: --repeats=reuse)
        fields["initial"] = tuple(map(_initial, (sizing.SEED,) * fields["population_size"]))


def main(args: list[str]) -> None:
    if args:
        raise app.UsageError(f"search takes no positional arguments, got {args}")
    if not FLAGS.output_dir:
        raise app.UsageError("search needs --output_dir")
    try:
        config = config_from_flags(FLAGS, SETTINGS)
        calibrated = sized_to_data(FLAGS) and not config.proxy.target_accuracy and config.evaluator == "train"
        if calibrated:
            from experiments.search.calibration import calibrate, seed_first_trial

            config = calibrate(config, given_settings(FLAGS, SETTINGS))
        algorithm = open_search(config)
        if calibrated:  # trial 0 is the calibration's run: journaled with its result, not trained again
            seed_first_trial(config, algorithm)
    except (ValueError, FileNotFoundError, ClusterTooSmall) as err:  # a config error: fail at once, before any trial
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
