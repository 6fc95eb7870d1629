"""One self-contained HTML report (figures as inline SVG: no network needed to view it) and the same
tables as text, from search dirs and promote dirs.

What it shows: each search's progress (every trial's accuracy and the best so far, against trial
number and wall time; several searches, e.g. regularized evolution and random, on the same axes),
accuracy against parameters, multiply-adds and latency with the Pareto front marked, the best genotypes'
cells drawn by Graphviz, the comparison of promoted models and baselines with its verdict
(experiments/promote/comparison.py: each search's pick, never the best on the test split), and the
settings of each run. Reads only the runs' own files (and the search dirs a promote names);
must not train, search or talk to Ray.
"""

from __future__ import annotations

import functools
import html
import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from evolution import JournalError, resume
from experiments.search import ranking
from experiments.promote.comparison import (comparison_text, promote_verdict, rank_agreement, same_net_sentences,
                                            top5_trivial)
from experiments.promote.headline import headline
from experiments.layout import CONFIG, JOURNAL, PLAN, RESULT
from experiments.promote.driver import read_comparison, step_seconds
from experiments.promote.seed_race import seed_race_sentences
from experiments.promote.promote_plan import best_distinct_trials
from experiments.report.report_figures import (  # noqa: F401 - pareto_front: its public name here too
    cell_figure, duration, has_rungs, pareto_figure, pareto_front, progress_figure, seconds_since_start,
    time_figure)
from experiments.search.results import results_table
from experiments.promote.targets import parse_column

TOP_GENOTYPES = 3  # cells drawn per search

log = logging.getLogger(__name__)
RUNG_CAPTION = (" With rungs, each step of the line is the pick's score at the rung it was ranked at (its marker's "
                "shape), so a pick at a lower rung can sit below one at a higher rung: the line can drop.")


@dataclass
class SearchRun:
    name: str
    folder: str
    algorithm: str
    objective: str
    table: pd.DataFrame  # experiments/search/results.py's results table
    settings: dict[str, Any]
    picks: Callable[[list[int]], list[int | None]]  # the search's pick after each trial of an order
    genotypes: dict[int, Any] = field(default_factory=dict)  # trial id -> genotype, of the best trials
    score: str = ""  # the column the search ranked by: the objective, or "reward" with one
    mode: str = "max"  # the search's direction: max or min
    best_id: int | None = None  # the best trial as the search ranks them (experiments/search/ranking.py)

    def __post_init__(self) -> None:
        self.score = self.score or self.objective


@dataclass
class PromoteRun:
    name: str
    folder: str
    table: pd.DataFrame  # experiments/promote/driver.py's comparison
    settings: dict[str, Any]
    genotypes: dict[str, dict[str, Any]] = field(default_factory=dict)  # model name -> genotype JSON
    histories: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # model name -> its evaluations
    seeds: dict[str, str] = field(default_factory=dict)  # model name -> what to say of a seed the search was given


def load_run(folder: str) -> SearchRun | PromoteRun:
    """The run in `folder`: a search (journal.jsonl) or a promote (promote_plan.json + comparison)."""
    name = os.path.basename(os.path.normpath(folder))
    if os.path.exists(os.path.join(folder, JOURNAL)):
        algorithm = resume(os.path.join(folder, JOURNAL), read_only=True)
        table = results_table(algorithm)
        settings_path = os.path.join(folder, CONFIG)
        if os.path.exists(settings_path):
            settings = json.load(open(settings_path))
        else:  # a journal written without `amoeba search`: its start event says what was searched
            with open(os.path.join(folder, JOURNAL)) as journal:
                settings = json.loads(journal.readline())
        # the cells `amoeba promote --top_k` would pick: distinct, ties to fewer parameters
        genotypes = {tid: algorithm.trials[tid].genotype for tid in best_distinct_trials(algorithm, TOP_GENOTYPES)}
        best = ranking.ranked(algorithm, 1)
        return SearchRun(name, folder, type(algorithm).name, algorithm.objective, table, settings,
                         functools.partial(ranking.picks_so_far, algorithm), genotypes,
                         score=ranking.score_name(algorithm), mode=algorithm.mode, best_id=best[0] if best else None)
    if os.path.exists(os.path.join(folder, PLAN)) and os.path.exists(os.path.join(folder, "comparison.csv")):
        plan = json.load(open(os.path.join(folder, PLAN)))
        genotypes = {m["name"]: m["genotype"] for m in plan["models"] if m.get("genotype")}
        results = {m["name"]: os.path.join(folder, "models", m.get("same_as") or m["name"], RESULT)
                   for m in plan["models"]}  # a twin of a baseline: the baseline's training
        histories = {n: json.load(open(path)).get("history", []) for n, path in results.items() if os.path.exists(path)}
        table = read_comparison(folder)
        return PromoteRun(name, folder, table, plan["settings"], genotypes, histories, _promoted_seeds(table))
    raise FileNotFoundError(f"{folder}: neither a search dir ({JOURNAL}) nor a promote dir ({PLAN} and "
                            "comparison.csv)")


# ---- tables ----

def search_summary(searches: list[SearchRun]) -> pd.DataFrame:
    """One row per search: its trials, and its best as the search ranked them (score and mode)."""
    rows = []
    for run in searches:
        t = run.table
        ok = t[t.status == "ok"][run.score].astype(float)
        best = t.set_index("trial_id")[run.score].get(run.best_id) if run.best_id is not None else None
        seconds = seconds_since_start(t[t.status != "pending"]).max()  # NaN: a journal without times
        rows.append({"search": run.name, "algorithm": run.algorithm, "ranked by": f"{run.score}:{run.mode}",
                     "trials": int((t.status != "pending").sum()), "ok": len(ok),
                     "failed": int((t.status == "failed").sum()), "best": best, "median": ok.median(),
                     "best trial": run.best_id,
                     "wall time": duration(float(seconds)) if len(ok) and pd.notna(seconds) else None})
    return pd.DataFrame(rows)


def seed_note(table: pd.DataFrame, trial_id: int | None) -> str | None:
    """`the seed you gave (amoebanet_a, trial 0); the search found nothing better in its 59 other trials`
    when the search's best is a seed it was given (--initial, mutation "initial"), named when it is a
    reference (a NASNet cell or a convnet); the other trials are those of other networks. None otherwise."""
    rows = table.set_index("trial_id")
    if trial_id is None or rows.mutation.get(trial_id) != "initial":
        return None
    from searchspace import CONVNET_REFERENCES
    from searchspace.references import REFERENCES

    key = rows.key[trial_id]
    named = {**REFERENCES, **CONVNET_REFERENCES}
    name = next((n for n, g in named.items() if g.key() == key), "a genotype of --initial")
    others = int(((rows.status != "pending") & (rows.key != key)).sum())  # repeats of the seed are not others
    return (f"the seed you gave ({name}, trial {trial_id}); the search found nothing better in its {others} "
            f"other trial{'s' * (others != 1)}")


def _promoted_seeds(table: pd.DataFrame) -> dict[str, str]:
    """Promoted cells that are seeds their search was given: model name -> seed_note (each search dir's
    journal replayed read-only, where it still is; one that cannot be read or replayed loses its
    notes, with a warning, not the report)."""
    seeds: dict[str, str] = {}
    tables: dict[str, pd.DataFrame | None] = {}
    for _, row in table[(table.kind == "searched") & table.search_dir.notna()].iterrows():
        if row.search_dir not in tables:
            tables[row.search_dir] = _search_table(row.search_dir)
        found = tables[row.search_dir]
        note = seed_note(found, int(row.search_trial_id)) if found is not None else None
        if note:
            seeds[row["name"]] = note
    return seeds


def _search_table(search_dir: str) -> pd.DataFrame | None:
    """The results table of the search in `search_dir` (None: its journal is gone, or cannot be read
    or replayed, warned)."""
    path = os.path.join(search_dir, JOURNAL)
    if not os.path.exists(path):
        return None
    try:
        return results_table(resume(path, read_only=True))
    except (JournalError, OSError, ValueError) as err:
        log.warning("report: %s cannot be replayed (%s); whether its promoted cells are seeds is left out",
                    path, err)
        return None


def best_trials(run: SearchRun) -> pd.DataFrame:
    """The search's best distinct trials, in promote's order."""
    best = run.table.set_index("trial_id").loc[list(run.genotypes)].reset_index()
    rungs = ["rung", "epochs"] if best.rung.notna().any() else []  # a multi-fidelity search's
    measured = [c for c in ("reward", "latency_ms", "step_ms") if c in best and best[c].notna().any()]
    measured = [c for c in measured if c != run.objective]
    return best[["trial_id", *rungs, run.objective, *measured, "params", "multiply_adds", "mutation", "genotype"]]


def _cell(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _html_table(table: pd.DataFrame) -> str:
    shown = table.astype(object).map(_cell)
    return f'<div class="scroll">{shown.to_html(index=False, border=0, classes="table")}</div>'



def promote_display(table: pd.DataFrame) -> pd.DataFrame:
    """The comparison as the report shows it, narrow enough for a 1280 px window: top-1 with its 95%
    interval in one column, sizes in millions, times in seconds and training multiply-adds in
    teraMACs under short headers; the columns a reader does not compare (model family, search dir,
    chance: the verdict says it; top-5 with 5 classes or fewer) left out, and the error column only
    when a model failed."""
    def millions(v: Any) -> str:
        return f"{v / 1e6:.2f}M" if pd.notna(v) else ""

    def top1(row: pd.Series) -> str:
        if pd.isna(row.top1):
            return ""
        interval = row.get("top1_low")
        return f"{row.top1:.4f}" + (f" [{interval:.3f}, {row.top1_high:.3f}]" if pd.notna(interval) else "")

    shown = pd.DataFrame({"name": table["name"], "kind": table["kind"], "status": table["status"],
                          "params": table["params"].map(millions), "MACs": table["multiply_adds"].map(millions),
                          "top-1 [95%]": table.apply(top1, axis=1) if len(table) else [],
                          "eval images": table.get("eval_images"),
                          **({} if top5_trivial(table) else {"top-5": table["top5"]}),
                          "epochs": table["epochs"], "wall s": table["wall_seconds"],
                          "images/s": table["images_per_sec"]})
    for column in table:
        parsed = parse_column(column)
        if not parsed or table[column].isna().all():
            continue
        measure, metric, target = parsed
        at = f"{metric} {target:g}" if target else metric
        if measure == "time":
            shown[f"s to {at}"] = table[column]
        elif measure == "macs":
            shown[f"TMACs to {at}"] = table[column].map(lambda v: f"{v / 1e12:.2f}" if pd.notna(v) else "")
        else:
            shown[f"$ to {at}"] = table[column]
    shown["search score"] = table["search_val_accuracy"]
    if table["error"].notna().any() and (table["error"].fillna("") != "").any():
        shown["error"] = table["error"]
    return shown.dropna(axis=1, how="all")


def _settings_block(run: SearchRun | PromoteRun) -> str:
    return f"<details><summary>{html.escape(run.name)}</summary><pre>{html.escape(json.dumps(run.settings, indent=2, sort_keys=True))}</pre></details>"


# ---- the report ----

STYLE = """
body { font-family: Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1250px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table.table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
table.table th, table.table td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; }
table.table td:last-child { text-align: left; max-width: 520px; overflow-wrap: anywhere; }
figure { margin: 0.8em 0; } figure svg { max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #555; }
.note { background: #fff6dd; border: 1px solid #e8d9a8; padding: 0.5em 0.8em; }
.headline { font-size: 1.15em; font-weight: bold; }
.scroll { overflow-x: auto; }
pre { background: #f6f6f6; padding: 0.6em; font-size: 0.8em; overflow-x: auto; }
"""

# Marks each figure drawn or not, for a reader's browser console and for the test that opens the report.
CHECK_FIGURES = """
window.addEventListener("load", function () {
  var figures = document.querySelectorAll("figure[data-figure]"), drawn = 0;
  figures.forEach(function (f) {
    var svg = f.querySelector("svg"), box = svg && svg.getBoundingClientRect();
    if (box && box.width > 40 && box.height > 40 && svg.querySelector("path, polygon, text, use")) { drawn++; }
    else { console.error("figure did not render: " + f.getAttribute("data-figure")); }
  });
  document.body.setAttribute("data-figures-drawn", drawn + "/" + figures.length);
  var wide = Array.from(document.querySelectorAll(".scroll")).filter(function (d) {
    return d.scrollWidth > d.clientWidth + 1; }).length;  // tables a reader must scroll sideways
  document.body.setAttribute("data-wide-tables", String(wide));
});
"""


def _figure(name: str, svg: str, caption: str) -> str:
    return (f'<figure data-figure="{html.escape(name)}">{svg}<figcaption>{html.escape(caption)}</figcaption>'
            "</figure>")


def build_report(runs: list[SearchRun | PromoteRun]) -> tuple[str, str]:
    """(report.html, the same tables as text)."""
    searches = [r for r in runs if isinstance(r, SearchRun)]
    promotes = [r for r in runs if isinstance(r, PromoteRun)]
    body: list[str] = [f"<h1>amoeba-nas report: {html.escape(', '.join(r.name for r in runs))}</h1>"]
    text: list[str] = []
    notes: list[str] = []
    if searches:
        _search_sections(searches, body, text)
    if promotes:
        _promote_sections(promotes, body, text)
    _cell_sections(searches, promotes, body, text, notes)
    body += ["<h2>Settings</h2>", "<p>Each run's own settings file, to reproduce it.</p>",
             *[_settings_block(r) for r in runs]]
    for note in dict.fromkeys(notes):
        body.insert(1, f'<p class="note">{html.escape(note)}</p>')
        text.insert(0, f"note: {note}")
    for run in reversed(promotes):  # the report opens with each promote's race in one sentence
        said = headline(run.table, run.histories, run.genotypes, run.seeds)
        if said and run.settings.get("at_target"):  # promote --at_target: not the search's own ranking
            said += f" The searches' trials were ranked again at {run.settings['at_target']:g} (promote --at_target)."
        if said:
            body.insert(1, f'<p class="headline">{html.escape(run.name)}: {html.escape(said)}</p>')
            text.insert(0, f"{run.name}: {said}")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>amoeba-nas report</title>"
            f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(body) + f"\n<script>{CHECK_FIGURES}</script>\n"
            "</body></html>\n")
    return page, "\n\n".join(text)


def _search_sections(searches: list[SearchRun], body: list[str], text: list[str]) -> None:
    summary = search_summary(searches)
    body += ["<h2>Search progress</h2>", _html_table(summary),
             _figure("progress", progress_figure(searches), "Each trial's proxy score (dots) and the best "
                     "so far as the search ranks (line; with rungs, like with like), against trial number (left) "
                     "and wall time (right)." + RUNG_CAPTION * any(map(has_rungs, searches)))]
    text += ["Searches", summary.to_string(index=False, float_format=lambda v: f"{v:.4g}")]
    for run in searches:
        note = seed_note(run.table, run.best_id)
        if note:
            body.append(f"<p>{html.escape(run.name)}: the best is {html.escape(note)}.</p>")
            text.append(f"{run.name}: the best is {note}.")
    pareto = pareto_figure([(r.name, r.table) for r in searches], searches[0].objective,
                           f"proxy {searches[0].objective}", mode=searches[0].mode)
    if pareto:
        body += ["<h2>Search: accuracy against size and cost</h2>",
                 _figure("search-pareto", pareto, "Every successful trial; the Pareto front (no other trial "
                         "is both smaller and better) circled.")]


def _promote_sections(promotes: list[PromoteRun], body: list[str], text: list[str]) -> None:
    body.append("<h2>Promoted models and baselines</h2>")
    for run in promotes:
        shown = run.table.sort_values("top1", ascending=False)
        body += [f"<h3>{html.escape(run.name)}</h3>", _html_table(promote_display(shown))]
        text += [f"Promoted: {run.name}", comparison_text(run.table)]
        verdict = promote_verdict(run.table, run.seeds)
        if verdict:
            body.append(f"<p><b>{html.escape(verdict)}</b></p>")
            text.append(verdict)
        seeded = seed_race_sentences(run.table, run.histories, step_seconds(run.folder))
        for sentence in rank_agreement(run.table) + same_net_sentences(run.table) + [" ".join(seeded)] * bool(seeded):
            body.append(f"<p>{html.escape(sentence)}</p>")
            text.append(sentence)
    kinds = [(f"{r.name}: {kind}", r.table[r.table.kind == kind]) for r in promotes for kind in ("searched",
                                                                                             "baseline")]
    for run in promotes:
        targets = sorted({p[2] for p in map(parse_column, run.table) if p and p[1] == "top1" and p[2]})
        timed = time_figure(run.histories, tuple(targets))
        if timed:
            body.append(_figure(f"promote-time-{run.name}", timed, f"{run.name}: each model's top-1 on the "
                                "evaluation split against its training time; targets dotted."))
    pareto = pareto_figure(kinds, "top1", "top-1 accuracy (evaluation split)", annotate=True)
    if pareto:
        body.append(_figure("promote-pareto", pareto, "Promoted cells and baselines: top-1 on the evaluation "
                            "split (bars: Wilson 95% intervals) against parameters and multiply-adds; the Pareto "
                            "front circled."))


def _cell_sections(searches: list[SearchRun], promotes: list[PromoteRun], body: list[str], text: list[str],
                   notes: list[str]) -> None:
    """Each search's best trials, and every best cell drawn once under all its names."""
    from experiments.report.cell_graph import GraphvizMissing
    from searchspace import NasNetGenotype, genotype_from_json

    named = [(f"{r.name}: trial {tid}", g) for r in searches for tid, g in r.genotypes.items()]
    named += [(f"{r.name}: {name}", genotype_from_json(g)) for r in promotes for name, g in r.genotypes.items()]
    cells: dict[str, tuple[list[str], Any]] = {}  # one drawing per genotype, all its names
    for title, genotype in named:
        cells.setdefault(genotype.key(), ([], genotype))[0].append(title)
    if not cells:
        return
    body.append("<h2>Best cells</h2>")
    for r in searches:
        table = best_trials(r)
        body += [f"<h3>{html.escape(r.name)}: its best trials</h3>", _html_table(table)]
        text += [f"Best trials: {r.name}", table.drop(columns="genotype").to_string(
            index=False, float_format=lambda v: f"{v:.4g}")]
    for i, (titles, genotype) in enumerate(cells.values()):
        title = " = ".join(titles)
        as_text = f"<p><b>{html.escape(title)}</b>: <code>{html.escape(str(genotype))}</code></p>"
        if not isinstance(genotype, NasNetGenotype):  # a space of one's own: its genotype as text
            body.append(as_text)
            continue
        try:
            body.append(_figure(f"cell-{i}", cell_figure(genotype, title), f"{title}: {genotype}"))
        except GraphvizMissing as err:
            notes.append(f"Cells are not drawn: {err}.")
            body.append(as_text)
