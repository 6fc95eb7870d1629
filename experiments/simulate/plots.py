"""Figures for reports (matplotlib, headless). Must not run searches or training."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from experiments.simulate.tabular import sample_std


def plot_best_so_far(curves: Mapping[str, np.ndarray], path: str, ylabel: str, title: str,
                     x: np.ndarray | None = None, xlabel: str = "evaluations") -> None:
    """Mean best-so-far against evaluations (or `x`, e.g. simulated hours) with a 95% confidence
    band per algorithm (PNG/SVG); points where some runs have no result yet average the others."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, curve in curves.items():
        xs = np.arange(1, curve.shape[1] + 1) if x is None else x
        seen = ~np.isnan(curve).all(axis=0)
        mean = np.nanmean(curve[:, seen], axis=0)
        half = 1.96 * np.array([sample_std(c[~np.isnan(c)]) / np.sqrt(max(1, (~np.isnan(c)).sum()))
                                for c in curve[:, seen].T])
        ax.plot(xs[seen], mean, label=f"{name} (n={curve.shape[0]})")
        ax.fill_between(xs[seen], mean - half, mean + half, alpha=0.25)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
