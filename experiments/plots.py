"""Figures for reports (matplotlib, headless). Must not run searches or training."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from experiments.tabular import sample_std


def plot_best_so_far(curves: Mapping[str, np.ndarray], path: str, ylabel: str, title: str) -> None:
    """Mean best-so-far against evaluations with a 95% confidence band per algorithm (PNG/SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, curve in curves.items():
        x = np.arange(1, curve.shape[1] + 1)
        mean = curve.mean(axis=0)
        half = 1.96 * np.array([sample_std(c) for c in curve.T]) / np.sqrt(curve.shape[0])
        ax.plot(x, mean, label=f"{name} (n={curve.shape[0]})")
        ax.fill_between(x, mean - half, mean + half, alpha=0.25)
    ax.set_xlabel("evaluations")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
