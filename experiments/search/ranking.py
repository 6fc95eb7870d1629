"""The one rule every reader of a search ranks its trials by, as the search itself did: by its
score (the objective, or the reward with one), in its direction (mode max or min), and in a rung
search like with like (evolution/algorithms.py's pick: the first rung's leader, displaced by each
higher rung's leader while it reached that rung too). Ties: fewer parameters, then the earlier
trial. best_genotype.json, the end summary, `amoeba results`, `amoeba report` and
`amoeba promote --top_k` all rank through here, so the "best" is one cell; `--at_target` (results
and promote) ranks a time-to-accuracy search's trials again at a lower target, here too.

Reads the algorithm's records only; must not train, write or talk to Ray.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping

from core.proxy_config import ProxyConfig
from evolution import SearchAlgorithm
from evolution.algorithms import Outcome, Trial
from evolution.objectives import CURVE_KEY


def score_name(algorithm: SearchAlgorithm) -> str:
    """The column a search ranks by: "reward" with a reward, else its objective."""
    return "reward" if algorithm.reward is not None else algorithm.objective


def result_of(algorithm: SearchAlgorithm, trial_id: int) -> Mapping[str, Any]:
    """A trial's metrics: its outcome's, or, still training at a higher rung, its last rung's."""
    if trial_id in algorithm.outcomes:
        return algorithm.outcomes[trial_id].metrics
    return algorithm.rung_results[trial_id][-1]


def rankable(algorithm: SearchAlgorithm) -> list[int]:
    """Trials with a result to rank: the successful ones, and those still training at a higher rung."""
    ok = [t for t, o in algorithm.outcomes.items() if o.status == "ok"]
    return ok + [t for t in algorithm.pending() if algorithm.rung_results.get(t)]


def ranked(algorithm: SearchAlgorithm, k: int | None = None, distinct: bool = False,
           among: Iterable[int] | None = None) -> list[int]:
    """Ids of the best `k` trials (all with None), best first; `distinct`: a genotype seen twice
    counted once (its better trial)."""
    pool = list(rankable(algorithm) if among is None else among)
    key = _ranking_key(algorithm)
    if not algorithm.rungs:  # one fidelity: a sort
        pool.sort(key=lambda t: key(t, 0), reverse=True)
        picks: Iterable[int] = iter(pool)
    else:
        picks = _picks(algorithm, pool, key)
    return first(algorithm, picks, k, distinct)


def _ranking_key(algorithm: SearchAlgorithm) -> Callable[[int, int], tuple]:
    """A trial's place at a rung, larger better, each computed once: its score there (signed), then
    fewer parameters, then the earlier trial."""
    cache: dict[tuple[int, int], tuple] = {}

    def key(tid: int, rung: int) -> tuple:
        if (tid, rung) not in cache:
            params = result_of(algorithm, tid).get("params")
            cache[tid, rung] = (algorithm.value_at(tid, rung), -(params if params is not None else math.inf), -tid)
        return cache[tid, rung]

    return key


def first(algorithm: SearchAlgorithm, ids: Iterable[int], k: int | None, distinct: bool = True) -> list[int]:
    """The first `k` of `ids` in their order (all with None); `distinct`: a genotype seen before is
    passed over."""
    chosen: list[int] = []
    seen: set[str] = set()
    for tid in ids:
        if k is not None and len(chosen) >= k:
            break
        genotype = algorithm.trials[tid].genotype.key()
        if not (distinct and genotype in seen):
            seen.add(genotype)
            chosen.append(tid)
    return chosen


def rescored(algorithm: SearchAlgorithm, searched: tuple[float, float], accuracy: float
             ) -> dict[int, dict[str, float]]:
    """The successful trials of a --target_accuracy search (`searched`: its target accuracy and
    seconds) scored again at `accuracy` from their target_curve, without training: {trial id: its
    seconds_to_target, time_to_target_s, ...}. ValueError where that cannot be: another objective,
    `accuracy` over the search's target (each trial stopped at its hit), a trial without a curve."""
    target_accuracy, target_seconds = searched
    if algorithm.objective != "seconds_to_target" or len(algorithm.goals) > 1:
        raise ValueError(f"--at_target: the search minimises {algorithm.objective}"
                         f"{' among other goals' if len(algorithm.goals) > 1 else ''}, not a time to accuracy "
                         "alone (amoeba search --target_accuracy)")
    if not 0 < accuracy <= target_accuracy:
        raise ValueError(f"--at_target: {accuracy:g} must lie in (0, {target_accuracy:g}], the search's "
                         "--target_accuracy (each trial stopped once it reached that)")
    ok = [t for t, o in algorithm.outcomes.items() if o.status == "ok"]
    unscored = [t for t in ok if not algorithm.outcomes[t].metrics.get(CURVE_KEY)]
    if unscored:
        raise ValueError(f"--at_target: trials {unscored} have no {CURVE_KEY} (a search scored before "
                         "2026-12-05 kept only the time to its own target)")
    rescore = ProxyConfig(target_accuracy=accuracy, target_seconds=target_seconds, timeout_s=0)
    return {t: rescore.seconds_to_target_on(algorithm.outcomes[t].metrics[CURVE_KEY]) for t in ok}


def ranked_by(algorithm: SearchAlgorithm, scores: Mapping[int, Mapping[str, float]], k: int | None = None,
              distinct: bool = False) -> list[int]:
    """Ids of the trials `rescored` scored, best first: the fewest seconds_to_target, then fewer
    parameters, then the earlier trial (as `ranked` breaks ties)."""
    def key(tid: int) -> tuple:
        params = result_of(algorithm, tid).get("params")
        return scores[tid]["seconds_to_target"], params if params is not None else math.inf, tid

    return first(algorithm, sorted(scores, key=key), k, distinct)


def _picks(algorithm: SearchAlgorithm, pool: list[int], key: Any) -> Iterable[int]:
    """The like-with-like pick of the pool, again and again, each without the ones picked before."""
    pool = list(pool)
    while pool:
        pick = max(pool, key=lambda t: key(t, 0))
        rung = 1
        while algorithm.highest_rung(pick) >= rung:
            pick = max((t for t in pool if algorithm.highest_rung(t) >= rung), key=lambda t: key(t, rung))
            rung += 1
        pool.remove(pick)
        yield pick


def picks_so_far(algorithm: SearchAlgorithm, order: Iterable[int]) -> list[int | None]:
    """After each trial of `order`, the search's pick among the trials up to it (None while none has
    a result): a best-so-far line that agrees with `ranked` (like with like across rungs), where a
    running maximum of each trial's last score would mix fidelities. Each rung's leader so far is
    carried, and a new trial compared with the leader of each rung it reached: linear in the trials
    (ranking every prefix afresh took a minute per line at 10,000)."""
    results = set(rankable(algorithm))
    key = _ranking_key(algorithm)
    leaders: list[int] = []  # rung -> the best trial so far among those that reached it
    picks: list[int | None] = []
    for tid in order:
        if tid in results:
            for rung in range(algorithm.highest_rung(tid) + 1):
                if rung == len(leaders):
                    leaders.append(tid)
                elif key(tid, rung) > key(leaders[rung], rung):  # as max(): the first of equals stays
                    leaders[rung] = tid
            picks.append(_chain(algorithm, leaders))
        else:
            picks.append(picks[-1] if picks else None)
    return picks


def _chain(algorithm: SearchAlgorithm, leaders: list[int]) -> int:
    """The pick from each rung's leader: the first rung's, displaced by each higher rung's while the
    pick reached that rung too (as `_picks` picks)."""
    pick, rung = leaders[0], 1
    while rung < len(leaders) and algorithm.highest_rung(pick) >= rung:
        pick, rung = leaders[rung], rung + 1
    return pick


def best(algorithm: SearchAlgorithm) -> tuple[Trial, Outcome] | None:
    """The best trial and its result (an Outcome without told_at while it trains at a higher rung)."""
    top = ranked(algorithm, 1)
    if not top:
        return None
    tid = top[0]
    return algorithm.trials[tid], algorithm.outcomes.get(tid) or Outcome("ok", result_of(algorithm, tid))


def spread_along_front(algorithm: SearchAlgorithm, k: int) -> list[int]:
    """Up to k distinct cells of the front, evenly spaced in the order of its last goal: with k of 3
    the cheapest, the middle one and the dearest (not k neighbours)."""
    cost = algorithm.goals[-1]
    members: dict[str, int] = {}
    for tid in sorted(algorithm.front(), key=lambda t: (cost.signed(algorithm.outcomes[t].metrics), t), reverse=True):
        members.setdefault(algorithm.trials[tid].genotype.key(), tid)  # cheapest first
    front = list(members.values())
    if k <= 0 or not front:
        return []
    if k == 1 or len(front) == 1:
        return [min(front, key=lambda t: (-algorithm.fitness(t), t))]  # one cell: the most accurate
    picks = sorted({round(i * (len(front) - 1) / (k - 1)) for i in range(k)})
    return [front[i] for i in picks]
