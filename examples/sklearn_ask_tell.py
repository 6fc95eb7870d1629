"""Regularized evolution over a scikit-learn model's settings, with ask/tell and no Ray.

    .venv/bin/python examples/sklearn_ask_tell.py --trials=40 --journal=runs/sklearn/journal.jsonl

Run it again with the same --journal and it resumes where it stopped: the journal replays every
proposal and result (the random state included), and trials that were in flight are asked again.
"""

import argparse
import os

from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import cross_val_score

from evolution import RegularizedEvolution, resume
from searchspace import ChoiceSpace

SPACE = ChoiceSpace({
    "n_estimators": [10, 25, 50, 100],
    "max_depth": [2, 4, 8, 16, None],
    "max_features": ["sqrt", "log2", None],
    "criterion": ["gini", "entropy"],
})


def score(settings: dict, images, labels) -> float:
    """Mean 3-fold cross-validated accuracy of a random forest with these settings."""
    model = RandomForestClassifier(**settings, random_state=0, n_jobs=1)
    return float(cross_val_score(model, images, labels, cv=3).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40, help="trials in all, those of earlier runs included")
    parser.add_argument("--journal", default="runs/sklearn_ask_tell/journal.jsonl")
    args = parser.parse_args()
    images, labels = load_digits(return_X_y=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.journal)), exist_ok=True)
    if os.path.exists(args.journal):
        search = resume(args.journal)
    else:
        search = RegularizedEvolution(SPACE, population_size=8, sample_size=3, seed=0, journal_path=args.journal)
    while search.completed() < args.trials:
        trial = search.ask()
        accuracy = score(dict(trial.genotype.values), images, labels)
        search.tell(trial.trial_id, {"val_accuracy": accuracy})
        print(f"trial {trial.trial_id} ({trial.mutation}): {trial.genotype} -> {accuracy:.4f}", flush=True)
    best, outcome = search.best()
    print(f"best: trial {best.trial_id}, {best.genotype}, val_accuracy {outcome.metrics['val_accuracy']:.4f}")
    search.close()


if __name__ == "__main__":
    main()
