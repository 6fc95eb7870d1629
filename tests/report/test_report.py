"""amoeba report: the tables and figures of search and promote dirs, the report opened in headless
Chromium as a person would (no console error, every figure drawn, a screenshot kept), and a report
without Graphviz."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from experiments.promote.driver import PromoteConfig, comparison_table, write_comparison
from experiments.promote.promote_plan import open_plan
from experiments.report.driver import best_trials, build_report, load_run, pareto_front, search_summary
from experiments.search.driver import SearchConfig
from tests.conftest import amoeba_here as amoeba  # in this process: the browser is the process that matters
from tests.report.test_verdict import PROMOTED, _verdict_table

def figure_count(page: str) -> int:
    return page.count("<figure data-figure=")


CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def _search(folder: str, algorithm: str, n: int = 12) -> str:
    config = SearchConfig(output_dir=folder, algorithm=algorithm, max_trials=n, population_size=4, sample_size=2)
    os.makedirs(folder)
    search = config.new_algorithm(os.path.join(folder, "journal.jsonl"))
    rng = np.random.default_rng(len(algorithm))
    for _ in range(n):
        trial = search.ask()
        params = int(rng.integers(20_000, 90_000))
        search.tell(trial.trial_id, {"val_accuracy": float(rng.uniform(0.2, 0.6)), "params": params,
                                     "multiply_adds": params * 120, "trial_seconds": 3.0})
    search.tell(search.ask().trial_id, error="too large")
    search.close()
    return folder


def _promote(folder: str, search: str) -> str:
    """A promote dir as `amoeba promote` leaves it: its plan, two trained models' results, a comparison."""
    config = PromoteConfig(output_dir=folder, data=os.path.join(folder, "data"), recipe={"train_steps": 10},
                           search_dirs=(search,), top_k=1, baselines=("resnet20",), target_top1=0.45)
    planned = open_plan(config)
    from core import storage

    for i, m in enumerate(planned):
        storage.write_json(os.path.join(folder, "models", m.name, "result.json"), {
            "params": 270_000 + i, "multiply_adds": 40_000_000 + i, "top1": 0.6 - i / 10, "top5": 0.9, "epochs": 3,
            "wall_seconds": 100.0, "images_per_sec": 50.0, "num_eval_images": 10_000,
            "history": [{"step": 10, "wall_seconds": 60.0 * (i + 1), "top1": 0.5, "top5": 0.9}]})
        storage.write_text(os.path.join(folder, "models", m.name, "labels.txt"), "\n".join(map(str, range(10))))
    write_comparison(folder, comparison_table(config, planned, {}))
    return folder


@pytest.fixture
def runs(tmp_path):
    re_dir = _search(str(tmp_path / "re"), "regularized_evolution")
    random_dir = _search(str(tmp_path / "random"), "random")
    return [re_dir, random_dir, _promote(str(tmp_path / "promote"), re_dir)]


def test_pareto_front_keeps_points_nothing_beats():
    cost = np.array([1.0, 2.0, 3.0, 2.5, 4.0])
    accuracy = np.array([0.5, 0.4, 0.7, 0.7, 0.6])
    assert pareto_front(cost, accuracy).tolist() == [0, 3]


def test_report_tables_and_figures(runs):
    loaded = [load_run(folder) for folder in runs]
    page, text = build_report(loaded)
    assert "regularized_evolution" in text and "random" in text and "resnet20" in text
    opening = ("promote: First to top-1 0.45 (the highest target any model reached on the test split: no validation split was held out): the search's pick (re-trial")
    assert text.startswith(opening) and text.split("\n")[0].endswith(
        "1.0 min, 0.50x the time of resnet20 (2.0 min), a lead beyond noise (resnet20 had not finished an "
        "evaluation by then).")  # the report opens with the race; cells and ResNet-20: no change named
    assert page.split("<h2>")[0].endswith(f'<p class="headline">{html.escape(text.split(chr(10))[0])}</p>\n')
    loaded[2].settings["at_target"] = 0.78  # promoted by a re-ranking: the headline says so
    opening = build_report(loaded)[1].split("\n")[0]
    assert opening.endswith(" The searches' trials were ranked again at 0.78 (promote --at_target).")
    assert "On accuracy, the search's pick, re-trial" in text
    assert "), beats resnet20 (top-1 0.5000 [0.4902, 0.5098] on 10,000 images" in text
    assert "Chance is 0.1000." in text
    assert ">0.5000 [0.490, 0.510]</td>" in page and "search_dir" not in page.split("<h2>Settings")[0]
    assert re.search(r"On time to top1 0\.45, the search's pick, re-trial\d+ \(1\.0 min\), beats resnet20 "
                     r"\(2\.0 min\)\.", text)
    # progress, the search's Pareto figure, the promote's top-1 against time and its Pareto figure, and the
    # 3 + 3 best cells; the promoted cell is the evolution search's best, drawn once under both names
    assert figure_count(page) == 4 + 6
    assert 'data-figure="promote-time-promote"' in page
    assert re.search(r"re: trial \d+ = promote: re-trial\d+", page)
    assert not re.search(r'(src|href)="(https?:)?//|url\(https?:|<link', page)  # self-contained: nothing fetched
    assert '"population_size": 4' in html.unescape(page)  # the settings, to reproduce it
    with pytest.raises(FileNotFoundError, match="neither a search dir"):
        load_run(os.path.dirname(runs[0]))


def test_report_without_graphviz_still_has_its_tables(runs, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    page, text = build_report([load_run(folder) for folder in runs])
    assert "Cells are not drawn" in page and "apt-get install graphviz" in page
    assert "note: Cells are not drawn" in text
    assert figure_count(page) == 4 and "<table" in page


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium; "
                    "`make install` does it when run as root): the report is not opened in a browser")
@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed (apt-get install graphviz)")
def test_report_opens_in_headless_chromium(runs, tmp_path):
    result = amoeba("report", *runs, f"--output={tmp_path / 'report.html'}")
    assert "wrote" in result.stdout and "Searches" in result.stdout
    page = tmp_path / "report.html"
    expected = figure_count(page.read_text())
    url = f"file://{page}"
    browser = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--virtual-time-budget=5000", "--window-size=1280,2400"]
    shown = subprocess.run([*browser, "--enable-logging=stderr", "--v=0", "--dump-dom", url],
                           capture_output=True, text=True, timeout=120)
    console = [line for line in shown.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, f"console messages: {console}"
    assert f'data-figures-drawn="{expected}/{expected}"' in shown.stdout
    assert 'data-wide-tables="0"' in shown.stdout  # at 1280 px no table scrolls sideways
    screenshot = os.path.join(os.environ.get("AMOEBA_SCREENSHOT_DIR", str(tmp_path)), "report.png")
    subprocess.run([*browser, f"--screenshot={screenshot}", url], capture_output=True,
                   timeout=120, check=True)
    assert os.path.getsize(screenshot) > 20_000


def _scored(folder: str, results: list[dict], **settings) -> str:
    """A search dir whose trials reported `results`, in order."""
    from experiments.search.results import write_results

    config = SearchConfig(output_dir=folder, max_trials=len(results), population_size=4, sample_size=2, **settings)
    os.makedirs(folder)
    search = config.new_algorithm(os.path.join(folder, "journal.jsonl"))
    for metrics in results:
        search.tell(search.ask().trial_id, {"params": 1000, **metrics})
    write_results(search, folder)
    search.close()
    return folder


@pytest.mark.parametrize("settings, results, best", [
    # a loss: the smallest is best (the report named the largest)
    ({"objective": "val_loss", "mode": "min"}, [{"val_loss": 0.2}, {"val_loss": 0.9}, {"val_loss": 0.5}], 0),
    # MnasNet's reward: trial 1 is less accurate but ten times faster, and wins on the reward
    ({"latency_target_ms": 10.0}, [{"val_accuracy": 0.60, "latency_ms": 100.0},
                                   {"val_accuracy": 0.55, "latency_ms": 1.0}], 1),
])
def test_the_report_results_and_promote_rank_as_the_search_did(tmp_path, settings, results, best):
    import json

    from experiments.promote.promote_plan import top_genotypes

    folder = _scored(str(tmp_path / "s"), results, **settings)
    run = load_run(folder)
    summary = search_summary([run])
    assert summary["best trial"][0] == best
    assert summary["best"][0] == pytest.approx(run.table.set_index("trial_id")[run.score][best])
    assert json.load(open(os.path.join(folder, "best_genotype.json")))["trial_id"] == best
    assert top_genotypes(folder, 1)[0].search_trial_id == best
    assert best_trials(run).trial_id.tolist()[0] == best
    shown = amoeba("results", folder, "--top=1", "--format=json").stdout
    assert json.loads(shown)[0]["trial_id"] == best


def _rung_search(folder: str) -> str:
    """Trial 3 climbed to rung 1 (0.95 there); trial 4 leads rung 0 at 0.9 and stopped there (the
    rung's share was spent): the search's pick is trial 4, compared like with like."""
    from experiments.search.results import write_results

    config = SearchConfig(output_dir=folder, rungs=(1, 3), reduction_factor=2, population_size=4, sample_size=2)
    os.makedirs(folder)
    search = config.new_algorithm(os.path.join(folder, "journal.jsonl"))
    trials = [search.ask().trial_id for _ in range(5)]
    for tid, accuracy in zip(trials, (0.3, 0.35, 0.2, 0.5, 0.9)):
        search.report(tid, 0, {"val_accuracy": accuracy, "params": 100, "trial_seconds": 3.0})
    search.report(trials[3], 1, {"val_accuracy": 0.95, "params": 100, "trial_seconds": 3.0})
    for tid in trials:
        search.tell(tid, search.rung_results[tid][-1])
    write_results(search, folder)
    search.close()
    return folder


def _figure_of(monkeypatch, draw, *args, **kwargs):
    """The matplotlib figure a report_figures function draws, instead of its SVG text."""
    from experiments.report import report_figures

    monkeypatch.setattr(report_figures, "_svg", lambda fig: fig)
    return draw(*args, **kwargs)


def test_the_best_so_far_line_ends_at_the_summarys_best_under_rungs(tmp_path, monkeypatch):
    """Issue 34, defect 7: a running maximum of each trial's last-rung score mixes fidelities (0.95
    at rung 1 above 0.9 at rung 0); the line follows the search's own pick, as the summary does."""
    from experiments.report.report_figures import progress_figure

    run = load_run(_rung_search(str(tmp_path / "rungs")))
    best = search_summary([run])["best"][0]
    assert best == pytest.approx(0.9) and run.best_id == 4
    fig = _figure_of(monkeypatch, progress_figure, [run])
    by_trial, by_time = (ax.lines[0] for ax in fig.axes[:2])
    assert list(by_trial.get_xdata()) == [0, 1, 2, 3, 4]
    assert list(by_trial.get_ydata()) == pytest.approx([0.3, 0.35, 0.35, 0.95, 0.9])
    assert by_time.get_ydata()[-1] == pytest.approx(best)


def test_progress_figure_has_whole_trial_ticks_and_wall_time_in_a_unit_of_its_size(tmp_path, monkeypatch):
    from experiments.report.report_figures import progress_figure

    run = load_run(_scored(str(tmp_path / "s"), [{"val_accuracy": v, "trial_seconds": 2.0} for v in (0.2, 0.4, 0.3)]))
    fig = _figure_of(monkeypatch, progress_figure, [run])
    assert all(float(t).is_integer() for t in fig.axes[0].get_xticks())  # not 0.25, 0.5, ...
    assert fig.axes[1].get_xlabel() == "wall time (s)"  # a few seconds: not 0.001 hours
    assert max(fig.axes[1].lines[0].get_xdata()) < 60
    assert search_summary([run])["wall time"][0].endswith(" s")


def test_wall_times_are_shown_in_the_unit_of_their_size(monkeypatch):
    from experiments.report.report_figures import duration, time_figure

    assert [duration(s) for s in (42.0, 180.0, 5400.0)] == ["42 s", "3.0 min", "1.5 h"]
    history = [{"step": 5, "wall_seconds": 12.0, "top1": 0.3}, {"step": 10, "wall_seconds": 30.0, "top1": 0.5}]
    fig = _figure_of(monkeypatch, time_figure, {"resnet20": history}, (0.4,))
    assert fig.axes[0].get_xlabel() == "training wall time, evaluations included (s)"
    assert list(fig.axes[0].lines[0].get_xdata()) == [12.0, 30.0]


def test_the_promoted_models_scatter_has_wilson_error_bars(monkeypatch):
    from matplotlib.container import ErrorbarContainer

    from experiments.promote.noise import wilson_interval
    from experiments.report.report_figures import pareto_figure

    low, high = wilson_interval(0.70, 200)
    table = _verdict_table([{"name": "s-trial4", "kind": "searched", "top1": 0.70, "top1_low": low,
                             "top1_high": high, "multiply_adds": 10_000}])
    fig = _figure_of(monkeypatch, pareto_figure, [("promoted", table)], "top1", "top-1", annotate=True)
    bars = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 1
    (segment,) = bars[0].lines[2][0].get_segments()
    assert [segment[0][1], segment[1][1]] == pytest.approx([low, high])


@pytest.mark.parametrize("chance, shown", [(0.2, False), (0.1, True)])
def test_top5_is_left_out_with_five_classes_or_fewer(chance, shown):
    from experiments.promote.comparison import comparison_text
    from experiments.report.driver import promote_display

    table = _verdict_table(PROMOTED[:2]).assign(chance_top1=chance, top5=1.0, wall_seconds=10.0,
                                                images_per_sec=5.0, multiply_adds=100, error="",
                                                search_val_accuracy=0.6)
    assert ("top-5" in promote_display(table)) is shown
    assert ("top5" in comparison_text(table)) is shown


def test_the_report_says_when_the_best_is_the_seed_the_search_was_given(tmp_path):
    from searchspace.references import REFERENCES

    folder = str(tmp_path / "seeded")
    config = SearchConfig(output_dir=folder, max_trials=4, population_size=4, sample_size=2,
                          initial=(REFERENCES["amoebanet_a"].to_json(),))
    os.makedirs(folder)
    search = config.new_algorithm(os.path.join(folder, "journal.jsonl"))
    for accuracy in (0.9, 0.5, 0.6, 0.4):
        search.tell(search.ask().trial_id, {"val_accuracy": accuracy, "params": 1000, "multiply_adds": 10_000})
    search.close()
    page, text = build_report([load_run(folder), load_run(_promote(str(tmp_path / "promote"), folder))])
    assert "seeded: the best is the seed you gave (amoebanet_a, trial 0); the search found nothing better in " \
           "its 3 other trials." in text
    assert "the best searched cell" not in text
    assert "the search's pick, seeded-trial0, is the seed you gave (amoebanet_a, trial 0); the search found " \
           "nothing better in its 3 other trials. It (top-1 0.6000" in text


def test_the_seed_note_names_a_convnet_seed_and_counts_no_repeat_of_it_as_another_trial():
    import pandas as pd

    from experiments.report.driver import seed_note
    from searchspace import CONVNET_REFERENCES

    seed, child = CONVNET_REFERENCES["airbench94_relu"].key(), CONVNET_REFERENCES["airbench94"].key()
    table = pd.DataFrame({"trial_id": [0, 1, 2, 3], "mutation": ["initial", "initial", "stage 0 width 64 -> 48", "x"],
                          "key": [seed, seed, child, child], "status": ["ok", "ok", "ok", "pending"]})
    assert seed_note(table, 0) == ("the seed you gave (airbench94_relu, trial 0); the search found nothing better "
                                   "in its 1 other trial")
    assert seed_note(table, 2) is None


# ---- review of issue 34 ----

def _quadratic_picks(algorithm, order):
    """picks_so_far's plain definition: the search's pick among the trials so far, ranked afresh each time."""
    from experiments.search import ranking

    results, seen, picks = set(ranking.rankable(algorithm)), [], []
    for tid in order:
        if tid in results:
            seen.append(tid)
        top = ranking.ranked(algorithm, 1, among=seen)
        picks.append(top[0] if top else None)
    return picks


def resume_journal(folder: str):
    from evolution import resume

    return resume(os.path.join(folder, "journal.jsonl"), read_only=True)


def _random_rung_search(folder: str, n: int = 40, seed: int = 0):
    """Trials reported at random rungs (ties in score and size among them), some failed, some still training."""
    config = SearchConfig(output_dir=folder, rungs=(1, 3, 9), reduction_factor=2, population_size=4, sample_size=2)
    os.makedirs(folder)
    search = config.new_algorithm(os.path.join(folder, "journal.jsonl"))
    rng = np.random.default_rng(seed)
    for tid in [search.ask().trial_id for _ in range(n)]:
        if rng.random() < 0.1:
            search.tell(tid, error="too large")
            continue
        rung, decision = 0, "continue"
        while decision == "continue" and rung <= 2 and (rung == 0 or rng.random() < 0.7):
            accuracy = round(tid / n + rng.random(), 1)  # rising, so later trials climb too; ties
            decision = search.report(tid, rung, {"val_accuracy": accuracy,
                                                 "params": int(rng.integers(1, 4)), "trial_seconds": 1.0})
            rung += 1
        if rng.random() < 0.8:
            search.tell(tid, search.rung_results[tid][-1])
    return search


@pytest.mark.parametrize("seed", [1, 2])
def test_picks_so_far_is_the_search_pick_among_the_trials_so_far(tmp_path, seed):
    """Review of issue 34, 1: picks_so_far carries each rung's leader instead of ranking every prefix
    afresh (quadratic: a minute per axis at 10,000 trials); the picks are the same, in any order."""
    from experiments.search import ranking

    search = _random_rung_search(str(tmp_path / "s"), seed=seed)
    order = list(np.random.default_rng(seed).permutation(len(search.trials)))
    assert {search.highest_rung(t) for t in ranking.rankable(search)} == {0, 1, 2}
    assert len(set(ranking.picks_so_far(search, order)) - {None}) > 2
    assert ranking.picks_so_far(search, order) == _quadratic_picks(search, order)
    assert ranking.picks_so_far(search, sorted(search.trials))[-1] == ranking.ranked(search, 1)[0]
    search.close()
    plain = load_run(_search(str(tmp_path / "plain"), "random"))  # one fidelity
    assert plain.picks(order[:13]) == _quadratic_picks(resume_journal(plain.folder), order[:13])


def test_a_promote_report_whose_search_journal_is_damaged_leaves_the_seed_note_out(tmp_path, caplog):
    """Review of issue 34, 2: a promote report replays each search's journal for the seed note only;
    a journal that cannot be replayed loses that note, with a warning, not the report."""
    search = _search(str(tmp_path / "s"), "regularized_evolution")
    promote = _promote(str(tmp_path / "promote"), search)
    with open(os.path.join(search, "journal.jsonl"), "w") as journal:
        journal.write('{"event": "start", "version": 999}\nnot json\n')
    with caplog.at_level("WARNING"):
        run = load_run(promote)
    assert run.seeds == {}
    assert "journal.jsonl" in caplog.text and "seed" in caplog.text
    assert "On accuracy, the search's pick" in build_report([run])[1]


def test_the_best_so_far_line_says_its_heights_are_at_the_rung_each_pick_was_ranked_at(tmp_path, monkeypatch):
    """Review of issue 34, 3: with rungs the line drops (0.95 at rung 1, then the rung-0 leader's 0.9):
    each step is marked with the rung its pick was ranked at, and the axis says so."""
    from experiments.report.report_figures import progress_figure

    run = load_run(_rung_search(str(tmp_path / "rungs")))
    fig = _figure_of(monkeypatch, progress_figure, [run])
    marks = {line.get_label(): list(line.get_xdata()) for line in fig.axes[0].lines[1:]}
    assert marks == {"rungs: pick ranked at rung 0 (1 epochs)": [0, 1, 4],
                     "rungs: pick ranked at rung 1 (3 epochs)": [3]}
    assert "at the rung it was ranked at" in fig.axes[0].get_ylabel()
    page, _ = build_report([run])
    assert "a pick at a lower rung can sit below one at a higher rung" in page
    plain = load_run(_scored(str(tmp_path / "s"), [{"val_accuracy": v} for v in (0.2, 0.4, 0.3)]))
    fig = _figure_of(monkeypatch, progress_figure, [plain])
    assert len(fig.axes[0].lines) == 1 and "rung" not in fig.axes[0].get_ylabel()  # one fidelity: as before
