"""The same scikit-learn space through Ray Tune: 2 trials at a time, each in its own worker.

    .venv/bin/python examples/sklearn_ray_tune.py --output_dir=runs/sklearn_tune --trials=20

Stop it at any point (Ctrl-C, or kill it) and run the same command again: the search resumes from
its journal in --output_dir, trials that were in flight re-issued with their ids. `amoeba results
DIR` and `amoeba report DIR` read the output dir.
"""

import argparse

from ray import tune
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import cross_val_score

from experiments import api
from searchspace import ChoiceSpace

SPACE = ChoiceSpace({
    "n_estimators": [10, 25, 50, 100],
    "max_depth": [2, 4, 8, 16, None],
    "max_features": ["sqrt", "log2", None],
    "criterion": ["gini", "entropy"],
})


def train(config: dict) -> None:
    """A Ray Tune function trainable: the settings are config["genotype"]; it reports val_accuracy."""
    images, labels = load_digits(return_X_y=True)
    model = RandomForestClassifier(**config["genotype"].values, random_state=0, n_jobs=1)
    tune.report({"val_accuracy": float(cross_val_score(model, images, labels, cv=3).mean())})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", default="runs/sklearn_ray_tune")
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()
    results, best = api.search(train, SPACE, output_dir=args.output_dir, max_trials=args.trials,
                               population_size=6, sample_size=2, max_concurrent=2, cpus_per_trial=1,
                               trial_timeout_s=300)
    print(results[["trial_id", "parent_id", "mutation", "genotype", "val_accuracy"]].to_string(index=False))
    print(f"best: trial {best.trial_id}, {best.genotype}, val_accuracy {best.metrics['val_accuracy']:.4f}")


if __name__ == "__main__":
    main()
