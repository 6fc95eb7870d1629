"""The multi-fidelity half of a search's bookkeeping (evolution/rungs.py has the rungs and rules):
each trial's result at every rung it reached, the decision taken there, the continuation of a
paused trial, and the pick, which compares cells like with like.

A trial joins the population with its first rung's result; a tournament compares its sample at the
highest rung all of them reached. The pick (`best()`) is the best result at the first rung,
replaced by the best at the next rung whenever the pick has reached that rung too, and so on up: a
cell is displaced only by one that beat it where both were measured.

`RungBook` is a part of `SearchAlgorithm` (evolution/base.py), not used alone. Pure Python: this
module must not import TensorFlow or Ray.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Mapping

from evolution.records import Outcome, Trial
from evolution.rungs import CONTINUE, PAUSE, STOP, Promotions, Rungs

log = logging.getLogger(__name__)


class RungBook:
    """Rung results, decisions, continuations and the rung leaders of a search."""

    rungs: Rungs | None
    rung_rule: Promotions | None
    trials: dict[int, Trial]
    outcomes: dict[int, Outcome]
    objective: str

    def _start_rungs(self) -> None:
        self.rung_results: dict[int, list[dict[str, Any]]] = {}  # a trial's metrics at each rung reached
        self.decisions: dict[int, list[str]] = {}  # and the decision taken at each
        self._leaders: list[int | None] = [None] * (len(self.rungs.epochs) if self.rungs else 1)  # best at each rung

    @property
    def promotions(self) -> Promotions | None:
        """The rung rule (its older name)."""
        return self.rung_rule

    def report(self, trial_id: int, rung: int, metrics: Mapping[str, Any]) -> str:
        """A trial's result at rung `rung` (its metrics may carry `seconds_per_epoch`, the cost the
        rule weighs; 1 when absent): CONTINUE to train it on to the next rung, STOP, or (the
        promotion rule) PAUSE: the trial ends its run for now, untold, and a later `ask` may hand it
        out again to go on. A rung already reported (a resumed trial reporting again) gets the
        decision taken then; a result without a finite objective, a trial not in flight or a rung
        out of order gets STOP."""
        if self.rungs is None:
            raise ValueError("report: this search has no rungs")
        if trial_id not in self.trials or trial_id in self.outcomes:
            log.warning("report: trial %s is not in flight; told to stop", trial_id)
            return STOP
        done = self.decisions.get(trial_id, [])
        if rung < len(done):
            log.info("report: trial %s rung %d was decided before (%s)", trial_id, rung, done[rung])
            return done[rung]
        ended = bool(done) and done[-1] in (STOP, PAUSE)
        if ended or rung != len(done) or rung > self.rungs.top or self._outcome(metrics, None).status != "ok":
            log.warning("report: trial %s rung %d after a stop, out of order or without a finite %s; told to stop",
                        trial_id, rung, self.objective)
            return STOP
        metrics = {**metrics, "rung": rung, "epochs": self.rungs.epochs[rung]}
        decision = self._decide(trial_id, rung, metrics)
        self._write({"event": "rung", "trial_id": trial_id, "rung": rung, "metrics": metrics,
                     "decision": decision})
        return decision

    def _decide(self, trial_id: int, rung: int, metrics: dict[str, Any]) -> str:
        cost = float(metrics.get("seconds_per_epoch") or 1.0)
        decision = self.rung_rule.decide(rung, self._signed(metrics), cost, trial_id)
        self.rung_results.setdefault(trial_id, []).append(metrics)
        self.decisions.setdefault(trial_id, []).append(decision)
        if rung == 0:
            self._accept(trial_id)
        self._consider_for_best(trial_id, rung)
        return decision

    def _promotion(self) -> tuple[int, int] | None:
        """The paused trial the rule lets go on now, and its rung (None: none)."""
        return self.rung_rule.promotion() if self.rung_rule is not None else None

    def _continue(self, trial_id: int, rung: int) -> Trial:
        """Hand a paused trial out again, to train on from `rung` to the next: its decision there
        becomes CONTINUE."""
        self.rung_rule.promote(trial_id, rung)
        self.decisions[trial_id][rung] = CONTINUE
        return replace(self.trials[trial_id], start_rung=rung + 1)

    def paused(self) -> list[int]:
        """Ids of trials paused at a rung (untold), waiting to be continued."""
        return [t for t, done in self.decisions.items() if done[-1] == PAUSE and t not in self.outcomes]

    def highest_rung(self, trial_id: int) -> int:
        """The highest rung the trial has a result at (0 without rungs)."""
        return max(0, len(self.rung_results.get(trial_id, ())) - 1)

    def metrics_at(self, trial_id: int, rung: int) -> Mapping[str, Any]:
        """The trial's metrics at `rung` (without rungs: its told result)."""
        if trial_id in self.rung_results:
            return self.rung_results[trial_id][rung]
        return self.outcomes[trial_id].metrics

    def value_at(self, trial_id: int, rung: int) -> float:
        """The trial's objective at `rung`, signed so that larger is better."""
        return self._signed(self.metrics_at(trial_id, rung))

    def standing(self, trial_id: int) -> tuple[int, float]:
        """How a ranking of finished trials orders one: its highest rung, then its result there."""
        rung = self.highest_rung(trial_id)
        return rung, self.value_at(trial_id, rung)

    @property
    def _best_id(self) -> int | None:
        """The pick: the first rung's leader, then each higher rung's leader while the pick has a
        result there too."""
        pick = self._leaders[0]
        for rung in range(1, len(self._leaders)):
            if pick is None or self.highest_rung(pick) < rung:
                break
            pick = self._leaders[rung]
        return pick

    def best(self) -> tuple[Trial, Outcome] | None:
        """The pick (without rungs: the best successful trial by the objective; with rungs: the first
        rung's leader, displaced by each higher rung's leader while the pick reached that rung too).
        A trial still training at a higher rung, or paused, is picked with its last rung's result
        (an Outcome without told_at)."""
        if self._best_id is None:
            return None
        outcome = self.outcomes.get(self._best_id) or Outcome("ok", self.rung_results[self._best_id][-1])
        return self.trials[self._best_id], outcome

    def _consider_for_best(self, trial_id: int, rung: int) -> None:
        outcome = self.outcomes.get(trial_id)
        if outcome is not None and outcome.status != "ok":
            return
        leader = self._leaders[rung]
        if leader is None or self.value_at(trial_id, rung) > self.value_at(leader, rung):
            self._leaders[rung] = trial_id

    def _recount_leaders(self) -> None:
        """A failed trial leads no rung: the leaders again, from every rung result."""
        self._leaders = [None] * len(self._leaders)
        for other, results in self.rung_results.items():
            for rung in range(len(results)):
                self._consider_for_best(other, rung)

    def _decided_meanwhile(self, trial_id: int) -> bool:
        """Whether a trial waiting to be handed out again (its worker lost) is not to be: its last
        rung was decided STOP (before the loss, or by the lost worker's late result), and it is told
        that rung's result now, as a resume tells it; or decided PAUSE, and it waits for the rule."""
        last = self.decisions.get(trial_id, [CONTINUE])[-1]
        if last == STOP:
            self.tell(trial_id, self.rung_results[trial_id][-1])
        return last in (STOP, PAUSE)

    def _finish_decided(self) -> list[int]:
        """Trials whose last rung was decided STOP but that were never told (the driver ended in
        between): told now with that rung's metrics, as the trial would have been."""
        finished = [t for t in self.pending() if self.decisions.get(t) and self.decisions[t][-1] == STOP]
        for trial_id in finished:
            if self._journal is not None:
                self.tell(trial_id, self.rung_results[trial_id][-1])
            else:
                self._record(trial_id, Outcome("ok", self.rung_results[trial_id][-1]))
        return finished
