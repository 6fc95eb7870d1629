"""Ray Tune adapter: a Tune `Searcher` over any ask/tell `SearchAlgorithm`.

The only module of `evolution` that imports Ray. It translates Tune's trial ids to the
algorithm's, and results to `tell` calls; it must not train anything or import TensorFlow.
Durable state is the algorithm's journal: Tune's searcher checkpoint only records where it is.
With rungs, `RungScheduler` is Tune's scheduler: at each rung a trial reports, it asks the
algorithm (evolution/rungs.py, which journals the decision) and has Tune carry the answer out.
Only rules that never pause a trial (the stopping rule) run here: a paused trial would need Tune to
keep its rung checkpoint and hand it out again, which this adapter does not do yet, so a pausing
rule is refused (`refuse_pausing_rule`) rather than left to stop its trials for good.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable

from ray.tune.result import AUTO_RESULT_KEYS
from ray.tune.schedulers import FIFOScheduler, TrialScheduler
from ray.tune.search import Searcher

from evolution.base import SearchAlgorithm
from evolution.objectives import CURVE_KEY
from evolution.rungs import CONTINUE

log = logging.getLogger(__name__)
TUNE_KEYS = frozenset(AUTO_RESULT_KEYS) | {"trial_id", "done", "experiment_tag"}
# A trial's own metrics travel as one JSON string: Tune keeps running statistics of every number in
# a result, for every trial, for the whole search (about 40 KB a trial for our 25 numbers); only
# the objective goes to Tune as a number.
METRICS_KEY = "trial_metrics_json"


def tune_result(metrics: dict[str, Any], objective: str = "val_accuracy") -> dict[str, Any]:
    """What a trial reports to Tune: the objective, and all its metrics as `METRICS_KEY`."""
    return {objective: metrics.get(objective, float("nan")), METRICS_KEY: json.dumps(metrics)}


def trial_metrics(result: dict[str, Any]) -> dict[str, Any]:
    """A Tune result with the trial's own metrics unpacked."""
    result = dict(result or {})
    if METRICS_KEY in result:
        result = {**json.loads(result.pop(METRICS_KEY)), **result}
    return result


def _is_metric(key: str, value: Any) -> bool:
    """A value the trial reported, not one of Tune's own (flattened config/... keys included): a
    number or a string, or a --target_accuracy trial's target_curve (a list of [seconds, accuracy])."""
    kept = isinstance(value, (int, float, str)) or (key == CURVE_KEY and isinstance(value, list))
    return kept and key not in TUNE_KEYS and not key.startswith("config/")


def refuse_pausing_rule(algorithm: SearchAlgorithm) -> None:
    """ValueError for a rung rule that pauses trials (the promotion rule): not run through Tune."""
    rule = algorithm.rung_rule
    if rule is not None and rule.pauses:
        raise ValueError(f"rung_rule: the {rule.name!r} rule pauses trials, which a search through Ray Tune cannot "
                         "continue yet; use the stopping rule here (amoeba benchmark --budget_s --rung_rule="
                         f"{rule.name} simulates it on a table)")


class EvolutionSearcher(Searcher):
    """Hands Tune up to `budget` trials from `algorithm` and feeds the results back.

    A trial reports its metrics, or an `error` string for a candidate failure. A trial whose worker
    failed for good (Tune's retries spent, or none allowed: Tune does not retry a trial that fails
    while its worker starts) is recorded as failed with `failure_reason(ours, tune's id)` when the
    worker wrote one (a timeout, out of memory); without one the worker was lost (a node, a crash)
    and the trial is re-issued once with the same id, then recorded failed with a pointer to Tune's
    error file. A trial stopped before it reported (the search was
    stopped) is not told: it stays in flight and a resumed search re-issues it. `should_stop()`
    true ends the suggestions.
    """

    def __init__(
        self,
        algorithm: SearchAlgorithm,
        budget: int,
        on_tell: Callable[[SearchAlgorithm, int], None] | None = None,
        failure_reason: Callable[[int, str], str | None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        checkpoint_root: str | None = None,
    ) -> None:
        refuse_pausing_rule(algorithm)
        super().__init__(metric=algorithm.objective, mode=algorithm.mode)
        self.checkpoint_root = checkpoint_root  # with rungs: each trial's state after its last rung
        self.algorithm = algorithm
        self.budget = budget
        self.on_tell = on_tell
        self.failure_reason = failure_reason
        self.should_stop = should_stop
        self._issued = 0
        self._ours: dict[str, int] = {}

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self._issued >= self.budget or (self.should_stop is not None and self.should_stop()):
            return Searcher.FINISHED
        trial = self.algorithm.ask()
        self._issued += 1
        self._ours[trial_id] = trial.trial_id
        config = {
            "trial_id": trial.trial_id,
            "parent_id": trial.parent_id,
            "mutation": trial.mutation,
            "genotype": trial.genotype.to_json(),
        }
        if self.checkpoint_root:  # a trial's state until it ends (rungs, a calibrated step count)
            config["checkpoint_dir"] = checkpoint_dir(self.checkpoint_root, trial.trial_id)
        if self.algorithm.rungs is not None:
            config.update(rungs=list(self.algorithm.rungs.epochs),
                          start_rung=len(self.algorithm.rung_results.get(trial.trial_id, ())))
        if self.algorithm.limits:
            config["limits"] = self.algorithm.limits.to_config()
        if trial.stops:  # a time-to-target candidate's own stops (evolution/target_race.py)
            config["stops"] = dict(trial.stops)
        return config

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        ours = self._ours.pop(trial_id, None)
        if ours is None:
            log.warning("result for a Tune trial %s this searcher did not issue; ignored", trial_id)
            return
        result = trial_metrics(result)
        if not error and "error" not in result and self.algorithm.objective not in result:
            reported = sorted(k for k, v in result.items() if _is_metric(k, v))
            if not (result.get("done") and reported):
                log.info("trial %s was stopped before it reported; it stays in flight", ours)
                return
            # it finished, reporting other metrics only: a candidate failure, not a stopped trial
            result["error"] = f"the trial finished without reporting {self.algorithm.objective!r} (it reported {reported})"
        if not error and not result.get("error") and self.algorithm.decisions.get(ours, [None])[-1] == CONTINUE:
            log.info("trial %s was stopped on its way to the next rung; it stays in flight", ours)
            return
        reason = result.pop("error", None) or None
        if error and reason is None:
            reason = self.failure_reason(ours, trial_id) if self.failure_reason is not None else None
            if reason is None and self.algorithm.requeue(ours):  # no reason written: the worker was lost
                log.warning("trial %s ended without a result, its worker lost (see error.txt of Tune trial %s); "
                            "it is re-issued once", ours, trial_id)
                return
            reason = reason or f"the trial's worker failed twice: see error.txt of Tune trial {trial_id}"
        metrics = {k: v for k, v in result.items() if _is_metric(k, v)}
        if self.algorithm.tell(ours, metrics, error=reason) and self.on_tell is not None:
            self.on_tell(self.algorithm, ours)

    def _journal_path(self) -> str | None:
        journal = getattr(self.algorithm, "_journal", None)
        return journal and os.path.abspath(journal.path)

    def save(self, checkpoint_path: str) -> None:
        """Tune's own checkpoint: a JSON pointer to the journal (which holds the state)."""
        with open(checkpoint_path, "w", encoding="utf-8") as f:
            json.dump({"journal": self._journal_path()}, f)

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its searcher into tuner.pkl: it gets the journal's path, no state."""
        return {"journal": self._journal_path()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        raise NotImplementedError(
            f"resume the search from its journal {state.get('journal')} (run `amoeba search` again "
            "with the same --output_dir), not from a pickled Tune searcher"
        )

    def restore(self, checkpoint_path: str) -> None:
        raise NotImplementedError(
            "resume a search from its journal (run `amoeba search` again with the same "
            "--output_dir), not from Tune's checkpoint"
        )


def checkpoint_dir(root: str, trial_id: int) -> str:
    """Where a multi-fidelity trial keeps its state after its last rung."""
    return os.path.join(root, f"trial_{trial_id}")


class RungScheduler(FIFOScheduler):
    """Tune's scheduler for a multi-fidelity search: the algorithm decides at each rung (and
    journals it), Tune carries it out: CONTINUE lets the trial train on, STOP ends it. A result
    with an error or without the objective is let through: the trial ends and the searcher
    records it. `on_rung(algorithm, trial_id, decision)` runs after each decision."""

    def __init__(self, algorithm: SearchAlgorithm,
                 on_rung: Callable[[SearchAlgorithm, int, str], None] | None = None) -> None:
        refuse_pausing_rule(algorithm)
        super().__init__()
        self.algorithm = algorithm
        self.on_rung = on_rung

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        metrics = trial_metrics(result)
        if metrics.get("error") or "rung" not in metrics:
            return TrialScheduler.CONTINUE
        ours = trial.config["trial_id"]
        metrics = {k: v for k, v in metrics.items() if _is_metric(k, v)}
        decision = self.algorithm.report(ours, int(metrics["rung"]), metrics)
        if self.on_rung is not None:
            self.on_rung(self.algorithm, ours, decision)
        return TrialScheduler.CONTINUE if decision == CONTINUE else TrialScheduler.STOP

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its scheduler into tuner.pkl too: the journal holds the state, not the pickle."""
        journal = getattr(self.algorithm, "_journal", None)
        return {"journal": journal and os.path.abspath(journal.path)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        raise NotImplementedError(f"resume the search from its journal {state.get('journal')}, not from a "
                                  "pickled Tune scheduler")
