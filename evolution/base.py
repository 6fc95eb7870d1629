"""The bookkeeping every search algorithm shares, behind one ask/tell interface keyed by trial id,
with a durable journal.

`ask()` hands out a trial, `tell(trial_id, metrics | error)` records its result. With rungs
(multi-fidelity: evolution/fidelity.py, evolution/rungs.py) a trial also `report`s at each rung and
is told whether to go on; the rung rule is an object the algorithm is given by name.

Costs: with `limits` (evolution/objectives.py), a proposal whose figures from `measure(genotype)`
(size, before any training) break a limit is rejected and another is proposed; the rejection is
journaled with its figures and counted (`rejected`), not handed out. A result that breaks a limit
the measure could not judge (latency, measured by the trial) is `infeasible`: recorded with its
figures, neither in the population nor a failure. With `reward` (MnasNet's), the fitness is the
objective scaled by a cost.

Every ask, continuation, rejection, rung decision and accepted tell is appended to the journal;
`resume(path)` (evolution/replay.py) replays it through the same code. What a subclass supplies:
`Params` (its own parameters, evolution/params.py), `_propose` and `_accept`.

Pure Python: this module must not import TensorFlow or Ray.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from collections import deque
from dataclasses import replace
from typing import Any, ClassVar, Mapping, Sequence

from evolution.fidelity import RungBook
from evolution.journal import Journal, JournalLock
from evolution.objectives import Goal, Limits, MnasReward
from evolution.pareto import front
from evolution.params import NoParams
from evolution.records import Measure, Outcome, Trial, genotype_of
from evolution.repeats import RepeatBook
from evolution.rungs import Rungs
from evolution.rungs import rung_rule as rule_named
from evolution.target_race import TargetRace
from searchspace import SearchSpace

log = logging.getLogger(__name__)
JOURNAL_VERSION = 1
MAX_REJECTIONS = 1000  # proposals in a row that break the limits: the limits leave no room, a config error


class SearchAlgorithm(RungBook, RepeatBook):
    """Bookkeeping shared by every algorithm; subclasses supply `Params`, `_propose` and `_accept`."""

    name: ClassVar[str]
    Params: ClassVar[type[NoParams]] = NoParams  # the algorithm's own parameters, declared once
    param_names: ClassVar[tuple[str, ...]] = ()  # their names (derived from Params)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "param_names" not in cls.__dict__:
            cls.param_names = cls.Params.names()

    def __init__(
        self,
        space: SearchSpace,
        *,
        seed: int = 0,
        objective: str = "val_accuracy",
        mode: str = "max",
        journal_path: str | None = None,
        fsync: bool = True,
        journal_lock: JournalLock | None = None,
        rungs: Rungs | None = None,
        rung_rule: str | None = None,
        reward: MnasReward | None = None,
        limits: Limits | Mapping[str, float] | None = None,
        measure: Measure | None = None,
        initial: Sequence[Any] = (),
        repeats: str = "train",
        race: TargetRace | None = None,
        **params: Any,
    ) -> None:
        if mode not in ("max", "min"):
            raise ValueError(f"mode: must be 'max' or 'min', got {mode!r}")
        self.settings = self._settings(params)
        self.space = space
        self.initial = tuple(genotype_of(space, g, f"initial[{i}]") for i, g in enumerate(initial))
        self._initial_next = 0  # the first proposals are the initial genotypes, in order
        self.reward = reward
        self.limits = limits if isinstance(limits, Limits) else Limits.from_config(limits)
        self.measure = measure
        self.measured: dict[str, dict[str, float]] = {}  # figures from `measure`, by genotype key
        self._measured_since: list[str] = []  # keys measured since the last ask event (children passed over)
        self.rejected = 0  # proposals turned down for breaking a limit
        self.race = race  # a time-to-target search's stops and screen (evolution/target_race.py)
        self.seed, self.objective, self.mode = seed, objective, mode
        if reward is not None:
            reward.check(objective, mode)
        self.rng = random.Random(seed)
        self.rungs = rungs
        self.rung_rule = rule_named(rung_rule, rungs) if rungs else None
        self.trials: dict[int, Trial] = {}
        self.outcomes: dict[int, Outcome] = {}
        self._start_rungs()
        self._start_repeats(repeats, rungs is not None)
        self._reissue: deque[int] = deque()
        self._requeued: set[int] = set()  # trials put back once this run after their worker was lost
        self._journal: Journal | None = None
        self.started_at: float | None = round(time.time(), 3)
        if journal_path is not None:
            self._open_journal(journal_path, fsync, journal_lock)

    def _settings(self, params: dict[str, Any]) -> NoParams:
        unknown = sorted(set(params) - set(self.Params.names()))
        if unknown:
            raise TypeError(f"{self.name}: unknown parameters {unknown}; its own: {list(self.Params.names())}")
        settings = self.Params(**params)
        for name, value in settings.to_config().items():  # as attributes too (algorithm.population_size)
            setattr(self, name, value)
        return settings

    def _open_journal(self, journal_path: str, fsync: bool, journal_lock: JournalLock | None) -> None:
        lock = journal_lock or JournalLock(journal_path)  # before looking: no other writer then
        if os.path.exists(journal_path) and os.path.getsize(journal_path) > 0:
            lock.release()
            raise FileExistsError(f"{journal_path}: journal exists; use resume() to continue it")
        self._journal = Journal(journal_path, fsync=fsync, lock=lock)
        self._journal.append({"event": "start", "version": JOURNAL_VERSION, **self.config(), "time": self.started_at})

    # --- what subclasses provide -------------------------------------------------------------

    def params(self) -> dict[str, Any]:
        """The algorithm's own parameters (its `Params`), as the journal stores them."""
        return self.settings.to_config()

    def _propose(self, trial_id: int) -> Trial:
        raise NotImplementedError

    def _accept(self, trial_id: int) -> None:
        """A trial succeeded: update the algorithm's state."""

    # --- the interface -------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        return {
            "algorithm": self.name,
            "space": self.space.to_config(),
            "seed": self.seed,
            "objective": self.objective,
            "mode": self.mode,
            "params": self.params(),
            "rungs": self.rungs.to_config() if self.rungs else None,
            "rung_rule": self.rung_rule.name if self.rung_rule else None,
            "reward": self.reward.to_config() if self.reward else None,
            "limits": self.limits.to_config(),
            "initial": [g.to_json() for g in self.initial],
            "repeats": self.repeats,
            "race": self.race.to_config() if self.race else None,
        }

    @property
    def goals(self) -> tuple[Goal, ...]:
        """The measures a result must have, and which way is better (one without Pareto)."""
        return (Goal(self.objective, self.mode),)

    def ask(self) -> Trial:
        """The next trial: a held one whose twin has finished, a re-issued in-flight one, a paused
        one the rung rule lets go on (the same trial, `start_rung` its next rung), else a new
        proposal. One identical to a running trial is held back, and under repeats "reuse" one whose
        network has a result takes it (evolution/repeats.py): the next is proposed instead."""
        for _ in range(MAX_REJECTIONS):
            trial, fresh = self._next_trial()
            if not fresh or not self._held_back(trial):
                self._running.add(trial.trial_id)
                return trial
        trial, _ = self._next_trial()  # the space looks exhausted: this one trains, repeat or not
        log.warning("%d proposals in a row repeated a network already evaluated or training; trial %s is handed "
                    "out as it is", MAX_REJECTIONS, trial.trial_id)
        self._running.add(trial.trial_id)
        return trial

    def _next_trial(self) -> tuple[Trial, bool]:
        """The next candidate hand-out, and whether it is a new or re-issued trial (not a continuation)."""
        released = self._releasable()
        if released is not None:
            return replace(self.trials[released], start_rung=len(self.rung_results.get(released, ()))), True
        while self._reissue:
            trial = self.trials[self._reissue.popleft()]
            if self._decided_meanwhile(trial.trial_id):
                continue
            self._write({"event": "reissue", "trial_id": trial.trial_id})
            return replace(trial, start_rung=len(self.rung_results.get(trial.trial_id, ()))), True
        promoted = self._promotion()
        if promoted is not None:
            self._write({"event": "continue", "trial_id": promoted[0], "rung": promoted[1]})
            return self._continue(*promoted), False
        trial = self._new_trial()
        key = trial.genotype.key()
        passed_over = {k: self.measured[k] for k in dict.fromkeys(self._measured_since) if k != key}
        self._measured_since.clear()
        self._write({"event": "ask", "trial_id": trial.trial_id, "parent_id": trial.parent_id,
                     "mutation": trial.mutation, "genotype": trial.genotype.to_json(),
                     **({"figures": self.measured[key]} if key in self.measured else {}),
                     **({"measured": passed_over} if passed_over else {}),
                     **({"stops": trial.stops} if trial.stops else {}),
                     **({"screened": trial.screened} if trial.screened else {})})
        return trial, True

    def requeue(self, trial_id: int) -> bool:
        """Put an in-flight trial whose worker was lost (not the candidate's fault) back in line: the
        next `ask` re-issues it with the same id. Once per trial in a run; False when it is not in
        flight (told, or paused at a rung: no worker holds it) or was put back already (the caller then
        records it failed). One whose last rung was decided STOP needs no worker: it is told that rung's
        result at once (True: handled)."""
        if trial_id not in self.trials or trial_id in self.outcomes or trial_id in self._requeued \
                or trial_id in self.paused():
            return False
        if self._decided_meanwhile(trial_id):  # its last rung was decided STOP: told that rung's result now
            return True
        self._requeued.add(trial_id)
        self._running.discard(trial_id)
        if trial_id not in self._reissue:
            self._reissue.append(trial_id)
        return True

    def retry_failed(self) -> list[int]:
        """Forget every failed result (not infeasible ones): each such trial is in flight again and the
        next asks re-issue it with its id, for a search whose failures were the training code's, now
        fixed. Journaled as `retry` events; their ids. Not with rungs (a rung's state would stay)."""
        if self.rungs is not None:
            raise ValueError("retry_failed: not with rungs")
        failed = sorted(t for t, o in self.outcomes.items() if o.status == "failed")
        for trial_id in failed:
            self._write({"event": "retry", "trial_id": trial_id})
            del self.outcomes[trial_id]
            self._reissue.append(trial_id)
        return failed

    def waiting_reissue(self) -> int:
        """How many in-flight trials the next asks re-issue."""
        return len(self._reissue)

    def tell(self, trial_id: int, metrics: Mapping[str, Any] | None = None, error: str | None = None) -> bool:
        """Record a result. Returns False (with a warning) for an unknown, duplicate or late one.

        A result without a finite objective value counts as a failure with that reason.
        """
        if trial_id not in self.trials:
            log.warning("tell: ignoring a result for unknown trial %s", trial_id)
            return False
        if trial_id in self.outcomes:
            log.warning("tell: ignoring a duplicate or late result for trial %s", trial_id)
            return False
        outcome = replace(self._outcome(metrics or {}, error), told_at=round(time.time(), 3))
        self._write({"event": "tell", "trial_id": trial_id, "status": outcome.status,
                     "metrics": dict(outcome.metrics), "error": outcome.error, "time": outcome.told_at})
        self._record(trial_id, outcome)
        return True

    def pending(self) -> list[int]:
        """Ids of trials in flight: asked (or continued) but not yet told, and not paused."""
        paused = set(self.paused())
        return [t for t in self.trials if t not in self.outcomes and t not in paused]

    @property
    def screened_out(self) -> int:
        """Children a screen passed over, untrained (evolution/target_race.py)."""
        return sum(len(trial.screened) for trial in self.trials.values())

    def completed(self) -> int:
        """Results the search paid for (a reused result is not one: evolution/repeats.py)."""
        return self.charged()

    def fitness(self, trial_id: int) -> float:
        """The objective of a successful trial, signed so that larger is better."""
        return self._signed(self.outcomes[trial_id].metrics)

    def _signed(self, metrics: Mapping[str, Any]) -> float:
        """The fitness: the objective (scaled by the reward's cost factor, with a reward), signed so
        that larger is better."""
        value = float(metrics[self.objective])
        if self.reward is not None:
            value = self.reward.score(value, metrics)
        return value if self.mode == "max" else -value

    def score(self, metrics: Mapping[str, Any]) -> float:
        """What the search ranks by, unsigned: the objective, or the reward with one."""
        value = self._signed(metrics)
        return value if self.mode == "max" else -value

    def front(self) -> list[int]:
        """Ids of the successful trials no other successful trial beats on every goal (by their
        last result), in trial order."""
        ok = [t for t, o in self.outcomes.items() if o.status == "ok"]
        points = [tuple(g.signed(self.outcomes[t].metrics) for g in self.goals) for t in ok]
        return sorted(ok[i] for i in front(points))

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    # --- internals -----------------------------------------------------------------------------

    def _new_trial(self) -> Trial:
        for _ in range(MAX_REJECTIONS):
            if self._initial_due():  # seeds of the first population, before random ones or after them
                trial = Trial(len(self.trials), self.initial[self._initial_next], None, "initial")
                self._initial_next += 1
            else:
                trial = self._propose(len(self.trials))
            broken = self.limits.violations(self._figures(trial.genotype)) if self.limits else []
            if not broken:
                if self.race is not None:  # from the results so far: a replay sets the same
                    trial = replace(trial, stops=self.race.stops(self.outcomes))
                self.trials[trial.trial_id] = trial
                return trial
            self.rejected += 1
            self._write({"event": "reject", "parent_id": trial.parent_id, "mutation": trial.mutation,
                         "genotype": trial.genotype.to_json(), "figures": self.measured[trial.genotype.key()],
                         "reason": "; ".join(broken)})
            self._measured_since = [k for k in self._measured_since if k != trial.genotype.key()]  # journaled here
        raise ValueError(f"limits: {MAX_REJECTIONS} proposals in a row break {self.limits.to_config()}; "
                         "no candidate fits, loosen the limits")

    def _initial_due(self) -> bool:
        """Whether the next proposal is the next initial genotype: they open the first population
        (or, with `initial_last`, close it, after population_size - len(initial) random ones)."""
        if self._initial_next >= len(self.initial):
            return False
        if getattr(self, "initial_last", False):
            return len(self.trials) >= self.population_size - len(self.initial)
        return True

    def _figures(self, genotype: Any) -> Mapping[str, float]:
        """What `measure` says of the genotype before training (cached by key; the journal keeps
        them, so a replay needs no measure)."""
        key = genotype.key()
        if key not in self.measured:
            if self.measure is None:
                return {}
            self.measured[key] = {k: float(v) for k, v in self.measure(genotype).items()}
            self._measured_since.append(key)
        return self.measured[key]

    def _outcome(self, metrics: Mapping[str, Any], error: str | None) -> Outcome:
        broken = self.limits.violations(metrics) if self.limits else []
        if broken:
            return Outcome("infeasible", dict(metrics), "; ".join(broken))
        if error is not None:
            return Outcome("failed", dict(metrics), str(error))
        try:
            finite = math.isfinite(self._signed(metrics)) and all(math.isfinite(g.signed(metrics))
                                                                  for g in self.goals)
        except (KeyError, TypeError, ValueError):
            finite = False
        if not finite:
            names = [self.objective, *(g.metric for g in self.goals),
                     *([self.reward.cost_metric] if self.reward else [])]
            described = ", ".join(f"{name!r} is {metrics.get(name)!r}" for name in dict.fromkeys(names))
            return Outcome("failed", dict(metrics), f"objective {described}")
        return Outcome("ok", dict(metrics))

    def _record(self, trial_id: int, outcome: Outcome) -> None:
        self._record_outcome(trial_id, outcome)
        self._note_result(trial_id, outcome)  # then the trials held for it, in order

    def _record_outcome(self, trial_id: int, outcome: Outcome) -> None:
        self.outcomes[trial_id] = outcome
        if trial_id in self._reissue:
            self._reissue.remove(trial_id)
        if self.rung_rule is not None:
            self.rung_rule.forget(trial_id)
        if trial_id in self.rung_results:  # already in the population since its first rung
            if outcome.status != "ok" and trial_id in self._leaders:  # a failed trial leads no rung
                self._recount_leaders()
            return
        if outcome.status != "ok":
            return
        self._consider_for_best(trial_id, 0)
        self._accept(trial_id)

    def _write(self, event: dict[str, Any]) -> None:
        if self._journal is not None:
            self._journal.append(event)
