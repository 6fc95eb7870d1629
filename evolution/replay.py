"""Resume: rebuild an algorithm by replaying its journal through the same code, so the state (RNG
included) comes back identical; trials that were asked but never told are handed out again, once,
with the same id and genotype. One function per kind of event.

Reads the journal only: it must not write events of its own (the resumed algorithm appends from
where the intact journal ends). Pure Python: no TensorFlow, no Ray.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from evolution.algorithms import ALGORITHMS
from evolution.base import JOURNAL_VERSION, SearchAlgorithm
from evolution.journal import Journal, JournalError, JournalLock, read_journal
from evolution.objectives import MnasReward
from evolution.records import Measure, Outcome, Trial, as_json
from evolution.rungs import Rungs
from evolution.target_race import TargetRace
from searchspace import RecordedSpace, space_from_config

log = logging.getLogger(__name__)


def resume(journal_path: str, fsync: bool = True, read_only: bool = False,
           lock: JournalLock | None = None, measure: Measure | None = None) -> SearchAlgorithm:
    """Rebuild an algorithm by replaying its journal, then keep appending to it, holding its `lock`
    (taken before reading unless given; JournalLocked names another writer). With `read_only`,
    take no lock and leave the file alone: for reading a search that may still be running, or one
    whose journal two writers damaged (duplicates are skipped with a warning, the first one counts).

    A search with size limits needs its `measure` again to propose new trials (the replay itself
    takes the figures from the journal).

    Raises JournalError naming the line when the journal is damaged or replay diverges.
    """
    if not read_only:
        lock = lock or JournalLock(journal_path)
    try:
        algorithm, intact_bytes = _replay(journal_path, read_only, measure)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    if not read_only:
        algorithm._journal = Journal(journal_path, intact_bytes, fsync=fsync, lock=lock)
    algorithm._finish_decided()
    return algorithm


@dataclass
class _Replay:
    """One replay in progress: the algorithm, where the journal is, and whether to be lenient
    (trust the journal over the replay: skip a repeated ask or tell and take an ask's genotype as
    written, what two drivers on one journal leave behind, with a warning each)."""

    algorithm: SearchAlgorithm
    path: str
    lenient: bool
    number: int = 1

    def fail_or_skip(self, problem: str, warning: str, trial_id: Any) -> bool:
        """Raise JournalError naming the line; lenient: warn and return True (skip the event)."""
        if not self.lenient:
            raise JournalError(f"{self.path}:{self.number}: {problem}")
        log.warning("%s:%d: %s", self.path, self.number, warning.format(trial_id))
        return True

    def recorded_trial(self, event: dict[str, Any]) -> Trial:
        genotype = self.algorithm.space.genotype_from_json(event["genotype"])
        return Trial(event["trial_id"], genotype, event.get("parent_id"), event.get("mutation", "random"),
                     stops=event.get("stops"), screened=tuple(event.get("screened", ())))

    def ask(self, event: dict[str, Any]) -> None:
        algorithm, trial_id = self.algorithm, event["trial_id"]
        if (self.lenient or isinstance(algorithm.space, RecordedSpace)) and trial_id in algorithm.trials:
            self.fail_or_skip("", "trial {} asked again; skipped", trial_id)
            return
        if isinstance(algorithm.space, RecordedSpace):  # read only, and no space to propose from
            algorithm.trials[trial_id] = self.recorded_trial(event)
            return
        trial = algorithm._new_trial()
        if (trial.trial_id != trial_id or as_json(trial.genotype.to_json()) != event["genotype"]
                or as_json(trial.stops or {}) != event.get("stops", {})):
            self.fail_or_skip(f"replay diverged: trial {trial_id} does not match what the algorithm proposes",
                              "trial {} differs from the replay; taken as written", trial_id)
            del algorithm.trials[trial.trial_id]
            algorithm.trials[trial_id] = self.recorded_trial(event)

    def tell(self, event: dict[str, Any]) -> None:
        algorithm, trial_id = self.algorithm, event["trial_id"]
        outcome = Outcome(event["status"], event.get("metrics") or {}, event.get("error"), event.get("time"),
                          event.get("reused_from"))
        if trial_id not in algorithm.trials or trial_id in algorithm.outcomes:
            self.fail_or_skip("tell for a trial not pending", "trial {} told again or never asked; skipped", trial_id)
            return
        algorithm._record(trial_id, outcome)

    def rung(self, event: dict[str, Any]) -> None:
        algorithm, trial_id, rung = self.algorithm, event["trial_id"], event["rung"]
        if (trial_id not in algorithm.trials or trial_id in algorithm.outcomes or algorithm.rungs is None
                or rung != len(algorithm.decisions.get(trial_id, ()))):
            self.fail_or_skip("rung result for a trial not at that rung", "rung result of trial {} out of place; "
                              "skipped", trial_id)
            return
        decision = algorithm._decide(trial_id, rung, event["metrics"])
        if decision != event["decision"] and not self.lenient:
            raise JournalError(f"{self.path}:{self.number}: replay diverged: trial {trial_id} rung {rung} "
                               f"was decided {event['decision']!r}, the replay decides {decision!r}")

    def continuation(self, event: dict[str, Any]) -> None:
        promoted = self.algorithm._promotion()
        if promoted != (event["trial_id"], event["rung"]):
            self.fail_or_skip(f"replay diverged: trial {event['trial_id']} went on from rung {event['rung']}, "
                              f"the replay continues {promoted}", "trial {} continued out of place; skipped",
                              event["trial_id"])
            return
        self.algorithm._continue(*promoted)

    def retry(self, event: dict[str, Any]) -> None:
        outcome = self.algorithm.outcomes.get(event["trial_id"])
        if outcome is None or outcome.status != "failed":
            self.fail_or_skip("retry of a trial that did not fail", "retry of trial {} out of place; skipped",
                              event["trial_id"])
            return
        del self.algorithm.outcomes[event["trial_id"]]  # in flight again: re-issued after the replay

    def apply(self, event: dict[str, Any]) -> None:
        handlers: dict[str, Callable[[dict[str, Any]], None] | None] = {
            "ask": self.ask, "tell": self.tell, "rung": self.rung, "continue": self.continuation,
            "retry": self.retry, "reissue": None, "reject": None}  # rejections: through the replayed proposals
        kind = event["event"]
        if kind not in handlers:
            raise JournalError(f"{self.path}:{self.number}: unknown event {kind!r}")
        if handlers[kind] is not None:
            handlers[kind](event)


def _build(start: dict[str, Any], path: str, lenient: bool, measure: Measure | None) -> SearchAlgorithm:
    """The algorithm the start event describes (old journals without a rung rule: the stopping rule)."""
    if start.get("version") != JOURNAL_VERSION:
        raise JournalError(f"{path}:1: journal version {start.get('version')!r} is not supported")
    try:
        cls = ALGORITHMS[start["algorithm"]]
        space = space_from_config(start["space"], recorded=lenient)
        algorithm = cls(space, seed=start["seed"], objective=start["objective"], mode=start["mode"],
                        rungs=Rungs.from_config(start.get("rungs")), rung_rule=start.get("rung_rule"),
                        reward=MnasReward.from_config(start.get("reward")), limits=start.get("limits"),
                        measure=measure, initial=start.get("initial", ()), repeats=start.get("repeats", "train"),
                        race=TargetRace.from_config(start.get("race")), **start["params"])
    except (KeyError, TypeError, ValueError) as err:
        raise JournalError(f"{path}:1: bad start event: {err}") from None
    algorithm.started_at = start.get("time")
    return algorithm


def _remember_figures(algorithm: SearchAlgorithm, events: list[dict[str, Any]]) -> None:
    """What was measured before: a replay proposes the same without measuring."""
    for event in events:
        if event.get("event") in ("ask", "reject") and "figures" in event:
            try:
                key = algorithm.space.genotype_from_json(event["genotype"]).key()
            except (KeyError, TypeError, ValueError):
                continue  # the ask itself is checked when it is replayed
            algorithm.measured[key] = event["figures"]
    for event in events:  # children a proposal measured and passed over (evolution/proposal.py LimitTournament)
        if event.get("event") == "ask":
            algorithm.measured.update(event.get("measured") or {})


def _replay(journal_path: str, lenient: bool, measure: Measure | None = None) -> tuple[SearchAlgorithm, int]:
    """The algorithm as the journal left it, and the journal's intact length in bytes."""
    events, intact_bytes = read_journal(journal_path)
    if not events or events[0].get("event") != "start":
        raise JournalError(f"{journal_path}:1: the journal does not begin with a start event")
    algorithm = _build(events[0], journal_path, lenient, measure)
    _remember_figures(algorithm, events[1:])
    replay = _Replay(algorithm, journal_path, lenient)
    for replay.number, event in enumerate(events[1:], start=2):
        try:
            replay.apply(event)
        except KeyError as err:
            raise JournalError(f"{journal_path}:{replay.number}: event lacks field {err}") from None
    algorithm._reissue.extend(algorithm.pending())
    return algorithm, intact_bytes
