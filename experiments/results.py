"""Results of a search: the per-trial table, the best genotype, and the printed top list.

Reads only the algorithm's records; must not train or talk to Ray.
"""

from __future__ import annotations

import os

import pandas as pd

from evolution import SearchAlgorithm
from trainer.storage import write_json, write_text

COLUMNS = [
    "trial_id", "parent_id", "mutation", "genotype", "key", "status", "rung", "epochs", "val_accuracy", "params",
    "multiply_adds", "train_seconds", "images_per_sec", "trial_seconds", "told_at", "error",
]


def results_table(algorithm: SearchAlgorithm) -> pd.DataFrame:
    """One row per trial, pending ones included (a trial still training at a higher rung shows its
    last rung's result)."""
    rows = []
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
                "params": metrics.get("params"),
                "multiply_adds": metrics.get("multiply_adds"),
                "told_at": outcome.told_at if outcome else None,
                "train_seconds": metrics.get("train_seconds"),
                "images_per_sec": metrics.get("images_per_sec"),
                "trial_seconds": metrics.get("trial_seconds"),
                "error": (outcome.error if outcome else None) or "",
            }
        )
        rows[-1].setdefault(algorithm.objective, metrics.get(algorithm.objective))
    columns = COLUMNS + ([algorithm.objective] if algorithm.objective not in COLUMNS else [])
    table = pd.DataFrame(rows, columns=columns)
    return table.astype({"parent_id": "Int64", "params": "Int64", "multiply_adds": "Int64", "rung": "Int64",
                         "epochs": "Int64"})


def write_results(algorithm: SearchAlgorithm, output_dir: str) -> None:
    """Atomically rewrite results.csv and best_genotype.json in `output_dir`."""
    table = results_table(algorithm)
    write_text(os.path.join(output_dir, "results.csv"), table.to_csv(index=False))
    best = algorithm.best()
    if best is not None:
        trial, outcome = best
        write_json(
            os.path.join(output_dir, "best_genotype.json"),
            {
                "trial_id": trial.trial_id,
                "objective": algorithm.objective,
                "value": outcome.metrics[algorithm.objective],
                "metrics": dict(outcome.metrics),
                "genotype": trial.genotype.to_json(),
                "genotype_string": str(trial.genotype),
            },
        )


def top_trials(table: pd.DataFrame, algorithm: SearchAlgorithm, k: int) -> pd.DataFrame:
    """The k best successful rows of `table` by the objective at the highest rung (higher rungs
    first; ties: the earlier trial)."""
    ok = table[table.status == "ok"].assign(_rung=lambda t: t.rung.fillna(0))
    order = ok.sort_values(["_rung", algorithm.objective, "trial_id"], ascending=[False, algorithm.mode == "min", True])
    return order.drop(columns="_rung").head(k)


def top_table(algorithm: SearchAlgorithm, k: int = 5) -> str:
    """The k best successful trials as a printable table."""
    top = top_trials(results_table(algorithm), algorithm, k)
    shown = ["trial_id", "parent_id", *(["rung", "epochs"] if algorithm.rungs else []), algorithm.objective,
             "params", "train_seconds", "mutation"]
    top = top[list(dict.fromkeys(shown))]
    return top.to_string(index=False, float_format=lambda v: f"{v:.4f}", max_colwidth=60)
