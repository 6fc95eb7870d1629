"""The calibration before a search sized to its data (experiments/search/sizing.py) that was given no
--target_accuracy: airbench94 trained once by the search's own proxy, as a one-trial search of its
own in OUTPUT_DIR/calibration (journaled like any search: a rerun reads its result back and
trains nothing; one that failed, an error recorded as the trial's, is trained again by a rerun, as
--retry_failed would). It is evaluated and timed as a candidate is (ProxyConfig.calibration: every
--epochs_per_eval, on --target_clock, from its training pipeline built: TensorFlow's import, the
decoding, the build and the latency measure are not on that clock), to the end of its epochs. Its
validation accuracy at the end and that clock's seconds give the search its target and time
limits, its whole trial's seconds the search's length; the lines printed say what the search will
take and, at the same pace, what the promote after it will (the search's budget does not cover
that), and warn of a target inside the validation split's noise.

The search's trial 0, the same network trained the same way (the same seed), is not trained again:
`seed_first_trial` journals it as asked and told the calibration's result, scored at the search's
target from its curve as the trial would have been (stopped at its hit), so a resume replays it
like any result. A calibration made before it was timed so (its proxy has no `calibration`) resumes
as it was made: its whole trial's seconds, and trial 0 trained again.

Must not train anything itself: the trial runs through experiments/search/driver.py like every other.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Collection

from evolution import SearchAlgorithm, resume
from evolution.objectives import CURVE_KEY
from experiments.search import sizing
from experiments.layout import CONFIG, JOURNAL
from experiments.search.driver import SearchHalted, on_result, run_search
from experiments.search.output_dir import open_search
from experiments.search.search_config import SearchConfig
from core.proxy_config import ProxyConfig, plan_split
from core.storage import exists, join, read_json

log = logging.getLogger(__name__)
# where each calibrated value goes: (field of SearchConfig, or of its proxy)
CALIBRATED = {"target_accuracy": ("proxy", "target_accuracy"), "target_seconds": ("proxy", "target_seconds"),
              "timeout_s": ("proxy", "timeout_s"), "max_trials": ("max_trials",), "time_budget_s": ("time_budget_s",)}


def calibration_config(config: SearchConfig, made_before: bool = False) -> SearchConfig:
    """The one-trial search that trains the seed with the search's proxy, to the end of its epochs,
    evaluated and timed as candidates are (`made_before`: as a calibration made before that was)."""
    from experiments.commands.show import load_genotype

    proxy = dataclasses.replace(config.proxy, target_accuracy=0.0, target_seconds=0.0, timeout_s=0.0,  # once, whole
                                calibration=not made_before)
    return dataclasses.replace(config, output_dir=sizing.calibration_dir(config.output_dir), max_trials=1,
                               algorithm="random", initial=(load_genotype(sizing.SEED).to_json(),),
                               repeats="train", upload_to=None, objective="val_accuracy", mode="max", proxy=proxy)


def made_before(output_dir: str) -> bool:
    """Whether the search's calibration dir holds one made before it was timed as candidates are: its
    proxy has no `calibration`, or (once a rerun resumed it, saving the field) has it False."""
    saved = join(sizing.calibration_dir(output_dir), CONFIG)
    return exists(saved) and not (read_json(saved).get("proxy") or {}).get("calibration", False)


def calibrate(config: SearchConfig, given: Collection[tuple[str, ...]] = ()) -> SearchConfig:
    """`config` with the calibrated target, limits and length, except those `given` (field paths:
    ("max_trials",), ("proxy", "timeout_s")); ValueError when the calibration run failed."""
    probe = calibration_config(config, made_before(config.output_dir))
    metrics = _calibration_metrics(probe)
    accuracy, (seconds, trial_seconds) = float(metrics["val_accuracy"]), calibration_seconds(metrics)
    try:
        values = sizing.calibrated(accuracy, seconds, trial_seconds)
    except ValueError as err:
        raise ValueError(f"{err} (or delete {probe.output_dir} to calibrate again)") from None
    if ("max_trials",) in given:  # a count of one's own: not cut short by the sized time
        given = {*given, ("time_budget_s",)}
    changes = _apply(config, values, given)
    seeds = (first_trial_metrics(changes.proxy, metrics) is not None and changes.initial[:1] == probe.initial
             and not (changes.rungs or changes.limits() or changes.initial_last))  # as seed_first_trial finds
    print(calibration_line(accuracy, seconds, changes, trial_seconds, seeds), flush=True)
    if config.proxy.data:
        facts = sizing.DataFacts.read(config.proxy.data)
        warning = sizing.target_warning(changes.proxy.target_accuracy, accuracy, facts.classes,
                                        int(metrics.get("validation_images") or sizing.held_out(facts)))
        if warning:
            print(warning, flush=True)
        images = plan_split(probe.proxy, facts.train_images).num_train * probe.proxy.epochs  # what it trained
        print(sizing.promote_line(facts, trial_seconds / images), flush=True)
    return changes


def calibration_seconds(metrics: dict[str, Any]) -> tuple[float, float]:
    """(seconds on the candidates' clock at the end of its last evaluation, its whole trial's
    seconds); a calibration made before it had that clock: its trial's seconds for both."""
    trial_seconds = float(metrics["trial_seconds"])
    curve = metrics.get(CURVE_KEY)
    return (float(curve[-1][0]) if curve else trial_seconds), trial_seconds


def _calibration_metrics(probe: SearchConfig) -> dict[str, Any]:
    """The calibration's result: trained now, or read back; ValueError when it has none."""
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
    return dict(found[0].metrics)


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


def calibration_line(accuracy: float, seconds: float, config: SearchConfig, trial_seconds: float | None = None,
                     seeds: bool = False) -> str:
    """What the calibration found and what the search will take at its pace (an estimate: children
    that reach the target sooner stop sooner, slower ones at target_seconds); `seeds`: the
    calibration is the search's trial 0 (not trained again)."""
    proxy, trial_seconds = config.proxy, seconds if trial_seconds is None else trial_seconds
    clock = "" if trial_seconds == seconds else (
        f" ({proxy.target_clock.replace('_', ' ')}, the candidates' clock; {trial_seconds:.0f} s the whole trial)")
    runs = config.max_trials - (1 if seeds else 0)
    first = f"{config.max_trials} trials, the first this run (not trained again), {runs} more" if seeds else (
        f"{config.max_trials} trials")
    length = f"about {runs * trial_seconds / 60:.0f} min at that pace"
    if config.time_budget_s and config.time_budget_s < runs * trial_seconds:
        length = (f"none handed out after {config.time_budget_s / 60:.0f} min (--time_budget_s; a candidate that "
                  "cannot win stops early)")
    return (f"calibration: {sizing.SEED} reached {accuracy:.4f} validation accuracy in {seconds:.0f} s{clock} on "
            f"this data; candidates race to {proxy.target_accuracy:.4f} (at most {proxy.target_seconds:.0f} s each); "
            f"up to {first}, {length}")


def first_trial_metrics(proxy: ProxyConfig, calibrated: dict[str, Any]) -> dict[str, Any] | None:
    """The search's trial 0 as the calibration's run gives it: its curve up to where a candidate of
    `proxy` would have stopped (its hit, or its limit spent), scored there as the trial would be, its
    accuracy, steps and epochs there; its end's losses and seconds dropped, its costs kept. None for
    a calibration without a curve (made before), which cannot stand in for the trial."""
    curve = calibrated.get(CURVE_KEY)
    if not curve or not proxy.target_accuracy:
        return None
    stop = next((i for i, (seconds, accuracy) in enumerate(curve)
                 if proxy.reached_target(seconds, accuracy) or seconds >= proxy.target_seconds), len(curve) - 1)
    kept = [list(point) for point in curve[:stop + 1]]
    steps, epochs = int(calibrated["train_steps"]), float(calibrated["epochs"])
    per_epoch = round(steps / epochs)
    at = min(steps, len(kept) * max(1, round(proxy.epochs_per_eval * per_epoch)))  # its evaluations' steps
    metrics = {name: value for name, value in calibrated.items()
               if name not in ("val_loss", "train_loss", "train_seconds", "error")}
    metrics.update(proxy.seconds_to_target_on(kept), val_accuracy=kept[-1][1], evaluations=len(kept),
                   train_steps=at, epochs=at / per_epoch, seeded_from="calibration")
    metrics[CURVE_KEY] = kept
    return metrics


def seed_first_trial(config: SearchConfig, algorithm: SearchAlgorithm) -> bool:
    """Journal the search's trial 0 (the calibrated seed) as asked and told the calibration's result
    (`first_trial_metrics`), unless it has one: when the search has no trial yet, or trial 0 is
    pending (a run ended between the two). Whether it did; not when the first proposal is not the
    calibration's network (another --initial, size limits, rungs) or the calibration has no curve."""
    journal = join(sizing.calibration_dir(config.output_dir), JOURNAL)
    if algorithm.rungs is not None or algorithm.limits or not exists(journal):
        return False
    calibration = resume(journal, read_only=True)
    done = [t for t, o in calibration.outcomes.items() if o.status == "ok"]
    metrics = first_trial_metrics(config.proxy, dict(calibration.outcomes[done[0]].metrics)) if done else None
    if metrics is None:
        return False
    key = calibration.trials[done[0]].genotype.key()
    if algorithm.trials:
        if 0 in algorithm.outcomes or algorithm.trials[0].genotype.key() != key:
            return False
    elif not (algorithm.initial and algorithm.initial[0].key() == key and not getattr(algorithm, "initial_last",
                                                                                          False)):
        return False
    trial_id = 0 if algorithm.trials else algorithm.ask().trial_id
    if algorithm.trials[trial_id].genotype.key() != key:  # not expected: back in line, the search trains it
        algorithm.requeue(trial_id)
        return False
    algorithm.tell(trial_id, metrics)
    print(f"trial {trial_id} ({sizing.SEED}) is the calibration's run, scored at the target from its evaluations "
          f"(not trained again; {sizing.calibration_dir(config.output_dir)})", flush=True)
    on_result(algorithm, trial_id, config)
    return True
