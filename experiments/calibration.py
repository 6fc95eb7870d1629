"""The calibration before a search sized to its data (experiments/sizing.py) that was given no
--target_accuracy: airbench94 trained once by the search's own proxy, as a one-trial search of its
own in OUTPUT_DIR/calibration (journaled like any search: a rerun reads its result back and
trains nothing; one that failed, an error recorded as the trial's, is trained again by a rerun, as
--retry_failed would). Its validation accuracy at the end and its seconds give the search its
target, its time limits and its length; the lines printed say what the search will take and, at the
same pace, what the promote after it will (the search's budget does not cover that).

Must not train anything itself: the trial runs through experiments/search.py like every other.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Collection

from experiments import sizing
from experiments.search import SearchHalted, run_search
from experiments.search_config import SearchConfig, open_search
from core.proxy_config import plan_split

log = logging.getLogger(__name__)
# where each calibrated value goes: (field of SearchConfig, or of its proxy)
CALIBRATED = {"target_accuracy": ("proxy", "target_accuracy"), "target_seconds": ("proxy", "target_seconds"),
              "timeout_s": ("proxy", "timeout_s"), "max_trials": ("max_trials",)}


def calibration_config(config: SearchConfig) -> SearchConfig:
    """The one-trial search that trains the seed with the search's proxy, to the end of its epochs."""
    from experiments.commands.show import load_genotype

    proxy = dataclasses.replace(config.proxy, target_accuracy=0.0, target_seconds=0.0, timeout_s=0.0)  # once, whole
    return dataclasses.replace(config, output_dir=sizing.calibration_dir(config.output_dir), max_trials=1,
                               algorithm="random", initial=(load_genotype(sizing.SEED).to_json(),),
                               repeats="train", upload_to=None, objective="val_accuracy", mode="max", proxy=proxy)


def calibrate(config: SearchConfig, given: Collection[tuple[str, ...]] = ()) -> SearchConfig:
    """`config` with the calibrated target, limits and length, except those `given` (field paths:
    ("max_trials",), ("proxy", "timeout_s")); ValueError when the calibration run failed."""
    probe = calibration_config(config)
    algorithm = open_search(probe)
    _retry_failure(algorithm, probe.output_dir)
    if algorithm.completed() < 1:
        log.info("calibrating: %s trained once by the proxy (%d epochs of %d images) to size the search's target; "
                 "in %s", sizing.SEED, probe.proxy.epochs, probe.proxy.train_images, probe.output_dir)
        try:
            run_search(probe, algorithm)
        except SearchHalted as err:
            raise ValueError(f"calibration ({probe.output_dir}): {err}") from None
    else:
        algorithm.close()
    found = [o for o in algorithm.outcomes.values() if o.status == "ok"]
    if not found:
        raise ValueError(failure_message(probe.output_dir, next(iter(algorithm.outcomes.values()), None)))
    metrics = found[0].metrics
    accuracy, seconds = float(metrics["val_accuracy"]), float(metrics["trial_seconds"])
    try:
        values = sizing.calibrated(accuracy, seconds)
    except ValueError as err:
        raise ValueError(f"{err} (or delete {probe.output_dir} to calibrate again)") from None
    changes = _apply(config, values, given)
    print(calibration_line(accuracy, seconds, changes), flush=True)
    if config.proxy.data:
        facts = sizing.DataFacts.read(config.proxy.data)
        images = plan_split(probe.proxy, facts.train_images).num_train * probe.proxy.epochs  # what it trained
        print(sizing.promote_line(facts, seconds / images), flush=True)
    return changes


def _retry_failure(algorithm: Any, where: str) -> None:
    """A calibration whose trial failed before (an error, out of memory, NaN: recorded as its
    result) is trained again by this run, as --retry_failed would; not an infeasible one (over a
    limit of the search's: a rerun would find it so again) nor one with rungs."""
    outcomes = algorithm.outcomes.values()
    if algorithm.rungs is not None or any(o.status == "ok" for o in outcomes):
        return
    try:
        retried = algorithm.retry_failed()
    except BaseException:
        algorithm.close()
        raise
    if retried:
        log.info("calibration (%s): its run failed before; training it again", where)


def failure_message(where: str, failed: Any) -> str:
    """What a calibration that did not end with a result says: what failed and what to do."""
    what = f"{failed.status}: {failed.error}" if failed is not None else "no result"
    return (f"calibration ({where}): {sizing.SEED}, trained once on this data to set the search's target and length, "
            f"did not end with a result ({what}). Fix the cause and run the same command again: a rerun trains a "
            f"failed calibration again (delete {where} to start it afresh, as after changing the search's limits); "
            "or skip the calibration: give --target_accuracy and --target_seconds (the validation accuracy "
            "candidates race to and the seconds each gets to reach it)")


def _apply(config: SearchConfig, values: dict[str, Any], given: Collection[tuple[str, ...]]) -> SearchConfig:
    proxy_changes = {name: value for name, value in values.items()
                     if CALIBRATED[name][0] == "proxy" and CALIBRATED[name] not in given}
    outer = {name: value for name, value in values.items()
             if CALIBRATED[name][0] != "proxy" and CALIBRATED[name] not in given}
    return dataclasses.replace(config, proxy=dataclasses.replace(config.proxy, **proxy_changes), **outer)


def calibration_line(accuracy: float, seconds: float, config: SearchConfig) -> str:
    """What the calibration found and what the search will take at its pace (an estimate: children
    that reach the target sooner stop sooner, slower ones at target_seconds)."""
    proxy = config.proxy
    return (f"calibration: {sizing.SEED} reached {accuracy:.4f} validation accuracy in {seconds:.0f} s on this "
            f"data; candidates race to {proxy.target_accuracy:.4f} (at most {proxy.target_seconds:.0f} s each); "
            f"{config.max_trials} trials, about {config.max_trials * seconds / 60:.0f} min at that pace")
