"""The controller under random asynchronous schedules (Hypothesis's stateful testing): a driver
that asks, reports rungs, tells results (good, NaN, errors, over a limit), sends duplicate and late
ones, loses workers (requeue), retries failures, and kills the search at any event and resumes it
from the journal, over every algorithm, tournament, rung rule and repeats setting. After every step
a strict replay of the journal reaches the live state (`state_of`), no trial is in the population
twice, no trial is handed out while it trains or after its result, and every hand-out and result is
in the journal.

`ControllerMachine` is the state machine; the suite runs a short derandomized version, and
benchmarks/controller_simulation.py the long one (`run_schedules`).
"""

from __future__ import annotations

import json
import os
import pprint
import random
import shutil
import tempfile
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from evolution import ALGORITHMS, RUNG_RULES, MnasReward, Rungs, make_algorithm, resume
from evolution.journal import read_journal
from evolution.replay import _replay
from evolution.repeats import REPEATS
from evolution.rungs import CONTINUE, PAUSE, STOP
from searchspace import ChoiceSpace, NasBench201Space

MAX_TRIALS = 40  # a schedule asks for no new trial past this many
SPACES = {"choice": lambda: ChoiceSpace({"a": [0, 1, 2], "b": [0, 1, 2], "c": [0, 1, 2], "d": [0, 1]}),
          "nasbench201": NasBench201Space}  # 54 cells (repeats are common) and 15,625
LATENCY_LIMIT, PARAMS_LIMIT = 8.0, 8000.0


def _unit(*parts: Any) -> float:
    """A number in [0, 1) fixed by `parts`."""
    return random.Random("/".join(map(str, parts))).random()


def size_of(genotype: Any) -> dict[str, float]:
    """The params measure, known before training."""
    return {"params": 1000 * (1 + 9 * _unit("size", genotype.key()))}


def metrics_of(genotype: Any, trial_id: int, rung: int, kind: str = "ok") -> dict[str, float]:
    """A result: accuracy by the cell with a little noise per trial and rung; `kind` "nan" has no
    finite objective, "over" breaks the latency limit."""
    key = genotype.key()
    accuracy = 0.5 * _unit(key) + 0.1 * _unit(key, trial_id, rung) + 0.05 * rung
    latency = LATENCY_LIMIT + 1 if kind == "over" else 1 + 6.9 * _unit("latency", key)
    return {"val_accuracy": float("nan") if kind == "nan" else accuracy, "latency_ms": latency, **size_of(genotype)}


@st.composite
def configs(draw: Any) -> dict[str, Any]:
    """A search's settings: every algorithm, tournament, rung rule (or none), repeats setting
    (reuse only without rungs), limits, a reward, initial genotypes with duplicates."""
    algorithm = draw(st.sampled_from(sorted(ALGORITHMS)))
    rule = draw(st.sampled_from([None, None, *sorted(RUNG_RULES)]))
    kwargs: dict[str, Any] = {"seed": draw(st.integers(0, 2**16)), "rung_rule": rule,
                              "rungs": Rungs(draw(st.sampled_from([(1, 3), (1, 2, 4)]))) if rule else None,
                              "repeats": "train" if rule else draw(st.sampled_from(REPEATS))}
    params: dict[str, Any] = {}
    if algorithm != "random":
        size = draw(st.integers(1, 4))
        params.update(population_size=size, sample_size=draw(st.integers(1, size)), initial_last=draw(st.booleans()))
    if algorithm == "pareto_evolution":
        tournament = draw(st.sampled_from(["nsga2", "limit"]))
        params.update(objectives=["val_accuracy:max", f"{draw(st.sampled_from(['params', 'latency_ms']))}:min"],
                      tournament=tournament, offspring=draw(st.sampled_from([1, 3])) if tournament == "limit" else 1)
    elif draw(st.booleans()):
        kwargs["reward"] = MnasReward("latency_ms", 5.0)
    sized = draw(st.booleans())
    limits = {"params": PARAMS_LIMIT} if draw(st.booleans()) else {}
    limits.update({"latency_ms": LATENCY_LIMIT} if draw(st.booleans()) else {})
    space = draw(st.sampled_from(sorted(SPACES)))
    pool = [SPACES[space]().sample(random.Random(i)) for i in range(2)]
    initial = [pool[0]] * draw(st.integers(0, 3)) + [pool[1]] * draw(st.integers(0, 1))  # 3 twins: 1 in 4
    return {"algorithm": algorithm, "space": space, "params": params, "sized": sized, "limits": limits,
            "initial": initial, "concurrency": draw(st.integers(1, 4)), **kwargs}


def state_of(algorithm: Any) -> dict[str, Any]:
    """What a replay must bring back, by name: trials, outcomes (in order), population, random
    state, rung state (results, decisions, leaders, the rule's own), and what follows from them."""
    best = algorithm.best()
    rule = algorithm.rung_rule
    return {
        "trials": {t: (x.genotype.key(), x.parent_id, x.mutation) for t, x in algorithm.trials.items()},
        "outcomes": [(t, o.status, json.dumps(o.metrics, sort_keys=True), o.error, o.told_at, o.reused_from)
                     for t, o in algorithm.outcomes.items()],
        "population": list(getattr(algorithm, "population", ())),
        "rng": algorithm.rng.getstate(),
        "rung_results": [(t, json.dumps(r, sort_keys=True)) for t, r in algorithm.rung_results.items()],
        "decisions": algorithm.decisions,
        "leaders": algorithm._leaders,
        "rule": {k: v for k, v in vars(rule).items() if k != "rungs"} if rule else None,
        "pending": algorithm.pending(),
        "paused": algorithm.paused(),
        "initial_next": algorithm._initial_next,
        "rejected": algorithm.rejected,
        "measured": algorithm.measured,
        "first_ok": algorithm._first_ok,
        "best": best[0].trial_id if best else None,
        "front": algorithm.front(),
        "charged": algorithm.charged(),
    }


def assert_same_state(expected: dict[str, Any], got: dict[str, Any], what: str) -> None:
    """Fail naming each part of the state that differs, with both values."""
    differ = {k: {"expected": expected[k], "got": got[k]} for k in expected if expected[k] != got[k]}
    assert not differ, f"{what}: {sorted(differ)} differ:\n{pprint.pformat(differ, width=120)}"


class ControllerMachine(RuleBasedStateMachine):
    """A driver and its workers around one search; `counts` adds up what every schedule did."""

    counts: Counter = Counter()

    @initialize(config=configs())
    def start(self, config: dict[str, Any]) -> None:
        self.config, self.folder = config, tempfile.mkdtemp(prefix="controller-")
        self.path = os.path.join(self.folder, "journal.jsonl")
        self.measure = size_of if config["sized"] else None
        self.search = make_algorithm(
            config["algorithm"], SPACES[config["space"]](), config["params"], seed=config["seed"],
            rungs=config["rungs"], rung_rule=config["rung_rule"], repeats=config["repeats"],
            reward=config.get("reward"), limits=config["limits"], measure=self.measure, initial=config["initial"],
            journal_path=self.path, fsync=False)
        self.running: dict[int, int] = {}  # handed out and training: trial -> the next rung it reports
        self.ended: dict[int, dict[str, Any]] = {}  # running trials whose run ended (STOP): the metrics to tell
        self.told: dict[int, tuple[dict[str, Any], str | None]] = {}  # accepted results, to send again
        self.lost: set[int] = set()  # put back after their worker was lost: a late result may still come
        self.requeued: set[int] = set()  # put back in this run of the search
        self.handouts: Counter = Counter()
        self.since_kill = 0  # events since the last kill: a kill follows at least four
        self.counts["schedules"] += 1
        self.counts.update([f"algorithm {config['algorithm']}", f"rung rule {config['rung_rule']}",
                            f"repeats {config['repeats']}", f"tournament {config['params'].get('tournament')}"
                            f"/{config['params'].get('offspring')}"])

    def teardown(self) -> None:
        """Close the search; count what its journal holds."""
        if hasattr(self, "search"):
            self.search.close()
            events, _ = read_journal(self.path)
            self.counts.update(f"event {e['event']}" for e in events)
            self.counts.update("child" for e in events if e["event"] == "ask" and e["parent_id"] is not None)
            self.counts.update(f"told {e['status']}" for e in events if e["event"] == "tell")
            self.counts.update("reused" for e in events if e.get("reused_from") is not None)
            shutil.rmtree(self.folder, ignore_errors=True)

    def _pick(self, candidates: Any, pick: int) -> int:
        """One of `candidates` (trial ids), chosen by the drawn number `pick`."""
        ordered = sorted(candidates)
        return ordered[pick % len(ordered)]

    def _genotype(self, trial_id: int) -> Any:
        """The trial's genotype."""
        return self.search.trials[trial_id].genotype

    def _accepted(self, trial_id: int, metrics: dict[str, Any], error: str | None) -> None:
        """Tell a result the search must take: the trial's run is over."""
        assert self.search.tell(trial_id, metrics, error=error), f"trial {trial_id}'s result was refused"
        self.running.pop(trial_id, None)
        self.ended.pop(trial_id, None)
        self.lost.discard(trial_id)
        self.told[trial_id] = (metrics, error)
        self.counts["tells"] += 1

    @precondition(lambda self: hasattr(self, "search") and len(self.running) < self.config["concurrency"])
    @rule()
    def ask(self) -> None:
        """A free worker asks for work: never a trial that trains, has its result, or a twin of one
        that trains (repeats "reuse"), nor one to train on past its rung decision."""
        if len(self.search.trials) >= MAX_TRIALS and not self.search.waiting_reissue():
            return
        trial = self.search.ask()
        t = trial.trial_id
        assert t not in self.running, f"trial {t} handed out while it trains"
        assert t not in self.search.outcomes, f"trial {t} handed out after its result"
        assert trial.start_rung == len(self.search.rung_results.get(t, ())), (t, trial.start_rung)
        last = self.search.decisions.get(t, [CONTINUE])[-1]
        assert last == CONTINUE, f"trial {t} handed out to train on after its rung decision {last!r}"
        if self.search.repeats == "reuse":
            twins = [r for r in self.running if self._genotype(r).key() == trial.genotype.key()]
            assert not twins, f"trial {t} handed out while its twin {twins} trains"
        self.handouts[t] += 1
        self.running[t] = trial.start_rung
        self.counts["asks"] += 1

    @precondition(lambda self: hasattr(self, "search") and self.search.rungs is not None
                  and set(self.running) - set(self.ended))
    @rule(pick=st.integers(0, 99), kind=st.sampled_from(["ok", "ok", "ok", "nan", "over"]))
    def report(self, pick: int, kind: str) -> None:
        """A running trial reports its next rung: good, without a finite objective, or over a limit."""
        t = self._pick(set(self.running) - set(self.ended), pick)
        self._report(t, kind)

    def _report(self, t: int, kind: str) -> None:
        """Trial `t` reports its next rung (`kind` as in `metrics_of`) and does as told."""
        rung = self.running[t]
        metrics = metrics_of(self._genotype(t), t, rung, kind)
        decision = self.search.report(t, rung, metrics)
        self.counts["reports"] += 1
        if decision == CONTINUE:
            assert rung < self.search.rungs.top
            self.running[t] = rung + 1
        elif decision == PAUSE:
            assert t in self.search.paused()
            del self.running[t]
        else:
            assert decision == STOP
            recorded = len(self.search.rung_results.get(t, ())) > rung  # not: no finite objective, over a limit
            self.ended[t] = self.search.rung_results[t][-1] if recorded else metrics

    @precondition(lambda self: hasattr(self, "search") and self.running)
    @rule(pick=st.integers(0, 99), kind=st.sampled_from(["ok", "ok", "nan", "error", "over"]))
    def tell(self, pick: int, kind: str) -> None:
        """A result: without rungs any; with rungs an error any time, else the run's end."""
        if self.search.rungs is not None and kind != "error":
            if not self.ended:
                return
            t = self._pick(self.ended, pick)
            self._accepted(t, self.ended[t], None)
            return
        t = self._pick(self.running, pick)
        metrics = {} if kind == "error" else metrics_of(self._genotype(t), t, 0, kind)
        self._accepted(t, metrics, "boom" if kind == "error" else None)

    @precondition(lambda self: hasattr(self, "search") and self.running)
    @rule(pick=st.integers(0, 99))
    def work(self, pick: int) -> None:
        """The common event: a running trial's next good result (its next rung, or its end)."""
        t = self._pick(self.running, pick)
        if t in self.ended:
            self._accepted(t, self.ended[t], None)
        elif self.search.rungs is not None:
            self._report(t, "ok")
        else:
            self._accepted(t, metrics_of(self._genotype(t), t, 0), None)

    @precondition(lambda self: hasattr(self, "search") and self.told)
    @rule(pick=st.integers(0, 99))
    def duplicate(self, pick: int) -> None:
        """A result sent again, one for a trial never asked, a late rung result: all ignored."""
        t = self._pick(self.told, pick)
        before = state_of(self.search)
        assert self.search.tell(t, *self.told[t]) is False
        assert self.search.tell(len(self.search.trials) + 7, {"val_accuracy": 1.0}) is False
        if self.search.rungs is not None:
            assert self.search.report(t, 0, metrics_of(self._genotype(t), t, 0)) == STOP
        assert_same_state(before, state_of(self.search), f"after duplicate results for trial {t}")
        self.counts["duplicates"] += 1

    @precondition(lambda self: hasattr(self, "search") and self.lost - set(self.search.outcomes))
    @rule(pick=st.integers(0, 99), kind=st.sampled_from(["ok", "error"]))
    def late(self, pick: int, kind: str) -> None:
        """The lost worker's result arrives after all (with rungs: its error)."""
        t = self._pick(self.lost - set(self.search.outcomes), pick)
        ok = kind == "ok" and self.search.rungs is None
        self._accepted(t, metrics_of(self._genotype(t), t, 0) if ok else {}, None if ok else "late error")

    @precondition(lambda self: hasattr(self, "search") and self.search.rungs is not None
                  and self.lost - set(self.search.outcomes) - set(self.running))
    @rule(pick=st.integers(0, 99))
    def late_report(self, pick: int) -> None:
        """The lost worker's next rung result arrives before the trial is handed out again; the
        worker ends after it, told its result when the rung was its last."""
        t = self._pick(self.lost - set(self.search.outcomes) - set(self.running), pick)
        rung = len(self.search.rung_results.get(t, ()))
        if self.search.decisions.get(t, [CONTINUE])[-1] != CONTINUE or rung > self.search.rungs.top:
            return
        metrics = metrics_of(self._genotype(t), t, rung)
        if self.search.report(t, rung, metrics) == STOP:
            recorded = len(self.search.rung_results.get(t, ())) > rung
            self._accepted(t, self.search.rung_results[t][-1] if recorded else metrics, None)
        self.counts["late reports"] += 1

    @precondition(lambda self: hasattr(self, "search") and self.running)
    @rule(pick=st.integers(0, 99))
    def lose_worker(self, pick: int) -> None:
        """A worker lost: put back once per trial and run; the second time the trial fails."""
        t = self._pick(self.running, pick)
        if self.search.requeue(t):
            assert t not in self.requeued, f"trial {t} put back twice in one run"
            self.requeued.add(t)
            self.lost.add(t)
            del self.running[t]
            self.ended.pop(t, None)
        else:
            assert t in self.requeued, f"trial {t} in flight was not put back"
            self._accepted(t, {}, "the trial's worker failed twice")
        self.counts["requeues"] += 1

    @precondition(lambda self: hasattr(self, "search") and self.search.paused())
    @rule(pick=st.integers(0, 99))
    def lose_paused(self, pick: int) -> None:
        """A loss reported for a paused trial (no worker holds it): not put back, nothing changes."""
        t = self._pick(self.search.paused(), pick)
        before = state_of(self.search)
        assert self.search.requeue(t) is False, f"paused trial {t} put back"
        assert_same_state(before, state_of(self.search), f"after a loss reported for paused trial {t}")

    @precondition(lambda self: hasattr(self, "search") and self.search.rungs is None
                  and any(o.status == "failed" for o in self.search.outcomes.values()))
    @rule()
    def retry_failed(self) -> None:
        """A resumed search retries its failures (not with rungs): each is in flight again."""
        failed = sorted(t for t, o in self.search.outcomes.items() if o.status == "failed")
        assert self.search.retry_failed() == failed
        for t in failed:
            self.told.pop(t, None)
        self.counts["retries"] += 1

    @precondition(lambda self: hasattr(self, "search") and self.since_kill >= 4)
    @rule(cut=st.sampled_from([0, 0, 1, 2, 3]), torn=st.booleans())
    def kill_and_resume(self, cut: int, torn: bool) -> None:
        """The driver dies (its workers with it): after its last event, or `cut` journal lines
        earlier (every prefix of the journal was once the whole of it), maybe mid-append (`torn`);
        the search resumes from the journal."""
        before = state_of(self.search)
        finishing = [t for t in self.search.pending() if self.search.decisions.get(t, [None])[-1] == STOP]
        self.search.close()
        with open(self.path, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        with open(self.path, "wb") as f:
            f.write(b"".join(lines[:max(1, len(lines) - cut)]) + (b'{"event":"tell","trial_id":' if torn else b""))
        self.search = resume(self.path, fsync=False, measure=self.measure)
        self.running.clear(), self.ended.clear(), self.lost.clear(), self.requeued.clear()
        self.told = {t: (dict(o.metrics), o.error) for t, o in self.search.outcomes.items()}
        events, _ = read_journal(self.path)
        out = Counter(e["trial_id"] for e in events if e["event"] in ("ask", "reissue", "continue"))
        self.handouts = Counter({t: min(n, out[t]) for t, n in self.handouts.items()})
        self.since_kill = -1
        after = state_of(self.search)
        same = [] if cut else ["trials", "rng", "rung_results", "initial_next", "rejected"]
        same += [] if cut or finishing else list(before)  # finished: told at resume with their last rung's result
        assert_same_state({k: before[k] for k in same}, {k: after[k] for k in same}, "resumed against live")
        self.counts["kills"] += 1

    @invariant()
    def replay_reaches_the_live_state(self) -> None:
        """After every step: the journal's replays equal the live state, no trial is twice in the
        population, and every hand-out and result has its line."""
        if not hasattr(self, "search"):
            return
        live = state_of(self.search)
        for read_only in (False, True):  # resume's replay, and what `amoeba results` reads
            replayed, _ = _replay(self.path, read_only, self.measure)
            assert_same_state(live, state_of(replayed), f"replay (read_only={read_only}) against live")
        population = live["population"]
        assert len(set(population)) == len(population), f"a trial twice in the population {population}"
        events, _ = read_journal(self.path)
        out = Counter(e["trial_id"] for e in events if e["event"] in ("ask", "reissue", "continue"))
        tells = Counter(e["trial_id"] for e in events if e["event"] == "tell")
        retries = Counter(e["trial_id"] for e in events if e["event"] == "retry")
        assert all(n <= out[t] for t, n in self.handouts.items()), f"hand-outs {self.handouts}, journaled {out}"
        for t in set(tells) | set(self.search.outcomes):
            assert tells[t] == retries[t] + (t in self.search.outcomes), f"trial {t}: {tells[t]} tells"
        self.since_kill += 1
        self.counts["steps"] += 1


def schedule_settings(examples: int, steps: int, **kwargs: Any) -> settings:
    """Hypothesis's settings for `examples` schedules of up to `steps` steps, no deadline or database."""
    return settings(max_examples=examples, stateful_step_count=steps, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck), **kwargs)


def run_schedules(examples: int, steps: int, seed: int, counts: Counter | None = None) -> Counter:
    """`examples` random schedules of up to `steps` steps each, from `seed` (raises on the first
    failure, shrunk); what they did, added to `counts` (kept when it raises)."""
    from hypothesis import seed as fix_seed
    from hypothesis.stateful import run_state_machine_as_test

    counts = Counter() if counts is None else counts
    machine = fix_seed(seed)(type("Schedules", (ControllerMachine,), {"counts": counts}))
    run_state_machine_as_test(machine, settings=schedule_settings(examples, steps))
    return counts


TestControllerSchedules = ControllerMachine.TestCase
TestControllerSchedules.settings = schedule_settings(200, 40, derandomize=True)
