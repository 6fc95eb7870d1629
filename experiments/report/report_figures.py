"""The report's figures (experiments/report/driver.py), drawn by matplotlib to inline SVG text: a search's
progress, accuracy against size and cost with the Pareto front (a promote's with each model's 95%
interval), promoted models' accuracy against wall time, and cells drawn by Graphviz (durations:
experiments/units.py). Reads the tables (and the ranking rule) it is given only; must not train,
search or talk to Ray.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd

from experiments.units import duration, time_unit  # noqa: F401  (duration: the report's, too)


def _svg(fig) -> str:
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # inline: no XML prolog or DOCTYPE


def _axes(columns: int, width: float = 6.0):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "path"  # text as outlines: the same on every viewer, no font needed
    return plt.subplots(1, columns, figsize=(width * columns, 4.2), squeeze=False)


def seconds_since_start(table: pd.DataFrame) -> pd.Series:
    """Seconds from the first trial's start to each result (NaN where the journal has no times)."""
    told = pd.to_numeric(table.told_at, errors="coerce")
    start = (told - table.trial_seconds.fillna(0)).min()
    return told - start


RUNG_MARKERS = ("o", "s", "^", "D", "v", "P")  # the rung each step of a best-so-far line was ranked at


def has_rungs(run: Any) -> bool:
    """Whether a search ran rungs (its results table names each trial's last rung)."""
    return "rung" in run.table and bool(run.table.rung.notna().any())


def _best_line(run: Any, rows: pd.DataFrame) -> tuple[pd.Series, list[int | None]]:
    """The search's pick among the trials up to each of `rows` (in their order), as its score, and
    the picks: ranked as the summary ranks (experiments/search/ranking.py; like with like across rungs), not
    a running maximum of scores at different fidelities. With rungs, each height is the pick's score
    at the rung it was ranked at, its highest (`_mark_rungs` marks which)."""
    picks = run.picks(list(rows.trial_id))
    scores = run.table.set_index("trial_id")[run.score].astype(float)
    return pd.Series([scores[p] if p is not None else np.nan for p in picks], index=rows.index), picks


def _mark_rungs(ax: Any, run: Any, x: pd.Series, picks: list[int | None], colour: str, labelled: bool) -> None:
    """A marker where the pick changes, shaped by the rung it was ranked at (`labelled`: named in the
    legend, `NAME: pick ranked at rung R (E epochs)`)."""
    rows = run.table.set_index("trial_id")
    changes = [i for i, p in enumerate(picks) if p is not None and (i == 0 or p != picks[i - 1])]
    for rung in sorted({int(rows.rung[picks[i]]) for i in changes}):
        at = [i for i in changes if int(rows.rung[picks[i]]) == rung]
        epochs = float(rows.epochs[picks[at[0]]])
        ax.plot([x.iloc[i] for i in at], [float(rows[run.score][picks[i]]) for i in at], linestyle="none",
                marker=RUNG_MARKERS[rung % len(RUNG_MARKERS)], markersize=6, markerfacecolor="white",
                markeredgecolor=colour, label=f"{run.name}: pick ranked at rung {rung} ({epochs:g} epochs)"
                if labelled else "_nolegend_")


def progress_figure(searches: list[Any]) -> str:
    """Each trial's score (dots) and the search's pick so far (line; with rungs, each step marked
    with the rung its pick was ranked at), against trial number and wall time."""
    from matplotlib.ticker import MaxNLocator

    fig, axes = _axes(2)
    longest = max((seconds_since_start(run.table).max() for run in searches), default=np.nan)
    unit, size = time_unit(float(longest))
    for i, run in enumerate(searches):
        table = run.table
        done = table[(table.status != "pending") | table[run.score].notna()].sort_values("trial_id")
        score = done[run.score].astype(float)
        seconds = seconds_since_start(done)
        by_time = done.loc[seconds.sort_values(kind="stable").index]  # trials finish out of order
        for ax, rows, x in ((axes[0][0], done, done.trial_id), (axes[0][1], by_time, seconds[by_time.index] / size)):
            if x.isna().all():
                continue
            ax.scatter(x, score[rows.index], s=10, alpha=0.45, color=f"C{i}")
            line, picks = _best_line(run, rows)
            ax.step(x, line, where="post", color=f"C{i}", linewidth=1.6,
                    linestyle=("-", "--", ":", "-.")[i % 4], label=f"{run.name} ({run.algorithm}): best so far")
            if has_rungs(run):
                _mark_rungs(ax, run, x, picks, f"C{i}", labelled=ax is axes[0][0])
    undated = [run.name for run in searches if seconds_since_start(run.table).isna().all()]
    if undated:
        axes[0][1].text(0.5, 0.08, f"no result times in the journal of {', '.join(undated)}", ha="center",
                        transform=axes[0][1].transAxes, fontsize=8)
    axes[0][0].set_xlabel("trial")
    axes[0][0].xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][1].set_xlabel(f"wall time ({unit})")
    rungs = "\nline: the pick's, at the rung it was ranked at" if any(map(has_rungs, searches)) else ""
    for ax in axes[0]:
        ax.set_ylabel(f"{searches[0].score} (proxy){rungs}")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return _svg(fig)


def pareto_front(cost: np.ndarray, accuracy: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats on both (lower cost, higher accuracy), by cost."""
    order = np.lexsort((-accuracy, cost))
    front, best = [], -np.inf
    for i in order:
        if accuracy[i] > best:
            front.append(i)
            best = accuracy[i]
    return np.array(front, dtype=int)


def pareto_figure(series: list[tuple[str, pd.DataFrame]], accuracy: str, ylabel: str,
                  annotate: bool = False, mode: str = "max") -> str | None:
    """Accuracy against parameters and against multiply-adds, one colour per series, the Pareto front
    of all points circled and joined (`annotate`: each point named; `mode` min: a smaller `accuracy`,
    a loss, is better). None when no point has both."""
    costs = [("params", "parameters"), ("multiply_adds", "multiply-adds")]
    if any("latency_ms" in t and t.latency_ms.notna().any() for _, t in series):
        costs.append(("latency_ms", "latency at batch 1 (ms)"))
    fig, axes = _axes(len(costs))
    drawn = False
    for ax, (cost, xlabel) in zip(axes[0], costs):
        points = []
        for i, (label, table) in enumerate(series):
            ok = table[(table.status == "ok") & table[cost].notna() & table[accuracy].notna()]
            if ok.empty:
                continue
            ax.scatter(ok[cost].astype(float), ok[accuracy].astype(float), s=14, alpha=0.6, color=f"C{i}",
                       label=label)
            _error_bars(ax, ok, cost, accuracy, f"C{i}")
            if annotate:
                for _, row in ok.iterrows():
                    ax.annotate(str(row["name"]), (float(row[cost]), float(row[accuracy])), fontsize=7,
                                xytext=(4, 4), textcoords="offset points")
            points.append(ok[[cost, accuracy]].astype(float).to_numpy())
        if not points:
            ax.text(0.5, 0.5, f"no {xlabel} recorded", ha="center", va="center", transform=ax.transAxes)
        else:
            drawn = True
            every = np.concatenate(points)
            front = every[pareto_front(every[:, 0], every[:, 1] if mode == "max" else -every[:, 1])]
            ax.step(front[:, 0], front[:, 1], where="post", color="black", linewidth=1, label="Pareto front")
            ax.scatter(front[:, 0], front[:, 1], s=60, facecolors="none", edgecolors="black")
            ax.set_xscale("log")
            ax.legend(fontsize=8, loc="best")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    if not drawn:
        import matplotlib.pyplot as plt

        plt.close(fig)
        return None
    return _svg(fig)


def _error_bars(ax: Any, rows: pd.DataFrame, cost: str, accuracy: str, colour: str) -> None:
    """Each point's 95% interval (`ACCURACY_low`, `ACCURACY_high`: a promote's Wilson intervals,
    experiments/promote/noise.py) as a vertical bar, where the table has them."""
    low, high = f"{accuracy}_low", f"{accuracy}_high"
    if low not in rows or high not in rows:
        return
    known = rows[rows[low].notna() & rows[high].notna()]
    if known.empty:
        return
    y = known[accuracy].astype(float)
    ax.errorbar(known[cost].astype(float), y, yerr=[y - known[low].astype(float), known[high].astype(float) - y],
                fmt="none", ecolor=colour, elinewidth=1, capsize=3, alpha=0.7)


def time_figure(histories: dict[str, list[dict[str, Any]]], targets: tuple[float, ...]) -> str | None:
    """Each promoted model's top-1 at its evaluations against its training wall time (with the
    evaluations, as DAWNBench counts it; in s, min or h by its length), one line each; the targets
    dashed. None without any."""
    runs = {name: sorted(rows, key=lambda r: r["step"]) for name, rows in histories.items() if rows}
    if not runs:
        return None
    fig, axes = _axes(1, width=8.0)
    ax = axes[0][0]
    unit, size = time_unit(max(r["wall_seconds"] for rows in runs.values() for r in rows))
    for i, (name, rows) in enumerate(runs.items()):
        ax.plot([r["wall_seconds"] / size for r in rows], [r["top1"] for r in rows], marker="o", markersize=3,
                color=f"C{i % 10}", linestyle="-" if i < 10 else "--", label=name)
    for target in targets:
        ax.axhline(target, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel(f"training wall time, evaluations included ({unit})")
    ax.set_ylabel("top-1 accuracy (evaluation split)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return _svg(fig)


def cell_figure(genotype: Any, title: str) -> str:
    """Both cells drawn by Graphviz, as inline SVG (GraphvizMissing when it is not installed)."""
    from experiments.report.cell_graph import genotype_dot, render

    text = render(genotype_dot(genotype, title=title), "svg").decode()
    return text[text.index("<svg"):]
