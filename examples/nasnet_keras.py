"""NASNet cells searched with your own Keras training on your own arrays, then the best cell
trained for longer.

    .venv/bin/python examples/nasnet_keras.py --output_dir=runs/nasnet_keras --trials=20

Each candidate is a cell (searchspace.NasNetSpace) that trainer.models.build_model turns into a
Keras network; `train` is an ordinary Keras fit on numpy arrays (here scikit-learn's 8x8 digits,
any arrays of images and integer labels will do). The search resumes when run again.
"""

import argparse

import numpy as np
from ray import tune
from sklearn.datasets import load_digits

from experiments import api
from searchspace import NasNetSpace

SPACE = NasNetSpace(num_blocks=2)  # two blocks per cell: a small space for a small task


def load_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Images (N, 8, 8, 3) in [-1, 1] and labels: 1,400 to train on, the rest to validate on."""
    images, labels = load_digits(return_X_y=True)
    images = np.repeat(images.reshape(-1, 8, 8, 1) / 8.0 - 1.0, 3, axis=-1).astype("float32")
    order = np.random.default_rng(0).permutation(len(images))
    train, valid = order[:1400], order[1400:]
    return images[train], labels[train], images[valid], labels[valid]


def fit(genotype, epochs: int, filters: int = 8) -> tuple[float, int]:
    """Build the cell's network and train it; its validation accuracy and trainable parameters."""
    import keras

    from trainer.models import ModelSpec, build_model, model_report

    keras.backend.clear_session()  # a warm worker trains many models: free the last one's graph
    keras.utils.set_random_seed(0)
    x, y, x_valid, y_valid = load_arrays()
    model = build_model(ModelSpec("genotype", num_classes=10, image_size=8, num_cells=1, filters=filters,
                                  genotype=genotype))
    optimizer = keras.optimizers.Adam(3e-3)
    optimizer.build(model.trainable_variables)  # built inside fit's first step, its slots double that step's cost
    model.compile(optimizer=optimizer,  # the network outputs logits
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                  jit_compile=False)  # Keras turns XLA on by default; on a CPU it slows these cells down
    model.fit(x, y, batch_size=50, epochs=epochs, verbose=0)
    _, accuracy = model.evaluate(x_valid, y_valid, batch_size=100, verbose=0)
    return float(accuracy), model_report(model)["params"]


def train(config: dict) -> None:
    """The search's trainable: one candidate cell, a short training."""
    accuracy, params = fit(config["genotype"], epochs=config.get("epochs", 3))
    tune.report({"val_accuracy": accuracy, "params": params})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", default="runs/nasnet_keras")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--final_epochs", type=int, default=10, help="epochs the best cell trains for after")
    args = parser.parse_args()
    results, best = api.search(train, SPACE, output_dir=args.output_dir, max_trials=args.trials,
                               population_size=5, sample_size=2, trial_timeout_s=600)  # a trial per core
    print(results[["trial_id", "mutation", "val_accuracy", "params"]].to_string(index=False))
    accuracy, params = fit(best.genotype, epochs=args.final_epochs, filters=16)
    print(f"best cell (trial {best.trial_id}): {best.genotype}")
    print(f"trained {args.final_epochs} epochs at F=16: val_accuracy {accuracy:.4f}, {params:,} parameters")


if __name__ == "__main__":
    main()
