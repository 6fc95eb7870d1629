"""Reading a promote's comparison (experiments/promote/driver.py writes it): its terminal table, which
model to export, and the verdict the report prints, each saying how sure it is.

One rule picks on the searched side: each search's pick, the promoted cell that search ranked first
(`search_rank`, its own objective on its own validation split), never the best of several cells on
the evaluation split (a maximum of noisy figures). The pick is judged against each baseline on its
own, top-1 by McNemar's paired test on the same images where both keep which images they got right
(`eval_correct`; the export's choice: `val_correct`, on the validation split), else by Wilson 95%
intervals (a comparison made before those were kept; experiments/promote/noise.py). Pure pandas: this
module must not read files, train or import TensorFlow.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from core.correct_images import decoded
from experiments.promote import noise
from experiments.units import duration
from experiments.promote.targets import column, first_at, parse_column

EXPORT_CHOICES = ("accuracy", "time_to_target")  # what --export_choice may say (experiments/promote/promote_config.py)
INHERITED, FINE_TUNED = "inherited", "fine-tuned"  # kinds: a supernet search's net as it inherits, and tuned
TRIVIAL_TOP5_CLASSES = 5  # with this many classes or fewer, top-5 is 1.0 for every model


def comparison_text(table: pd.DataFrame) -> str:
    """The comparison as a terminal table: the columns a reader compares, best top-1 first (top-5
    left out where it is trivial)."""
    shown = ["name", "status", "params", "multiply_adds", "top1", "top1_low", "top1_high", "eval_images",
             *([] if top5_trivial(table) else ["top5"]), "epochs", "wall_seconds", "images_per_sec",
             *[c for c in table if (parse_column(c) or ("",))[0] in ("time", "cost")]]
    shown = [c for c in shown if c in table and (table[c].notna().any() or c in ("name", "status"))]
    ordered = table.sort_values("top1", ascending=False, na_position="last")[shown]
    return ordered.to_string(index=False, float_format=lambda v: f"{v:.4g}")


def top5_trivial(table: pd.DataFrame) -> bool:
    """Whether every model's classes (1 / chance) are 5 or fewer: top-5 is then 1.0, and says nothing."""
    chance = table["chance_top1"].dropna() if "chance_top1" in table else pd.Series(dtype=float)
    return len(chance) > 0 and bool(((1 / chance).round() <= TRIVIAL_TOP5_CLASSES).all())


def search_picks(table: pd.DataFrame) -> pd.DataFrame:
    """Each search's pick among its promoted cells that finished: the best-ranked (`search_rank`; 1
    unless its first failed: `_who` then says so; a comparison written before ranks were kept: the
    first in plan order, which is the search's order)."""
    searched = table[(table.kind == "searched") & (table.status == "ok")]
    if "search_rank" in searched:
        searched = searched.sort_values("search_rank", kind="stable")
    dirs = searched["search_dir"].fillna("") if "search_dir" in searched else pd.Series("", index=searched.index)
    return searched.groupby(dirs, sort=False).head(1)


def contenders(table: pd.DataFrame) -> pd.DataFrame:
    """The models an export chooses among and a race is run between: each search's pick and the
    baselines that finished; a pick that is a baseline's twin (`same_as`) is that baseline, once."""
    picks = search_picks(table)
    if "same_as" in picks:
        picks = picks[picks.same_as.isna() | (picks.same_as == "")]
    return pd.concat([picks, table[(table.kind == "baseline") & (table.status == "ok")]])


def twin_of(cell: pd.Series) -> str | None:
    """The baseline a searched model is the same network as (trained once, under its name), or None."""
    twin = cell.get("same_as")
    return str(twin) if isinstance(twin, str) and twin else None


def choice_split(pool: pd.DataFrame) -> tuple[str, str, str]:
    """(the accuracy column a choice reads, its images column, its name in words): the validation
    split held out of the training split (`val_top1`) where every model of `pool` has one, else the
    evaluation split's top-1, said so (a promote run with --validation_images=0, or before it)."""
    if len(pool) and "val_top1" in pool and pool["val_top1"].notna().all():
        return "val_top1", "val_images", "validation top-1"
    return "top1", "eval_images", "top-1"


CORRECT = {"top1": ("eval_correct", "eval_images"), "val_top1": ("val_correct", "val_images")}  # a split's columns


def versus(a: pd.Series, b: pd.Series, metric: str = "top1") -> tuple[str, str | None]:
    """How row `a` stands to row `b` on `metric` (top1, or val_top1: the validation split) and the
    paired test in words: McNemar's (noise.compared_paired) where both rows keep which of the same
    images they got right, matching their `metric`; else noise.compared on Wilson intervals, and None."""
    correct, counts = CORRECT[metric]
    mine, theirs = _correct(a, correct, metric), _correct(b, correct, metric)
    if mine is not None and theirs is not None and len(mine) == len(theirs):
        return noise.compared_paired(mine, theirs)
    return noise.compared(a[metric], images(a, counts), b[metric], images(b, counts)), None


def _correct(row: pd.Series, column_name: str, metric: str) -> np.ndarray | None:
    """A row's per-image correctness (`column_name`) where it has one over one or more images that
    gives its `metric` (a stray one, of another evaluation, is not taken); else None."""
    flags = decoded(row.get(column_name))
    if flags is None or not len(flags) or not abs(flags.mean() - float(row[metric])) <= 0.5 / len(flags):
        return None
    return flags


def _tested(test: str | None) -> str:
    """`; McNemar's paired test ...`, to close a model's brackets with; "" without a paired test."""
    return f"; {test}" if test else ""


NO_VALIDATION = " (chosen on the evaluation split: the promote held out no validation split)"


def images(row: pd.Series, column_name: str = "eval_images") -> int | None:
    """The images a row's top-1 (`val_images`: its validation top-1) is over (None: not kept)."""
    n = row.get(column_name)
    return int(n) if n is not None and pd.notna(n) else None


def _top1(row: pd.Series) -> str:
    return f"top-1 {noise.shown(row.top1, images(row))}"


def choose(table: pd.DataFrame, by: str, target: float | None = None,
           histories: Mapping[str, list] | None = None) -> tuple[str, str]:
    """(the model to export, why, in words), among each search's pick and the baselines, on the
    validation split (choice_split; never the evaluation split where one was held out): by
    "accuracy", the most accurate (ties: fewer parameters), saying when it is within noise of the
    next; by "time_to_target", the first to validation top-1 `target` in its evaluation history
    (`histories`: name -> rows; a miss ranks after every hit, then by accuracy). ValueError when none
    finished."""
    pool = contenders(table)
    if pool.empty:
        raise ValueError("--export_dir: no model finished, nothing to export")
    among = _among(search_picks(table))
    metric, counts, said = choice_split(pool)
    if by == "time_to_target":
        name, why = _first_to(pool, target, among, (metric, counts, said), histories or {})
        return name, why + (NO_VALIDATION if metric == "top1" else "")

    def shown(row: pd.Series) -> str:
        return f"{said} {noise.shown(row[metric], images(row, counts))}"

    order = pool.sort_values([metric, "params"], ascending=[False, True])
    winner = order.iloc[0]
    why = f"the most accurate {among}, {shown(winner)}"
    if len(order) > 1:
        second = order.iloc[1]
        word, test = versus(winner, second, metric)
        why += f"; it {word} {second['name']} ({shown(second)}{_tested(test)})"
        if word == "is within noise of":
            why += (": a toss-up on accuracy (--export_choice=time_to_target "
                    f"{'' if target is not None else 'with --target_top1 '}exports the first to a target)")
    return winner["name"], why + (NO_VALIDATION if metric == "top1" else "")


def _among(picks: pd.DataFrame) -> str:
    """`of the search's pick (NAME) and the baselines`: what an export chose among, each searched cell
    named as the verdict names it (`_who`: one not its search's first is its best-ranked that finished)."""
    if picks.empty:
        return "of the baselines"
    if all(_first(cell) for _, cell in picks.iterrows()):
        whose = "the search's pick" if len(picks) == 1 else "the searches' picks"
        return f"of {whose} ({', '.join(picks['name'])}) and the baselines"
    return "of " + _joined([*(_who(cell, named=True) for _, cell in picks.iterrows()), "the baselines"])


def _first_to(pool: pd.DataFrame, target: float | None, among: str, split: tuple[str, str, str],
              histories: Mapping[str, list]) -> tuple[str, str]:
    """choose's "time_to_target": the contender of `pool` first to `target` on the split choice_split
    chose (its evaluation history's `metric`; the comparison's time column where the split is the
    evaluation split's and no history is given), and why."""
    metric, counts, said = split
    if not target:
        raise ValueError("--export_choice=time_to_target: no target to race to (give --target_top1)")
    if metric == "top1" and column("time", "top1", target) in pool:
        times = pool[column("time", "top1", target)].astype(float)
    elif all(histories.get(name) for name in pool["name"]):
        times = pd.Series([first_at(histories[name], metric, target) for name in pool["name"]],
                          index=pool.index, dtype=float)
    else:
        raise ValueError(f"--export_choice=time_to_target: no evaluation history to time {said} {target:g} by")
    order = pool.assign(_missed=times.isna(), _time=times, _top1=-pool[metric]).sort_values(
        ["_missed", "_time", "_top1", "params"])
    winner, rest = order.iloc[0], order.iloc[1:]
    if pd.isna(winner["_time"]):
        return winner["name"], (f"none reached {said} {target:g}: the most accurate {among}, "
                                f"{said} {noise.shown(winner[metric], images(winner, counts))}")
    others = "".join(f"; {r['name']}: {duration(r['_time']) if pd.notna(r['_time']) else 'missed'}"
                     for _, r in rest.iterrows())
    return winner["name"], f"the first to {said} {target:g} ({duration(winner['_time'])}{others}) {among}"


def promote_verdict(table: pd.DataFrame, seeds: Mapping[str, str] | None = None) -> str | None:
    """Each search's pick against each baseline, in sentences: by top-1, and (when the promote had
    targets) by time and by cost to each; None without a finished pick and baseline. `seeds`: model
    name -> what to say of a pick that is a seed the search was given (experiments/report/driver.py)."""
    picks = search_picks(table)
    baselines = table[(table.kind == "baseline") & (table.status == "ok")]
    if picks.empty or baselines.empty:
        return None
    sentences = []
    for _, cell in picks.iterrows():
        who = _who(cell)
        if twin_of(cell):
            sentences.append(f"On accuracy, {who}, {cell['name']}, is {twin_of(cell)} itself, the same network, "
                             f"trained once ({_top1(cell)}): no race of a model with itself.")
            continue
        seed = (seeds or {}).get(cell["name"])
        against, overlap = _against(cell, baselines)
        mine = f"{_top1(cell)}, {int(cell.params):,} parameters, {cell.epochs:.1f} epochs"
        if seed:
            said = f"On accuracy, {who}, {cell['name']}, is {seed}. It ({mine}) {against}"
        else:
            said = f"On accuracy, {who}, {cell['name']} ({mine}), {against}"
        sentences.append(said + (" (95% intervals overlap)." if overlap else "."))
    chance = picks.iloc[0].get("chance_top1")
    if chance is not None and pd.notna(chance):
        sentences.append(f"Chance is {chance:.4f}.")
    for name in table:
        parsed = parse_column(name)
        if parsed and parsed[0] != "macs" and table[name].notna().any():
            measure, metric, target = parsed
            what = f"{measure} to {metric} {target:g}" if target else f"{measure} to the {metric} target"
            sentences += [_race(cell, baselines, name, what, measure) for _, cell in picks.iterrows()
                          if not twin_of(cell)]
    return " ".join(sentences)


def _against(cell: pd.Series, baselines: pd.DataFrame) -> tuple[str, bool]:
    """`beats resnet20 (top-1 ..., 1,000 parameters, 3.0 epochs; McNemar's paired test ...) and ...`:
    a pick against each baseline on the evaluation split's top-1 (versus), and whether one of them
    was within noise on Wilson intervals (no paired test: the sentence then says the intervals overlap)."""
    clauses, overlap = [], False
    for _, b in baselines.iterrows():
        word, test = versus(cell, b)
        overlap |= test is None and word == "is within noise of"
        clauses.append(f"{word} {b['name']} ({_top1(b)}, {int(b.params):,} parameters, {b.epochs:.1f} epochs"
                       f"{_tested(test)})")
    return _joined(clauses), overlap


def rank_agreement(table: pd.DataFrame) -> list[str]:
    """For each search with three or more promoted cells that finished: Kendall's tau between the
    search's ranking (`search_rank`, its proxy) and the full recipe's, by top-1 and by time to each
    top-1 target (a cell that never reached it ranks after every one that did). A sentence each,
    with its p-value: whether the proxy ranks as the target does (promote's --audit_k adds cells
    from lower down the ranking to make this informative)."""
    from scipy.stats import kendalltau

    searched = table[(table.kind == "searched") & (table.status == "ok")]
    if "search_rank" not in searched or searched.search_rank.isna().all():
        return []
    times = [c for c in table if (parse_column(c) or ("",))[:2] == ("time", "top1")]
    sentences = []
    dirs = searched["search_dir"].fillna("") if "search_dir" in searched else pd.Series("", index=searched.index)
    for search_dir, cells in searched.groupby(dirs, sort=False):
        cells = cells.dropna(subset=["search_rank"]).sort_values("search_rank")
        if len(cells) < 3:
            continue
        ranks = cells.search_rank.astype(float)
        measures = [("top-1", -cells.top1.astype(float))]
        measures += [(f"time to top-1 {parse_column(c)[2]:g}", cells[c].astype(float).fillna(float("inf")))
                     for c in times]
        clauses = []
        for what, full in measures:
            tau, p = kendalltau(ranks, full)
            clauses.append(f"{what}: {tau:.2f} (p {p:.2g})" if pd.notna(tau) else f"{what}: undefined (all tied)")
        name = f" of {search_dir}" if search_dir else ""
        sentences.append(f"The search{name} ranked {len(cells)} promoted cells (its ranks "
                         f"{', '.join(str(int(r)) for r in ranks)}); Kendall's tau between its ranking and full "
                         f"training's (1: the same order, 0: unrelated, -1: reversed) by {'; by '.join(clauses)}.")
    return sentences


def same_net_sentences(table: pd.DataFrame) -> list[str]:
    """For each promoted net of a supernet search, a sentence: its top-1 on the evaluation split with
    the weights it inherits from the supernet (not trained), fine-tuned from them (where it was) and
    trained from scratch (its own row, or its baseline twin's), the first two each against the last
    by the paired test, with the epochs and training time each took."""
    done = table[table.status == "ok"].set_index("name", drop=False)
    sentences = []
    for _, cell in table[table.kind == "searched"].iterrows():
        kin = [(kind, done.loc[f"{cell['name']}-{kind}"]) for kind in (INHERITED, FINE_TUNED)
               if f"{cell['name']}-{kind}" in done.index]
        scratch_name = twin_of(cell) or cell["name"]
        if not kin:
            continue
        scratch = done.loc[scratch_name] if scratch_name in done.index else None
        clauses = []
        for kind, row in kin:
            how = ("with the weights it inherits from the supernet (not trained)" if kind == INHERITED else
                   f"fine-tuned from them {row.epochs:.1f} epochs ({duration(row.wall_seconds)} after the supernet's "
                   "training)")
            against = ""
            if scratch is not None:
                word, test = versus(row, scratch)
                against = f"; {word} from scratch{_tested(test)}"
            clauses.append(f"{how}, {_top1(row)}{against}")
        if scratch is not None:
            twin = f", as {scratch_name}" if scratch_name != cell["name"] else ""
            clauses.append(f"trained from scratch{twin} {scratch.epochs:.1f} epochs ({duration(scratch.wall_seconds)}), "
                           f"{_top1(scratch)}")
        sentences.append(f"{cell['name']}, the same net, on the evaluation split: {'; '.join(clauses)}.")
    return sentences


def _first(cell: pd.Series) -> bool:
    """Whether a search's pick is the cell its search ranked first (a comparison without ranks: so taken)."""
    rank = cell.get("search_rank")
    return rank is None or pd.isna(rank) or int(rank) == 1


def _who(cell: pd.Series, named: bool = False) -> str:
    """How the verdict and the export name a search's pick: the cell its search ranked first, or, where
    that one did not finish, the best-ranked one that did (`named`: its name in the brackets,
    `the search's best-ranked cell that finished (NAME, its rank 2)`)."""
    name = f"{cell['name']}, " if named else ""
    if _first(cell):
        return f"the search's pick ({cell['name']})" if named else "the search's pick"
    return f"the search's best-ranked cell that finished ({name}its rank {int(cell['search_rank'])})"


def _joined(clauses: list[str]) -> str:
    return clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + " and " + clauses[-1]


def _race(cell: pd.Series, baselines: pd.DataFrame, name: str, what: str, measure: str) -> str:
    """One sentence: a search's pick against each baseline on the time or cost to a target."""
    def shown(value: float) -> str:
        return duration(value) if measure == "time" else f"${value:.2f}"

    def reached(row: pd.Series) -> bool:
        return pd.notna(row[name])

    lead = f"On {what}, {_who(cell)}, {cell['name']}"
    hits = [b for _, b in baselines.iterrows() if reached(b)]
    misses = [b["name"] for _, b in baselines.iterrows() if not reached(b)]
    if reached(cell):
        value = float(cell[name])
        clauses = [f"{noise.time_compared(value, float(b[name]))} {b['name']} ({shown(float(b[name]))})" for b in hits]
        said = f"{lead} ({shown(value)}), {_joined(clauses)}" if clauses else f"{lead} reached it in {shown(value)}"
    else:
        others = _joined([f"{b['name']} did in {shown(float(b[name]))}" for b in hits]) if hits else ""
        said = f"{lead} did not reach it" + (f"; {others}" if others else "")
    if misses:
        said += f"; {_joined(misses)} did not reach it"
    return said + "."
