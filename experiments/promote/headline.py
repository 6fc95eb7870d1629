"""The sentence a promote's report opens with: which model reached the target first, by how much,
whether the lead is beyond noise, and what the search's pick changed against the nearest baseline
(or that it is the seed the search was given).

The target is chosen on the validation split a promote holds out of the training split (never on
the evaluation split, whose figures it then times): the highest of the promote's top-1 targets
(--target_top1) that one of the contenders (each search's pick and the baselines:
experiments/promote/comparison.py) reached on it; with none given or none reached, the best baseline's final
validation top-1, so the sentence says whether a searched net gets to the best hand-designed net's
accuracy sooner than it. A promote without a validation split (--validation_images=0, or made
before it) falls back to the evaluation split's figures. Once the target is fixed, times are
DAWNBench's, on the evaluation split: the end of the first evaluation at or over the target
(experiments/promote/targets.py). A search's pick that is a baseline's twin is that baseline: said so, never
raced against itself.

The noise: a time to a target rests on one evaluation set. At the winner's time, the runner-up's
last evaluation so far is taken; when its Wilson 95% interval reaches the target, the runner-up
may as well have been there already, and the lead is within noise. That evaluation comes before
the runner-up's last (it reached the target later), and only the last keeps which images it got
right (core/correct_images.py), so no paired test applies here: the accuracy verdict on the final
evaluations (experiments/promote/comparison.py) is where McNemar's test judges. Pure pandas over the
comparison and the models' evaluation histories: this module must not read files, train or import
TensorFlow.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from experiments.promote import noise
from experiments.promote.comparison import choice_split, contenders, images, search_picks, twin_of
from experiments.units import duration
from experiments.promote.targets import column, first_at, parse_column

History = list[dict[str, Any]]


def headline(table: pd.DataFrame, histories: Mapping[str, History], genotypes: Mapping[str, Any] | None = None,
             seeds: Mapping[str, str] | None = None) -> str | None:
    """One sentence on the race, or None without a finished model and a target. `histories`: model
    name -> its evaluations (step, wall_seconds, top1); `genotypes`: searched model name -> genotype
    JSON; `seeds`: searched model name -> what to say of a pick that is a seed its search was given."""
    pool = contenders(table)
    target, why = race_target(table, pool, histories)
    if pool.empty or target is None:
        return None
    times = {row["name"]: time_to(row, target, histories) for _, row in pool.iterrows()}
    reached = sorted((t, name) for name, t in times.items() if t is not None)
    rows = {row["name"]: row for _, row in pool.iterrows()}
    picks = search_picks(table)
    if not reached:
        best = pool.sort_values("top1", ascending=False).iloc[0]
        said = (f"No model reached top-1 {target:.4g} ({why}); the most accurate is {_label(best)}, "
                f"top-1 {noise.shown(best.top1, images(best))}")
    else:
        said = _race(reached, rows, target, why, histories)
        said += _pick_race(said, picks, reached, times)
    twin = twin_of(picks.iloc[0]) if not picks.empty else None
    change = _twin_said(picks.iloc[0], seeds or {}) if twin else _pick_change(picks, table, genotypes or {}, seeds or {})
    said += f"; {change}" if change else ""
    return said[0].upper() + said[1:] + "."


def _pick_race(said: str, picks: pd.DataFrame, reached: list[tuple[float, str]],
               times: Mapping[str, float | None]) -> str:
    """`; the search's pick (NAME) took 31 min (1.12x)` where the sentence has not named it yet."""
    if picks.empty or f"{picks.iloc[0]['name']}" in said or twin_of(picks.iloc[0]):
        return ""
    pick = picks.iloc[0]
    mine = times.get(pick["name"])
    if mine is None:
        return f"; {_label(pick)} did not reach it"
    return f"; {_label(pick)} took {duration(mine)} ({mine / reached[0][0]:.2f}x)"


def race_target(table: pd.DataFrame, pool: pd.DataFrame, histories: Mapping[str, History]
                ) -> tuple[float | None, str]:
    """(the target, how it was chosen), on the validation split (comparison.choice_split): the highest
    --target_top1 a contender reached there, else the best baseline's final validation top-1 (None
    without a finished baseline). Without a validation split: the evaluation split's, said so."""
    metric, _, said = choice_split(pool)
    on = " on the validation split" if metric != "top1" else " on the test split: no validation split was held out"
    given = sorted({p[2] for p in map(parse_column, table) if p and p[:2] == ("time", "top1") and p[2]},
                   reverse=True)
    for target in given:
        if any(_reached(row, target, histories, metric) for _, row in pool.iterrows()):
            return target, f"the highest target any model reached{on}"
    baselines = pool[pool.kind == "baseline"]
    if baselines.empty:
        return None, ""
    best = baselines.sort_values(metric, ascending=False).iloc[0]
    return float(best[metric]), f"{best['name']}'s final {said}, the best baseline's{on}"


def _reached(row: pd.Series, target: float, histories: Mapping[str, History], metric: str) -> bool:
    """Whether a model's evaluations reached `target` in `metric` (top1: time_to's reading)."""
    if metric == "top1":
        return time_to(row, target, histories) is not None
    return first_at(histories.get(row["name"]) or [], metric, target) is not None


def _twin_said(pick: pd.Series, seeds: Mapping[str, str]) -> str:
    """`the search's pick (NAME) is airbench94 itself: ...`, for a pick that is a baseline's twin."""
    seed = f", {seeds[pick['name']]}," if pick["name"] in seeds else ""
    return (f"the search's pick ({pick['name']}){seed} is {twin_of(pick)} itself: the same network, trained once "
            "under that name, so it races only the other baselines")


def time_to(row: pd.Series, target: float, histories: Mapping[str, History]) -> float | None:
    """Seconds to the first evaluation at or over top-1 `target`: from the model's history, else
    from the comparison's column for that target (None: not reached, or not known)."""
    history = histories.get(row["name"])
    if history:
        return first_at(history, "top1", target)
    value = row.get(column("time", "top1", target))
    return float(value) if value is not None and pd.notna(value) else None


def _label(row: pd.Series, seconds: float | None = None) -> str:
    """`the search's pick (NAME)` or the baseline's name; with `seconds`, the time inside the brackets."""
    took = f", {duration(seconds)}" if seconds is not None else ""
    if row["kind"] == "searched":
        return f"the search's pick ({row['name']}{took})"
    return f"{row['name']} ({duration(seconds)})" if took else f"{row['name']}"


def _race(reached: list[tuple[float, str]], rows: Mapping[str, pd.Series], target: float, why: str,
          histories: Mapping[str, History]) -> str:
    """`first to top-1 T (why): W, in 23 min: 0.76x the time of R (30 min), a lead beyond noise (...)`."""
    (won, name), rest = reached[0], reached[1:]
    winner = rows[name]
    said = f"first to top-1 {target:.4g} ({why}): {_label(winner)}, in {duration(won)}"
    if not rest:
        others = [r for n, r in rows.items() if n != name]
        if not others:
            return said
        best = max(others, key=lambda r: r.top1)
        return said + (f", the only one to reach it (the next most accurate, {best['name']}, ended at top-1 "
                       f"{noise.shown(best.top1, images(best))})")
    late, second = rest[0]
    runner = rows[second]
    said += f", {won / late:.2f}x the time of {_label(runner, late)}"
    if noise.time_compared(won, late) == "is within noise of":
        return said + (f", a lead within noise (under {noise.TIME_NOISE:.0%} of the time: one machine's pace moves by "
                       "that much between runs of the same net)")
    if not histories.get(second):
        return said + " (no evaluation history to judge the noise by)"
    standing = _standing(histories[second], won)
    if standing is None:
        return said + f", a lead beyond noise ({second} had not finished an evaluation by then)"
    n = images(runner)
    low, high = noise.wilson_interval(standing, n) if n else (standing, standing)
    within = high >= target
    return said + (f", a lead {'within' if within else 'beyond'} noise ({second} was at top-1 "
                   f"{noise.shown(standing, n)} by then{', whose interval reaches the target' if within else ''})")


def _standing(history: History, seconds: float) -> float | None:
    """The top-1 of the last evaluation that ended by `seconds` (None: none had)."""
    done = [r for r in history if float(r["wall_seconds"]) <= seconds]
    return float(max(done, key=lambda r: r["wall_seconds"])["top1"]) if done else None


def _pick_change(picks: pd.DataFrame, table: pd.DataFrame, genotypes: Mapping[str, Any],
                 seeds: Mapping[str, str]) -> str | None:
    """`the search's pick changed airbench94's activation gelu -> silu` (against the baseline of the
    fewest differences), `the search's pick is the seed you gave (...)`, or None where the pick and
    the baselines are not networks of one space."""
    from searchspace import genotype_from_json
    from searchspace.convnet import ConvNetGenotype, differences, family_network

    if picks.empty:
        return None
    pick = picks.iloc[0]
    if pick["name"] in seeds:
        return f"the search's pick is {seeds[pick['name']]}"
    if pick["name"] not in genotypes:
        return None
    mine = genotype_from_json(genotypes[pick["name"]])
    if not isinstance(mine, ConvNetGenotype):
        return None
    nearest = []
    for _, base in table[(table.kind == "baseline") & (table.status == "ok")].iterrows():
        model, _, width = str(base["name"]).partition("@")
        network = family_network(model, float(width) if width else None)
        if network is not None:
            nearest.append((len(differences(network, mine)), base["name"], differences(network, mine)))
    if not nearest:
        return None
    _, name, changed = min(nearest, key=lambda n: n[0])
    if not changed:
        return f"the search's pick is the same network as {name}"
    return f"against {name}, the search's pick changed the {', the '.join(changed)}"
