"""Search algorithms behind one ask/tell interface keyed by trial id, with a durable journal.

`ask()` hands out a trial, `tell(trial_id, metrics | error)` records its result. With rungs
(multi-fidelity, evolution/rungs.py), a trial also `report`s its result at each rung and is told
whether to go on; a trial joins the population with its first rung's result, and members are
compared like with like: a tournament compares its sample at the highest rung all of them reached
(a 200-epoch accuracy always beats a 12-epoch one, whatever the cells, so comparing across rungs
would only reward having been promoted). The pick (`best()`) follows the same rule: the best
result at the first rung, replaced by the best at the next rung whenever the pick has reached that
rung too, and so on up; a cell is displaced only by one that beat it where both were measured.
Aging is unchanged: the oldest member leaves, whatever rung it reached.

Costs: with `limits` (evolution/objectives.py), a proposal whose figures from `measure(genotype)`
(size, before any training) break a limit is rejected and another is proposed; the rejection is
journaled with its figures and counted (`rejected`), not handed out. A result that breaks a limit
the measure could not judge (latency, measured by the trial) is `infeasible`: recorded with its
figures, neither in the population nor a failure. With `reward` (MnasNet's), the fitness is the
objective scaled by a cost. `ParetoEvolution` keeps several goals and selects by non-dominated
rank and crowding distance (NSGA-II's order) instead of one score.

Every ask, rejection, rung decision and accepted tell is appended to the journal; `resume(path)` replays the
journal through the same code, so the state (RNG included) comes back identical, and trials that
were asked but never told are handed out again, once, with the same id and genotype.

Pure Python: this module must not import TensorFlow or Ray.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Callable, ClassVar, Mapping, Sequence

from evolution.journal import Journal, JournalError, JournalLock, read_journal
from evolution.objectives import Goal, Limits, MnasReward, parse_goals
from evolution.pareto import crowding_distances, front, non_dominated_ranks, nsga2_order_key
from evolution.rungs import CONTINUE, STOP, Promotions, Rungs
from evolution.steps import age_out, draw_sample, fittest
from searchspace import RecordedSpace, SearchSpace, space_from_config

log = logging.getLogger(__name__)
JOURNAL_VERSION = 1
MAX_REJECTIONS = 1000  # proposals in a row that break the limits: the limits leave no room, a config error
Measure = Callable[[Any], Mapping[str, float]]  # a genotype's figures known before training (size)


@dataclass(frozen=True)
class Trial:
    trial_id: int
    genotype: Any
    parent_id: int | None
    mutation: str  # "random" for a sampled genotype, else the space's mutation description


@dataclass(frozen=True)
class Outcome:
    status: str  # "ok", "failed" (NaN, OOM, timeout, an error) or "infeasible" (over a limit)
    metrics: Mapping[str, Any]
    error: str | None = None
    told_at: float | None = None  # wall-clock time of the tell (seconds since the epoch)


class SearchAlgorithm:
    """Bookkeeping shared by every algorithm; subclasses supply `_propose` and `_accept`."""

    name: ClassVar[str]
    param_names: ClassVar[tuple[str, ...]] = ()  # constructor arguments of the algorithm itself

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
        reward: MnasReward | None = None,
        limits: Limits | Mapping[str, float] | None = None,
        measure: Measure | None = None,
        initial: Sequence[Any] = (),
    ) -> None:
        if mode not in ("max", "min"):
            raise ValueError(f"mode: must be 'max' or 'min', got {mode!r}")
        self.space = space
        self.initial = tuple(genotype_of(space, g, f"initial[{i}]") for i, g in enumerate(initial))
        self._initial_next = 0  # the first proposals are the initial genotypes, in order
        self.reward = reward
        self.limits = limits if isinstance(limits, Limits) else Limits(dict(limits or {}))
        self.measure = measure
        self.measured: dict[str, dict[str, float]] = {}  # figures from `measure`, by genotype key
        self.rejected = 0  # proposals turned down for breaking a limit
        self.seed = seed
        self.objective = objective
        self.mode = mode
        self.rng = random.Random(seed)
        self.rungs = rungs
        self.promotions = Promotions(rungs) if rungs else None
        self.trials: dict[int, Trial] = {}
        self.outcomes: dict[int, Outcome] = {}
        self.rung_results: dict[int, list[dict[str, Any]]] = {}  # a trial's metrics at each rung reached
        self.decisions: dict[int, list[str]] = {}  # and the decision taken at each
        self._reissue: deque[int] = deque()
        self._requeued: set[int] = set()  # trials put back once this run after their worker was lost
        self._leaders: list[int | None] = [None] * (len(rungs.epochs) if rungs else 1)  # best at each rung
        self._journal: Journal | None = None
        self.started_at: float | None = round(time.time(), 3)
        if journal_path is not None:
            lock = journal_lock or JournalLock(journal_path)  # before looking: no other writer then
            if os.path.exists(journal_path) and os.path.getsize(journal_path) > 0:
                lock.release()
                raise FileExistsError(f"{journal_path}: journal exists; use resume() to continue it")
            self._journal = Journal(journal_path, fsync=fsync, lock=lock)
            self._journal.append({"event": "start", "version": JOURNAL_VERSION, **self.config(),
                                  "time": self.started_at})

    # --- what subclasses provide -------------------------------------------------------------

    def params(self) -> dict[str, Any]:
        """Constructor arguments beyond the space, seed, objective and mode."""
        return {}

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
            "reward": self.reward.to_config() if self.reward else None,
            "limits": self.limits.to_config(),
            "initial": [g.to_json() for g in self.initial],
        }

    @property
    def goals(self) -> tuple[Goal, ...]:
        """The measures a result must have, and which way is better (one without Pareto)."""
        return (Goal(self.objective, self.mode),)

    def ask(self) -> Trial:
        """The next trial: a re-issued in-flight one first, else a new proposal."""
        if self._reissue:
            trial = self.trials[self._reissue.popleft()]
            self._write({"event": "reissue", "trial_id": trial.trial_id})
            return trial
        trial = self._new_trial()
        self._write(
            {
                "event": "ask",
                "trial_id": trial.trial_id,
                "parent_id": trial.parent_id,
                "mutation": trial.mutation,
                "genotype": trial.genotype.to_json(),
                **({"figures": self.measured[trial.genotype.key()]} if trial.genotype.key() in self.measured else {}),
            }
        )
        return trial

    def requeue(self, trial_id: int) -> bool:
        """Put an in-flight trial whose worker was lost (not the candidate's fault) back in line: the
        next `ask` re-issues it with the same id. Once per trial in a run; False when it is not in
        flight or was put back already (the caller then records it failed)."""
        if trial_id not in self.trials or trial_id in self.outcomes or trial_id in self._requeued:
            return False
        self._requeued.add(trial_id)
        if trial_id not in self._reissue:
            self._reissue.append(trial_id)
        return True

    def waiting_reissue(self) -> int:
        """How many in-flight trials the next asks re-issue."""
        return len(self._reissue)

    def tell(
        self, trial_id: int, metrics: Mapping[str, Any] | None = None, error: str | None = None
    ) -> bool:
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
        self._write(
            {
                "event": "tell",
                "trial_id": trial_id,
                "status": outcome.status,
                "metrics": dict(outcome.metrics),
                "error": outcome.error,
                "time": outcome.told_at,
            }
        )
        self._record(trial_id, outcome)
        return True

    def report(self, trial_id: int, rung: int, metrics: Mapping[str, Any]) -> str:
        """A trial's result at rung `rung` (its metrics may carry `seconds_per_epoch`, the cost the
        rule weighs; 1 when absent): CONTINUE to train it on to the next rung, or STOP. A rung
        already reported (a resumed trial reporting again) gets the decision taken then; a result
        without a finite objective, a trial not in flight or a rung out of order gets STOP."""
        if self.rungs is None:
            raise ValueError("report: this search has no rungs")
        if trial_id not in self.trials or trial_id in self.outcomes:
            log.warning("report: trial %s is not in flight; told to stop", trial_id)
            return STOP
        done = self.decisions.get(trial_id, [])
        if rung < len(done):
            log.info("report: trial %s rung %d was decided before (%s)", trial_id, rung, done[rung])
            return done[rung]
        stopped = bool(done) and done[-1] == STOP
        if stopped or rung != len(done) or rung > self.rungs.top or self._outcome(metrics, None).status != "ok":
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
        decision = self.promotions.decide(rung, self._signed(metrics), cost)
        self.rung_results.setdefault(trial_id, []).append(metrics)
        self.decisions.setdefault(trial_id, []).append(decision)
        if rung == 0:
            self._accept(trial_id)
        self._consider_for_best(trial_id, rung)
        return decision

    def highest_rung(self, trial_id: int) -> int:
        """The highest rung the trial has a result at (0 without rungs)."""
        return max(0, len(self.rung_results.get(trial_id, ())) - 1)

    def value_at(self, trial_id: int, rung: int) -> float:
        """The trial's objective at `rung`, signed so that larger is better."""
        if trial_id in self.rung_results:
            return self._signed(self.rung_results[trial_id][rung])
        return self.fitness(trial_id)

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

    def pending(self) -> list[int]:
        """Ids of trials asked but not yet told."""
        return [t for t in self.trials if t not in self.outcomes]

    def completed(self) -> int:
        return len(self.outcomes)

    def best(self) -> tuple[Trial, Outcome] | None:
        """The pick (without rungs: the best successful trial by the objective; with rungs: the first
        rung's leader, displaced by each higher rung's leader while the pick reached that rung too).
        A trial still training at a higher rung is picked with its last rung's result (an Outcome
        without told_at)."""
        if self._best_id is None:
            return None
        outcome = self.outcomes.get(self._best_id) or Outcome("ok", self.rung_results[self._best_id][-1])
        return self.trials[self._best_id], outcome

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
            if self._initial_next < len(self.initial):  # seeds of the first population, before random ones
                trial = Trial(len(self.trials), self.initial[self._initial_next], None, "initial")
                self._initial_next += 1
            else:
                trial = self._propose(len(self.trials))
            broken = self.limits.violations(self._figures(trial.genotype)) if self.limits else []
            if not broken:
                self.trials[trial.trial_id] = trial
                return trial
            self.rejected += 1
            self._write({"event": "reject", "parent_id": trial.parent_id, "mutation": trial.mutation,
                         "genotype": trial.genotype.to_json(), "figures": self.measured[trial.genotype.key()],
                         "reason": "; ".join(broken)})
        raise ValueError(f"limits: {MAX_REJECTIONS} proposals in a row break {self.limits.to_config()}; "
                         "no candidate fits, loosen the limits")

    def _figures(self, genotype: Any) -> Mapping[str, float]:
        """What `measure` says of the genotype before training (cached by key; the journal keeps
        them, so a replay needs no measure)."""
        key = genotype.key()
        if key not in self.measured:
            if self.measure is None:
                return {}
            self.measured[key] = {k: float(v) for k, v in self.measure(genotype).items()}
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
            shown = {name: metrics.get(name) for name in dict.fromkeys([self.objective, *(g.metric for g in self.goals),
                                                                      *([self.reward.cost_metric] if self.reward else [])])}
            described = ", ".join(f"{name!r} is {value!r}" for name, value in shown.items())
            return Outcome("failed", dict(metrics), f"objective {described}")
        return Outcome("ok", dict(metrics))

    def _record(self, trial_id: int, outcome: Outcome) -> None:
        self.outcomes[trial_id] = outcome
        if trial_id in self._reissue:
            self._reissue.remove(trial_id)
        if trial_id in self.rung_results:  # already in the population since its first rung
            if outcome.status != "ok" and trial_id in self._leaders:  # a failed trial leads no rung
                self._leaders = [None] * len(self._leaders)
                for other, results in self.rung_results.items():
                    for rung in range(len(results)):
                        self._consider_for_best(other, rung)
            return
        if outcome.status != "ok":
            return
        self._consider_for_best(trial_id, 0)
        self._accept(trial_id)

    def _consider_for_best(self, trial_id: int, rung: int) -> None:
        outcome = self.outcomes.get(trial_id)
        if outcome is not None and outcome.status != "ok":
            return
        leader = self._leaders[rung]
        if leader is None or self.value_at(trial_id, rung) > self.value_at(leader, rung):
            self._leaders[rung] = trial_id

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

    def _write(self, event: dict[str, Any]) -> None:
        if self._journal is not None:
            self._journal.append(event)


class RegularizedEvolution(SearchAlgorithm):
    """Algorithm 1 of Real et al. 2019, asynchronous.

    Until the population holds `population_size` successful trials, `ask` samples at random.
    Afterwards it draws `sample_size` members with replacement, takes the fittest as parent and
    mutates it once. The population is the most recent successful trials; the oldest leaves.
    """

    name = "regularized_evolution"
    param_names = ("population_size", "sample_size")

    def __init__(
        self, space: SearchSpace, population_size: int = 100, sample_size: int = 25, **kwargs: Any
    ) -> None:
        if population_size < 1:
            raise ValueError(f"population_size: must be at least 1, got {population_size}")
        if not 1 <= sample_size <= population_size:
            raise ValueError(
                f"sample_size: must be in 1..population_size ({population_size}), got {sample_size}"
            )
        self.population_size = population_size
        self.sample_size = sample_size
        self.population: deque[int] = deque()
        super().__init__(space, **kwargs)

    def params(self) -> dict[str, Any]:
        return {"population_size": self.population_size, "sample_size": self.sample_size}

    def _propose(self, trial_id: int) -> Trial:
        if len(self.population) < self.population_size:
            return Trial(trial_id, self.space.sample(self.rng), None, "random")
        sample = draw_sample(self.population, self.sample_size, self.rng)
        common = min(self.highest_rung(member) for member in sample)  # compare like with like
        parent_id = fittest(sample, lambda member: self.value_at(member, common))
        child, description = self.space.mutate(self.trials[parent_id].genotype, self.rng)
        return Trial(trial_id, child, parent_id, description)

    def _accept(self, trial_id: int) -> None:
        self.population.append(trial_id)
        age_out(self.population, self.population_size)


class ParetoEvolution(RegularizedEvolution):
    """Regularized evolution over several goals (`objectives`, e.g. val_accuracy:max,latency_ms:min):
    the same aging population, sample with replacement and one mutation per child, but the
    tournament's winner is the member of the sample with the lowest non-dominated rank within the
    population, ties broken by the larger crowding distance (NSGA-II's crowded-comparison order,
    Deb et al. 2002), then by draw order. Each member is judged against the whole population, not
    by a score of its own. `best()` is the best by the first goal; `front()` the cells no other
    beats on every goal."""

    name = "pareto_evolution"
    param_names = ("population_size", "sample_size", "objectives")

    def __init__(self, space: SearchSpace, population_size: int = 100, sample_size: int = 25,
                 objectives: Sequence[str] = ("val_accuracy:max", "latency_ms:min"), **kwargs: Any) -> None:
        self._goals = parse_goals(list(objectives))
        if len(self._goals) < 2:
            raise ValueError(f"objectives: Pareto evolution needs at least two, got {list(objectives)}")
        if kwargs.get("rungs") or kwargs.get("reward"):
            raise ValueError("pareto_evolution: rungs and a reward are for one objective; give --objectives only")
        kwargs.update(objective=self._goals[0].metric, mode=self._goals[0].mode)
        super().__init__(space, population_size, sample_size, **kwargs)

    @property
    def goals(self) -> tuple[Goal, ...]:
        return self._goals

    def params(self) -> dict[str, Any]:
        return {**super().params(), "objectives": [str(g) for g in self._goals]}

    def _propose(self, trial_id: int) -> Trial:
        if len(self.population) < self.population_size:
            return Trial(trial_id, self.space.sample(self.rng), None, "random")
        sample = draw_sample(self.population, self.sample_size, self.rng)
        members = list(self.population)
        points = [tuple(g.signed(self.outcomes[m].metrics) for g in self._goals) for m in members]
        ranks = non_dominated_ranks(points)
        crowding = crowding_distances(points, ranks)
        order = {m: nsga2_order_key(ranks[i], crowding[i]) for i, m in enumerate(members)}
        parent_id = min(sample, key=order.__getitem__)  # the first drawn among equals
        child, description = self.space.mutate(self.trials[parent_id].genotype, self.rng)
        return Trial(trial_id, child, parent_id, description)


class RandomSearch(SearchAlgorithm):
    """Uniform random sampling: the paper's control."""

    name = "random"

    def _propose(self, trial_id: int) -> Trial:
        return Trial(trial_id, self.space.sample(self.rng), None, "random")


ALGORITHMS: dict[str, type[SearchAlgorithm]] = {
    RegularizedEvolution.name: RegularizedEvolution,
    RandomSearch.name: RandomSearch,
    ParetoEvolution.name: ParetoEvolution,
}


def as_json(value: Any) -> Any:
    """`value` as it comes back from JSON (tuples as lists): how a journal's contents compare."""
    return json.loads(json.dumps(value))


def genotype_of(space: SearchSpace, genotype: Any, where: str = "genotype") -> Any:
    """`genotype` (one of the space's, or its JSON) checked against `space`; errors say `where`."""
    data = genotype.to_json() if hasattr(genotype, "to_json") else genotype
    try:
        return space.genotype_from_json(data)
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{where}: not a genotype of the {space.name} space: {err}") from None


def make_algorithm(name: str, space: SearchSpace, params: Mapping[str, Any] | None = None,
                   **kwargs: Any) -> SearchAlgorithm:
    """The algorithm `name`, given those of `params` it takes (P and S mean nothing to random)."""
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm: unknown {name!r}; known: {sorted(ALGORITHMS)}")
    cls = ALGORITHMS[name]
    return cls(space, **{k: v for k, v in (params or {}).items() if k in cls.param_names}, **kwargs)


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


def _replay(journal_path: str, lenient: bool, measure: Measure | None = None) -> tuple[SearchAlgorithm, int]:
    """The algorithm as the journal left it, and the journal's intact length in bytes. `lenient`
    trusts the journal over the replay: it skips a repeated ask or tell and takes an ask's genotype
    as written (what two drivers on one journal leave behind), with a warning each."""
    events, intact_bytes = read_journal(journal_path)
    if not events or events[0].get("event") != "start":
        raise JournalError(f"{journal_path}:1: the journal does not begin with a start event")
    start = events[0]
    if start.get("version") != JOURNAL_VERSION:
        raise JournalError(f"{journal_path}:1: journal version {start.get('version')!r} is not supported")
    try:
        cls = ALGORITHMS[start["algorithm"]]
        space = space_from_config(start["space"], recorded=lenient)
        algorithm = cls(
            space,
            seed=start["seed"],
            objective=start["objective"],
            mode=start["mode"],
            rungs=Rungs.from_config(start.get("rungs")),
            reward=MnasReward.from_config(start.get("reward")),
            limits=start.get("limits"),
            measure=measure,
            initial=start.get("initial", ()),
            **start["params"],
        )
    except (KeyError, TypeError, ValueError) as err:
        raise JournalError(f"{journal_path}:1: bad start event: {err}") from None
    algorithm.started_at = start.get("time")
    for event in events[1:]:  # what was measured before: a replay proposes the same without measuring
        if event.get("event") in ("ask", "reject") and "figures" in event:
            try:
                key = algorithm.space.genotype_from_json(event["genotype"]).key()
            except (KeyError, TypeError, ValueError):
                continue  # the ask itself is checked below
            algorithm.measured[key] = event["figures"]
    for number, event in enumerate(events[1:], start=2):
        kind = event["event"]
        try:
            if kind == "ask" and isinstance(space, RecordedSpace):  # read only, and no space to propose from
                if event["trial_id"] in algorithm.trials:  # two drivers' repeat: the first one counts
                    log.warning("%s:%d: trial %s asked again; skipped", journal_path, number, event["trial_id"])
                    continue
                algorithm.trials[event["trial_id"]] = Trial(event["trial_id"], space.genotype_from_json(
                    event["genotype"]), event.get("parent_id"), event.get("mutation", "random"))
            elif kind == "ask":
                if lenient and event["trial_id"] in algorithm.trials:
                    log.warning("%s:%d: trial %s asked again; skipped", journal_path, number, event["trial_id"])
                    continue
                trial = algorithm._new_trial()
                if trial.trial_id != event["trial_id"] or as_json(trial.genotype.to_json()) != event["genotype"]:
                    if not lenient:
                        raise JournalError(
                            f"{journal_path}:{number}: replay diverged: trial {event['trial_id']} "
                            "does not match what the algorithm proposes"
                        )
                    log.warning("%s:%d: trial %s differs from the replay; taken as written", journal_path,
                                number, event["trial_id"])
                    del algorithm.trials[trial.trial_id]
                    algorithm.trials[event["trial_id"]] = Trial(
                        event["trial_id"], algorithm.space.genotype_from_json(event["genotype"]),
                        event.get("parent_id"), event.get("mutation", "random"))
            elif kind == "tell":
                outcome = Outcome(event["status"], event.get("metrics") or {}, event.get("error"), event.get("time"))
                if event["trial_id"] not in algorithm.trials or event["trial_id"] in algorithm.outcomes:
                    if not lenient:
                        raise JournalError(f"{journal_path}:{number}: tell for a trial not pending")
                    log.warning("%s:%d: trial %s told again or never asked; skipped", journal_path, number,
                                event["trial_id"])
                    continue
                algorithm._record(event["trial_id"], outcome)
            elif kind == "rung":
                trial_id, rung = event["trial_id"], event["rung"]
                if (trial_id not in algorithm.trials or trial_id in algorithm.outcomes
                        or rung != len(algorithm.decisions.get(trial_id, ())) or algorithm.rungs is None):
                    if not lenient:
                        raise JournalError(f"{journal_path}:{number}: rung result for a trial not at that rung")
                    log.warning("%s:%d: rung result of trial %s out of place; skipped", journal_path, number, trial_id)
                    continue
                decision = algorithm._decide(trial_id, rung, event["metrics"])
                if decision != event["decision"] and not lenient:
                    raise JournalError(f"{journal_path}:{number}: replay diverged: trial {trial_id} rung {rung} "
                                       f"was decided {event['decision']!r}, the replay decides {decision!r}")
            elif kind not in ("reissue", "reject"):  # rejections come back through the replayed proposals
                raise JournalError(f"{journal_path}:{number}: unknown event {kind!r}")
        except KeyError as err:
            raise JournalError(f"{journal_path}:{number}: event lacks field {err}") from None
    algorithm._reissue.extend(algorithm.pending())
    return algorithm, intact_bytes
