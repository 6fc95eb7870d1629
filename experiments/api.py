"""amoeba-nas from Python: a search over your own space with your own training function.

    from ray import tune
    from searchspace import ChoiceSpace
    from experiments import api

    def train(config):  # a Ray Tune function trainable
        depth = config["genotype"]["depth"]
        tune.report({"val_accuracy": ...})

    results, best = api.search(train, ChoiceSpace({"depth": [2, 4, 8]}), output_dir="runs/mine",
                               max_trials=20, population_size=5, sample_size=2)

`search` runs the same driver as `amoeba search` (the journal, resume by running it again, one
driver per output dir, the circuit breaker, progress lines, the hang watchdog, results.csv and
best_genotype.json), so `amoeba results DIR` and `amoeba report DIR` read its output dir. `export`
and `predict` are `amoeba evaluate --export_dir` and `amoeba predict`. This module orchestrates: it
must not import TensorFlow when imported (the training function runs in Ray workers); export and
predict import it when called.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import os
import sys
import time
from typing import Any, Callable, Mapping, NamedTuple, Sequence
from unittest import mock

import pandas as pd

from core.export_formats import check_runtimes
from evolution import SearchAlgorithm
from experiments.search.results import results_table
from experiments.search import ranking
from experiments.search.driver import SearchConfig, SearchInterrupted, open_search, run_search
from experiments.settings import keywords
from searchspace import SearchSpace


STRICT_METRICS = "TUNE_DISABLE_STRICT_METRIC_CHECKING"


class BestTrial(NamedTuple):
    trial_id: int
    genotype: Any
    metrics: Mapping[str, Any]


class SearchResults(NamedTuple):
    results: pd.DataFrame  # one row per trial: results.csv's columns and every metric the trials reported
    best: BestTrial | None  # None when no trial succeeded


SETTINGS = keywords(SearchConfig)  # SearchConfig's fields a Python caller gives: each a keyword of search()


def search(trainable: Callable[[dict[str, Any]], Any], space: SearchSpace, *, trial_timeout_s: float = 0.0,
           hang_grace_s: float | None = None, **settings: Any) -> SearchResults:
    """Search `space` with `trainable` through Ray Tune; run it again with the same `output_dir` to
    resume (the same settings, else a ValueError says which differ).

    The keywords are SearchConfig's settings (`SETTINGS`: output_dir, max_trials, population_size,
    sample_size, max_concurrent, seed, objective, mode, algorithm, cpus_per_trial, gpus_per_trial,
    initial, max_consecutive_failures, ...), with its defaults; `output_dir` is required.
    `trainable(config)` gets `config["genotype"]` (a genotype of `space`) and `config["trial_id"]`,
    and reports `objective` with `ray.tune.report({...})` (its last report counts), or returns a dict
    of metrics. An exception it raises, or a last report without `objective`, fails that candidate
    (the reason recorded) and the search goes on once a trial has succeeded; before that the first
    such failure stops it (the code, not the candidate, is wrong; `retry_failed=True` trains the
    failed trials again after the fix), and `max_consecutive_failures` failures in a row stop it,
    each with `experiments.search.driver.SearchHalted`; Ctrl-C (or SIGTERM) stops it within a few seconds and returns the
    results so far (trials in flight have no result; the message says so); calling `search` again
    resumes it. `trial_timeout_s` > 0 ends a trial still
    running after that long (plus `hang_grace_s`; default: the larger of 60 s and a quarter of the
    limit) as a timeout. `initial` genotypes (of `space`, or their JSON) are tried first.
    `max_concurrent` 0: as many trials at once as the CPUs (or `cpus_per_trial`/`gpus_per_trial`)
    allow. `space`'s class is registered (`register_space`) so
    that its journal resumes in this process.
    """
    from ray import tune

    from searchspace import register_space

    register_space(type(space), space.to_config()["name"])  # the journal rebuilds it by this name
    config = search_config(trainable, space, settings)
    _ship_by_value(trainable)
    found = open_search(config)
    if found.trials:  # a journal was there: say so, as `amoeba search` does
        print(f"resumed {config.output_dir}: {found.completed()} trials done, {len(found.pending())} to re-issue",
              file=sys.stderr, flush=True)
    try:
        try:
            # Ray Tune would end the whole search at a result without the objective (a per-epoch
            # report of the loss, a returned dict that forgot it); the searcher judges each trial by
            # its last result instead: without the objective, that trial failed, saying so.
            with mock.patch.dict(os.environ, {STRICT_METRICS: "1"}):
                run_search(config, found, make_trainable=lambda notes: tune.with_parameters(
                    user_trial, fn=trainable, space=space, objective=config.objective, timeout_s=trial_timeout_s,
                    grace_s=hang_grace_s, notes=notes))
        except SearchInterrupted:  # Ctrl-C or SIGTERM: the results so far, as Ray Tune's fit() returns them
            print(f"interrupted: {len(found.pending())} trials in flight stay in {config.output_dir}'s journal; call "
                  "search() again with the same output_dir to resume", file=sys.stderr, flush=True)
        return search_results(found)
    finally:
        found.close()  # the journal's lock too, however the search ended


def search_config(trainable: Any, space: SearchSpace, settings: Mapping[str, Any],
                  cls: type = SearchConfig) -> SearchConfig:
    """The SearchConfig of a search() call: its keywords, the space and the function's name. A
    keyword that is no setting is a TypeError naming it (and the nearest setting)."""
    known = keywords(cls)
    unknown = [name for name in settings if name not in known]
    if unknown:
        near = {n: difflib.get_close_matches(n, known, 1) for n in unknown}
        raise TypeError("search() got unknown settings: " + ", ".join(
            f"{n!r}" + (f" (did you mean {near[n][0]!r}?)" if near[n] else "") for n in unknown))
    if "output_dir" not in settings:
        raise TypeError("search() needs output_dir=")
    initial = tuple(g.to_json() if hasattr(g, "to_json") else g for g in settings.get("initial", ()))
    name = f"{getattr(trainable, '__module__', '?')}.{getattr(trainable, '__qualname__', repr(trainable))}"
    return cls(**{**settings, "initial": initial}, space=space.to_config(), trainable=name)


def _signature() -> inspect.Signature:
    """search()'s signature as help() and editors show it: each setting a keyword, with its default."""
    P = inspect.Parameter
    return inspect.Signature(
        [P("trainable", P.POSITIONAL_OR_KEYWORD), P("space", P.POSITIONAL_OR_KEYWORD),
         P("trial_timeout_s", P.KEYWORD_ONLY, default=0.0), P("hang_grace_s", P.KEYWORD_ONLY, default=None)]
        + [P(name, P.KEYWORD_ONLY, **({} if default is dataclasses.MISSING else {"default": default}))
           for name, default in SETTINGS.items()], return_annotation=SearchResults)


search.__signature__ = _signature()


def _ship_by_value(fn: Any) -> None:
    """A function from a module of one's own (a script's neighbour, a test file) travels to the Ray
    workers with its module's code, as Ray advises: they may not be able to import that module."""
    import ray.cloudpickle as cloudpickle

    from experiments.settings import OUR_PACKAGES

    module = sys.modules.get(getattr(fn, "__module__", ""))
    path = getattr(module, "__file__", None) or ""
    if module is not None and module.__name__ != "__main__" and path and "site-packages" not in path:
        if module.__name__.split(".")[0] not in OUR_PACKAGES:
            cloudpickle.register_pickle_by_value(module)


def search_results(algorithm: SearchAlgorithm) -> SearchResults:
    """The table of every trial and the best one, of a search run or resumed read-only."""
    best = ranking.best(algorithm)
    table = results_table(algorithm)
    extra = sorted({k for o in algorithm.outcomes.values() for k in o.metrics} - set(table.columns))
    for name in extra:  # what the user's function reported beyond our own measures
        table[name] = [algorithm.outcomes[t].metrics.get(name) if t in algorithm.outcomes else None
                       for t in table.trial_id]
    return SearchResults(table, BestTrial(best[0].trial_id, best[0].genotype, dict(best[1].metrics)) if best else None)


def user_trial(config: dict[str, Any], fn: Callable[[dict[str, Any]], Any], space: SearchSpace,
               objective: str = "val_accuracy", timeout_s: float = 0.0, grace_s: float | None = None,
               notes: Any = None) -> None:
    """Run a user's training function on one trial, in its Ray worker: the genotype rebuilt from its
    JSON, the hang watchdog armed, an exception or a silent return reported as the candidate's error."""
    from ray import tune

    from experiments.search.trial import describe_error, hang_limit, known_failure, watch_trial

    trial_id = config["trial_id"]
    known = known_failure(notes, trial_id)
    if known is not None:  # a retry of a trial the watchdog ended: report it, do not hang again
        tune.report({objective: float("nan"), "error": known})
        return
    done = watch_trial(notes, trial_id, hang_limit(timeout_s, grace_s)) if timeout_s else None
    before = _reports()
    t0 = time.perf_counter()
    try:
        returned = fn({**config, "genotype": space.genotype_from_json(config["genotype"])})
    except Exception as err:  # noqa: BLE001 - the candidate failed, not the search
        tune.report({objective: float("nan"), "error": describe_error(err),
                     "trial_seconds": time.perf_counter() - t0})
        return
    finally:
        if done is not None:
            done.set()
    if isinstance(returned, Mapping):
        tune.report({**returned, "trial_seconds": time.perf_counter() - t0})
    elif before is not None and _reports() == before:  # (unknown: trust the function)
        tune.report({objective: float("nan"), "error": "the training function returned without reporting its "
                                                        "metrics (call ray.tune.report({...}) or return a dict)"})


def _reports() -> int | None:
    """How many results this trial has reported so far (Ray Tune's session count; None if unknown)."""
    try:
        from ray.train._internal import session

        return getattr(session.get_session(), "iteration", None)
    except ImportError:  # a Ray that moved it: the check is skipped
        return None


def export(model_dir: str, export_dir: str, export_format: str | Sequence[str] = ("saved_model",),
           data: str | None = None) -> dict[str, dict]:
    """The latest checkpoint of a trained model dir (`amoeba train`'s, or one of a promote's models)
    exported as `amoeba evaluate --export_dir` does: each format of core/export_formats.py checked
    against the model on the evaluation images of `data` (default: its own); returns parity.json's
    records. ImportError naming a missing runtime with its pip line; ValueError for a file beyond
    its tolerance. TensorFlow is imported here, when called."""
    formats = (export_format,) if isinstance(export_format, str) else tuple(export_format)
    check_runtimes(formats)
    from trainer.train import load_trainer

    return load_trainer(model_dir, data).export(export_dir, formats)


def predict(export_dir: str, images: Sequence[str], top_k: int = 5,
            export_format: str = "saved_model") -> list[dict]:
    """`amoeba predict`: each image's top-k labels by the exported file of `export_format`, or the
    reason it could not be read (trainer/export.py's predict)."""
    from trainer.export import predict as run

    return run(export_dir, images, top_k, export_format)
