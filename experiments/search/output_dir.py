"""Opening a search's output dir: a new search, or the one already there resumed from its journal
when the settings agree (what differs is named), with warnings on a --max_trials that breeds no child
or stops short of the last run. No TensorFlow or Ray here.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from core.proxy_config import check_proxy
from core.storage import read_json, write_json
from evolution import JournalLock, SearchAlgorithm, resume
from evolution.algorithms import RandomSearch, as_json
from experiments.layout import CONFIG, JOURNAL
from experiments.search.search_config import SearchConfig
from experiments.settings import changed_settings

log = logging.getLogger(__name__)


def resume_differences(config: SearchConfig, algorithm: SearchAlgorithm, saved: dict[str, Any] | None) -> list[str]:
    """What differs from the search being resumed: the algorithm as its journal records it (what the
    "journal" settings built), then every compared setting against the saved search_config.json."""
    expected = config.new_algorithm().config()
    changed = [f"{k}: {algorithm.config()[k]!r} in the journal, {v!r} now"
               for k, v in expected.items() if as_json(algorithm.config()[k]) != as_json(v)]
    if algorithm.config()["race"] is None and expected["race"] is not None:  # made before it, or with it off
        changed.append("race: the search ran without the time-to-target race's stops and screen (made before "
                       "them, or with them off); resume it with --stop_margin=0 --miss_slack=-1 --screen_children=1")
    if saved is not None:
        changed += changed_settings(type(config), saved, config) + _clock_changed(config, saved)
    return changed


def _clock_changed(config: SearchConfig, saved: dict[str, Any]) -> list[str]:
    """A --target_accuracy search saved without its clock (ProxyConfig.target_clock) was made when
    seconds_to_target counted training only and a late hit scored above target_seconds: its trials
    and new ones would rank on two clocks."""
    before = saved.get("proxy") or {}
    if not (config.proxy.target_accuracy and before.get("target_accuracy") and "target_clock" not in before):
        return []
    return [f"proxy target_clock: its trials' seconds_to_target counted training only and a hit after "
            f"target_seconds scored its time; now the evaluations count ({config.proxy.target_clock}, as amoeba "
            "promote counts) and every hit ranks ahead of every miss, so its trials and new ones do not compare"]


def first_population_paid(config: SearchConfig) -> int:
    """Trials the first population costs: under --repeats=reuse an --initial network given twice is
    trained once (a reused result does not count toward max_trials)."""
    seeds = list(config.initial[:config.population_size])
    if config.repeats != "reuse" or not seeds:
        return config.population_size
    distinct = {json.dumps(seed, sort_keys=True) for seed in seeds}
    return config.population_size - len(seeds) + len(distinct)


def length_warnings(config: SearchConfig, saved: dict[str, Any] | None, done: int = 0) -> list[str]:
    """What a search of `config.max_trials` may not mean to do (a line each): breed no child at all,
    or, resumed with `done` results, stop before the length it was last run with (`saved`, its
    search_config.json)."""
    lines = []
    first = first_population_paid(config)
    if config.algorithm != RandomSearch.name and config.max_trials <= first:
        paid = "" if first == config.population_size else f" ({first} of its first population trained: --repeats=reuse)"
        lines.append(f"warning: max_trials {config.max_trials} is not above population_size "
                     f"{config.population_size}{paid}: every trial is a random (or --initial) cell and no child is "
                     "bred; give more trials or a smaller population")
    before = (saved or {}).get("max_trials")
    if isinstance(before, int) and config.max_trials < before:
        stops = (f"it already has {done} results, so no new trial is started" if done >= config.max_trials
                 else f"it stops at {config.max_trials} trials")
        lines.append(f"warning: max_trials {config.max_trials} is fewer than the {before} this search was last run "
                     f"with: {stops}")
    return lines


def open_search(config: SearchConfig) -> SearchAlgorithm:
    """A new search in `config.output_dir`, or the one already there, resumed from its journal.

    Raises JournalLocked, naming the running driver, when another driver has the search open, and
    ValueError when the settings differ from the saved search's in a way that would mix
    incomparable trials (algorithm, seed, P, S, space, proxy task), and when a data dir cannot
    feed the proxy.
    """
    if not config.trainable:
        check_proxy(config.proxy)
    journal = os.path.join(config.output_dir, JOURNAL)
    if not (os.path.exists(journal) and os.path.getsize(journal) > 0):
        config.new_algorithm()  # the algorithm's own checks (S <= P, ...) before anything is written
    os.makedirs(config.output_dir, exist_ok=True)
    config_path = os.path.join(config.output_dir, CONFIG)
    lock = JournalLock(journal)  # one driver per search, from before it reads or writes anything
    if os.path.exists(journal) and os.path.getsize(journal) > 0:
        algorithm = resume(journal, lock=lock, measure=config.size_measure())
        saved = read_json(config_path) if os.path.exists(config_path) else None
        changed = resume_differences(config, algorithm, saved)
        if changed:
            algorithm.close()
            raise ValueError(f"{config.output_dir} holds a different search ({'; '.join(changed)}); "
                             "use a new --output_dir for a different search")
        for line in length_warnings(config, saved, algorithm.completed()):
            log.warning(line)
        if config.retry_failed:
            try:
                retried = algorithm.retry_failed()
            except ValueError:
                algorithm.close()
                raise
            log.info("retrying %d failed trials: %s", len(retried), retried)
        log.info("resumed %s: %d trials done, %d to re-issue", journal, algorithm.completed(),
                 len(algorithm.pending()))
        write_json(config_path, config.to_json())
        return algorithm
    try:
        write_json(config_path, config.to_json())  # before the journal: a journal always has its config
    except BaseException:
        lock.release()
        raise
    for line in length_warnings(config, None):
        log.warning(line)
    return config.new_algorithm(journal_path=journal, journal_lock=lock)
