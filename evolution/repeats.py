"""What a search does with a proposal it has seen before (`repeats`), and the rule that two
identical trials never train at the same moment.

- "train" (the paper's behaviour, the default): a repeated genotype is trained again; a second
  result of the same network is more evidence of its worth, noise and all.
- "reuse": a proposal whose genotype (by its canonical key) already has a successful result gets
  that result at once, journaled as a tell with `reused_from` (the trial it came from); it joins
  the population as a trained child would, and is not charged to the search's budget (it is not
  `charged`). Not with rungs: a rung's result is not a finished one.

Under "reuse" a proposal identical to a trial that is running now is held back (not handed out)
until that one has its result, and then takes it: two identical trials never train at the same
moment. Under "train" nothing is held: a repeat would be trained anyway, and holding it would only
reorder the proposals (and change every simulated figure). A replay needs none of this: the
journal's tells carry the reuses, and a held trial is one in flight, so a resumed search re-issues
it and the rule above is applied again.

Pure Python: this module must not import TensorFlow or Ray.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from evolution.records import Outcome, Trial

log = logging.getLogger(__name__)
REPEATS = ("train", "reuse")


class RepeatBook:
    """The repeats bookkeeping of SearchAlgorithm (which supplies `_write` and `_record`): which
    trials run now, which are held, and the first successful trial of each key."""

    trials: dict[int, Trial]
    outcomes: dict[int, Outcome]

    def _start_repeats(self, repeats: str, has_rungs: bool) -> None:
        if repeats not in REPEATS:
            raise ValueError(f"repeats: one of {list(REPEATS)}, got {repeats!r}")
        if repeats == "reuse" and has_rungs:
            raise ValueError("repeats: 'reuse' takes a finished result, and rungs leave trials between results; "
                             "use repeats 'train' with rungs")
        self.repeats = repeats
        self._running: set[int] = set()  # handed out this run and not yet told
        self._held: list[int] = []  # asked, identical to a running trial: handed out (or reused) after it
        self._first_ok: dict[str, int] = {}  # key -> the first trial with a successful result

    def charged(self) -> int:
        """Results the search paid for: every result but the reused ones."""
        return sum(o.reused_from is None for o in self.outcomes.values())

    def reused(self) -> int:
        return sum(o.reused_from is not None for o in self.outcomes.values())

    def _key(self, trial_id: int) -> str:
        return self.trials[trial_id].genotype.key()

    def _twin_running(self, trial_id: int) -> int | None:
        key = self._key(trial_id)
        return next((t for t in sorted(self._running) if t != trial_id and self._key(t) == key), None)

    def _held_back(self, trial: Trial) -> bool:
        """Under "reuse", whether `trial` is not to be handed out now: reused (its key has a result)
        or held (a twin runs); False: hand it out."""
        if self.repeats != "reuse":
            return False
        earlier = self._first_ok.get(trial.genotype.key())
        if earlier is not None and earlier != trial.trial_id:
            self._reuse(trial.trial_id, earlier)
            return True
        twin = self._twin_running(trial.trial_id)
        if twin is None:
            return False
        if trial.trial_id not in self._held:
            log.info("trial %s is the same network as trial %s, which is training: held until it ends",
                     trial.trial_id, twin)
            self._held.append(trial.trial_id)
        return True

    def _releasable(self) -> int | None:
        """A held trial whose twin has its result now (taken off the held list), or None."""
        for trial_id in self._held:
            if self._twin_running(trial_id) is None:
                self._held.remove(trial_id)
                return trial_id
        return None

    def _reuse(self, trial_id: int, earlier: int) -> None:
        metrics = dict(self.outcomes[earlier].metrics)
        outcome = Outcome("ok", metrics, None, round(time.time(), 3), reused_from=earlier)
        self._write({"event": "tell", "trial_id": trial_id, "status": "ok", "metrics": metrics, "error": None,
                     "time": outcome.told_at, "reused_from": earlier})
        if trial_id in self._held:
            self._held.remove(trial_id)
        log.info("trial %s is the same network as trial %s: its result is reused", trial_id, earlier)
        self._record(trial_id, outcome)

    def _note_result(self, trial_id: int, outcome: Outcome) -> None:
        """After a result is recorded (told or replayed): the trial runs no more; the first success
        of its key is remembered; under "reuse" the trials held for it take its result."""
        self._running.discard(trial_id)
        if trial_id in self._held:  # told by the caller while held back (ask/tell by hand)
            self._held.remove(trial_id)
        if outcome.status != "ok":
            return
        key = self._key(trial_id)
        self._first_ok.setdefault(key, trial_id)
        if self.repeats == "reuse":
            twins = [t for t in self._held if self._key(t) == key]
            self._held = [t for t in self._held if t not in twins]  # off the list first: each is reused once,
            for held in twins:  # here, not again by the reuse's own `_record`
                self._reuse(held, self._first_ok[key])
