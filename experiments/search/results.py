"""Results of a search: the per-trial table, the best genotype, and the printed top list.

Reads only the algorithm's records; must not train or talk to Ray.
"""

from __future__ import annotations

import math
import os

import pandas as pd

from evolution import SearchAlgorithm
from experiments.search import ranking
from experiments.layout import BEST, CONFIG, RESULTS
from core.storage import read_json, write_json, write_text

COLUMNS = [
    "trial_id", "parent_id", "mutation", "genotype", "key", "status", "rung", "epochs", "val_accuracy", "validation_images", "params",
    "multiply_adds", "latency_ms", "latency_ms_batch", "step_ms", "train_steps", "train_seconds", "images_per_sec",
    "trial_seconds", "told_at", "on_front", "reused_from", "error",
]


def results_table(algorithm: SearchAlgorithm) -> pd.DataFrame:
    """One row per trial, pending ones included (a trial still training at a higher rung shows its
    last rung's result)."""
    rows = []
    on_front = set(algorithm.front())
    for trial_id, trial in algorithm.trials.items():
        outcome = algorithm.outcomes.get(trial_id)
        metrics = dict(outcome.metrics) if outcome else dict(algorithm.rung_results.get(trial_id, [{}])[-1])
        rows.append(
            {
                "trial_id": trial_id,
                "parent_id": trial.parent_id,
                "mutation": trial.mutation,
                "genotype": str(trial.genotype),
                "key": trial.genotype.key(),
                "status": outcome.status if outcome else "pending",
                "rung": metrics.get("rung"),
                "epochs": metrics.get("epochs"),
                "val_accuracy": metrics.get("val_accuracy"),
                "validation_images": metrics.get("validation_images"),
                "params": metrics.get("params"),
                "multiply_adds": metrics.get("multiply_adds"),
                "latency_ms": metrics.get("latency_ms"),
                "latency_ms_batch": metrics.get("latency_ms_batch"),
                "step_ms": metrics.get("step_ms"),
                "train_steps": metrics.get("train_steps"),
                "told_at": outcome.told_at if outcome else None,
                "on_front": trial_id in on_front,
                "reused_from": outcome.reused_from if outcome else None,
                "train_seconds": metrics.get("train_seconds"),
                "images_per_sec": metrics.get("images_per_sec"),
                "trial_seconds": metrics.get("trial_seconds"),
                "error": (outcome.error if outcome else None) or "",
            }
        )
        for goal in algorithm.goals:
            rows[-1].setdefault(goal.metric, metrics.get(goal.metric))
        for name in _target_columns(algorithm):
            rows[-1][name] = metrics.get(name)
        if algorithm.reward is not None:
            rows[-1]["reward"] = algorithm.score(metrics) if outcome and outcome.status == "ok" else None
    extra = [g.metric for g in algorithm.goals] + (["reward"] if algorithm.reward else []) + _target_columns(algorithm)
    columns = COLUMNS + [c for c in extra if c not in COLUMNS]
    return _whole_numbers_as_integers(pd.DataFrame(rows, columns=columns))


# Counts shown without a decimal point when every value is whole: a --train_seconds search's epochs
# are fractions, and a function of one's own may report its sizes in millions (params 1.25)
WHOLE = ("parent_id", "reused_from", "validation_images", "params", "multiply_adds", "rung", "train_steps", "epochs")


def _whole_numbers_as_integers(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with each WHOLE column that holds only whole numbers (or none) as nullable integers;
    a column with a fraction (or anything not a finite number) in it stays as it is."""
    whole = {}
    for name in WHOLE:
        values = pd.to_numeric(table[name].dropna(), errors="coerce")
        if values.map(lambda v: math.isfinite(v) and v == round(v) and abs(v) < 2**63).all():
            whole[name] = "Int64"
    return table.astype(whole)


def _target_columns(algorithm: SearchAlgorithm) -> list[str]:
    """A time-to-accuracy search's own figures (the proxy's --target_accuracy)."""
    return ["time_to_target_s", "best_val_accuracy"] if algorithm.objective == "seconds_to_target" else []


def shown_measures(algorithm: SearchAlgorithm) -> list[str]:
    """The columns a printed table shows for each trial: the goals, the reward, and the costs."""
    return list(dict.fromkeys([algorithm.objective, *(["reward"] if algorithm.reward else []),
                               *(["best_val_accuracy"] if _target_columns(algorithm) else []),
                               *(g.metric for g in algorithm.goals), "params", "latency_ms", "step_ms"]))


def write_results(algorithm: SearchAlgorithm, output_dir: str) -> None:
    """Atomically rewrite results.csv and best_genotype.json in `output_dir`."""
    table = results_table(algorithm)
    write_text(os.path.join(output_dir, RESULTS), table.to_csv(index=False))
    best = ranking.best(algorithm)
    if best is not None:
        trial, outcome = best
        write_json(
            os.path.join(output_dir, BEST),
            {
                "trial_id": trial.trial_id,
                "objective": ranking.score_name(algorithm),
                "value": algorithm.score(outcome.metrics),
                "metrics": dict(outcome.metrics),
                "genotype": trial.genotype.to_json(),
                "genotype_string": str(trial.genotype),
            },
        )


def top_trials(table: pd.DataFrame, algorithm: SearchAlgorithm, k: int) -> pd.DataFrame:
    """The k best rows of `table` as the search ranks its trials (experiments/search/ranking.py)."""
    order = ranking.ranked(algorithm, k)
    return table.set_index("trial_id", drop=False).loc[order].reset_index(drop=True)


def front_trials(table: pd.DataFrame, algorithm: SearchAlgorithm) -> pd.DataFrame:
    """The trials on the front of the search's goals, cheapest by its last goal first."""
    front = table[table.on_front.astype(bool)]
    goal = algorithm.goals[-1]
    return front.sort_values(goal.metric, ascending=goal.mode == "min")


def shown_columns(algorithm: SearchAlgorithm, table: pd.DataFrame, status: bool = False) -> list[str]:
    """The columns a printed table of trials shows, the same in the search's end summary and in
    `amoeba results`: ids, the rung, the goals and costs measured, the trial's time (trial_seconds:
    the whole trial, start to result) and the mutation; a space of one's own's genotype too (a
    NASNet cell's is too long)."""
    measures = [m for m in [*shown_measures(algorithm), "trial_seconds"]
                if m == algorithm.objective or (m in table and table[m].notna().any())]
    shown = ["trial_id", "parent_id", *(["status"] if status else []),
             *(["rung", "epochs"] if algorithm.rungs else []), *measures, "mutation",
             *(["genotype"] if algorithm.space.name != "nasnet" else [])]
    return list(dict.fromkeys(shown))


def as_text(table: pd.DataFrame) -> str:
    return table.to_string(index=False, float_format=lambda v: f"{v:.4f}", max_colwidth=60)


def top_table(algorithm: SearchAlgorithm, k: int = 5) -> str:
    """The k best trials as a printable table."""
    top = top_trials(results_table(algorithm), algorithm, k)
    return as_text(top[shown_columns(algorithm, top)])


def at_target(table: pd.DataFrame, algorithm: SearchAlgorithm, searched: tuple[float, float],
              accuracy: float) -> pd.DataFrame:
    """The successful trials of a --target_accuracy search (`searched`: its target accuracy and
    seconds) scored again at `accuracy` from their target_curve (no training; experiments/search/ranking.py
    `rescored`), best first as the search ranks (ties: fewer parameters, then the earlier trial);
    reused repeats too, as their source. ValueError where they cannot be."""
    scores = ranking.rescored(algorithm, searched, accuracy)
    order = ranking.ranked_by(algorithm, scores)
    rows = table.set_index("trial_id", drop=False).loc[order].reset_index(drop=True)
    scored = pd.DataFrame([scores[t] for t in order])
    rows[list(scored)] = scored.astype(float)  # a miss's time_to_target_s: NaN
    return rows


def searched_target(search_dir: str) -> tuple[float, float]:
    """A --target_accuracy search's target accuracy and seconds, from its search_config.json (the
    proxy's target only: the rest may not load on another machine). ValueError naming the file (the
    caller names the dir)."""
    path = os.path.join(search_dir, CONFIG)
    try:
        proxy = read_json(path)["proxy"]
        return float(proxy["target_accuracy"]), float(proxy["target_seconds"])
    except (OSError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{CONFIG}: --at_target needs the search's proxy target from it: {err!r}") from None
