"""amoeba benchmark --table=FILE.csv --search_metric=COL --report_metric=COL [flags]: compare
search algorithms on a tabular NAS benchmark in seconds (the table is the evaluator).

The table is a CSV with one column holding the architecture in the space's string form (for
nasbench201: |op~0|+|op~0|op~1|+|op~0|op~1|op~2|) and numeric metric columns; it must cover the
whole space. Prints mean and standard deviation of the report metric of each algorithm's pick
(best so far by the search metric) at a few budgets, and writes a best-so-far plot.

With --budget_s the budget is simulated wall time (experiments/simulator.py): every evaluation
costs its epochs times --cost_column, --workers run at once, --fidelities name the search metric
at each number of epochs, and --rungs make the search multi-fidelity under --rung_rule
(evolution/rungs.py RUNG_RULES: stopping, payoff or promotion). The algorithms' own parameters take their
defaults and help from evolution/params.py.
"""

from __future__ import annotations

SUMMARY = "judge search algorithms on a tabular benchmark (NAS-Bench-201) in seconds"  # for `amoeba --help`

import json

from absl import app, flags

from evolution.objectives import LIMITED, MEASURES
from evolution.params import TOURNAMENTS, EvolutionParams, ParetoParams, help_of
from evolution.rungs import RUNG_RULES
from experiments.commands import whole_numbers

_PARAMS = EvolutionParams()  # the algorithms' own defaults and help: declared once, in evolution/params.py

FLAGS = flags.FlagValues()
F = {"flag_values": FLAGS}
flags.DEFINE_enum("space", "nasbench201", ["nasbench201"], "Search space of the table.", **F)
flags.DEFINE_string("table", None, "CSV file of the benchmark.", **F)
flags.DEFINE_string("arch_column", "arch", "Column with the architecture string.", **F)
flags.DEFINE_string("search_metric", None, "Column the search optimises (e.g. validation accuracy).", **F)
flags.DEFINE_string("report_metric", None, "Column reported for the picked architecture (e.g. test accuracy).", **F)
flags.DEFINE_enum("mode", "max", ["max", "min"], "Whether larger or smaller search metric is better.", **F)
flags.DEFINE_list("algorithms", ["regularized_evolution", "random"], "Algorithms to compare.", **F)
flags.DEFINE_integer("budget", 150, "Evaluations per run.", **F)
flags.DEFINE_integer("runs", 100, "Runs per algorithm (seeds seed..seed+runs-1).", **F)
flags.DEFINE_integer("seed", 0, "First seed.", **F)
for _name in ("population_size", "sample_size"):
    flags.DEFINE_integer(_name, getattr(_PARAMS, _name), help_of(EvolutionParams)[_name], **F)
flags.DEFINE_enum("tournament", ParetoParams.tournament, list(TOURNAMENTS), help_of(ParetoParams)["tournament"], **F)
flags.DEFINE_integer("offspring", ParetoParams.offspring, help_of(ParetoParams)["offspring"], **F)
flags.DEFINE_float("budget_s", 0, "Simulated wall-clock budget in seconds (0: count evaluations, --budget).", **F)
flags.DEFINE_string("cost_column", None, "Column of seconds per training epoch: what an evaluation costs "
                    "(with --budget_s; without it an epoch costs 1).", **F)
flags.DEFINE_integer("workers", 1, "Trials at once on the simulated clock (asynchronous).", **F)
flags.DEFINE_list("fidelities", [], "EPOCHS:COLUMN pairs, the search metric at each fidelity "
                  "(e.g. 12:val_acc_12ep,200:val_acc_200ep); default --epochs:--search_metric.", **F)
flags.DEFINE_list("rungs", [], "Epochs at which trials report and ASHA decides (a subset of the "
                  "fidelities' epochs, e.g. 12,200); default: every evaluation at the first fidelity.", **F)
flags.DEFINE_float("reduction_factor", 3.0, "ASHA's eta: the top 1/eta at a rung goes on.", **F)
flags.DEFINE_enum("rung_rule", "stopping", sorted(RUNG_RULES), "With --rungs: the rule that decides at each rung "
                  "(evolution/rungs.py): stopping (go on or stop when a trial reports), payoff (the same, a "
                  "higher rung bought only while its results change the lead as often, per result, as the "
                  "rung's own) or promotion (a trial pauses at its rung; the best paused one goes on when the "
                  "rung's share allows).", **F)
flags.DEFINE_integer("epochs", 12, "Epochs one evaluation costs without --fidelities.", **F)
flags.DEFINE_bool("dedup", False, "Do not charge an architecture already evaluated to the budget.", **F)
flags.DEFINE_list("objectives", [], "COLUMN:max|min goals (e.g. val_acc_12ep:max,latency_ms_pixel3:min): "
                  "pareto_evolution searches them; every algorithm's evaluated cells are scored by the "
                  "hypervolume of their front against the table's (the report metric in place of the first).", **F)
flags.DEFINE_string("latency_column", None, "Column of a cell's latency (ms): what --max_latency_ms, "
                    "--latency_target_ms and the per-limit gaps read.", **F)
flags.DEFINE_string("params_column", "params_mb", "Column of a cell's parameters, in millions (--max_params).", **F)
for _measure in LIMITED:  # a limit per limited measure (evolution/objectives.py)
    flags.DEFINE_float(f"max_{_measure}", 0, f"A proposal whose {_measure} ({MEASURES[_measure].description}) is "
                       "above this is rejected before it is charged; 0: no limit. Read from --latency_column, "
                       "--params_column or --measure_columns.", **F)
flags.DEFINE_list("measure_columns", [], "MEASURE:COLUMN[:SCALE] items: the table column holding a limited "
                  "measure (times SCALE, default 1), for measures without a flag of their own "
                  "(e.g. multiply_adds:madds_m:1e6).", **F)
flags.DEFINE_float("latency_target_ms", 0, "> 0: the search scores cells by MnasNet's reward, search metric x "
                   "(latency / target)^--latency_weight.", **F)
flags.DEFINE_float("latency_weight", -0.07, "The reward's exponent.", **F)
flags.DEFINE_list("gap_percentiles", ["5", "15", "25", "35", "45", "55", "65", "75", "85", "95"], "With "
                  "--latency_column and --objectives: latency limits at these percentiles of the column; the gap "
                  "is the best report metric of any cell under a limit minus the best among the cells of the "
                  "front found under it, averaged over the limits.", **F)
flags.DEFINE_list("at_evaluations", [], "Evaluation counts to give figures at (default: about 10, 25, 50 and "
                  "100% of --budget).", **F)
flags.DEFINE_string("plot", "benchmark.png", "Plot file (.png or .svg); empty for none.", **F)
flags.DEFINE_enum("format", "text", ["text", "json"], "Output format.", **F)


def main(args: list[str]) -> None:
    from experiments.plots import plot_best_so_far

    if args:
        raise app.UsageError(f"benchmark takes no positional arguments, got {args}")
    for name in ("table", "report_metric") + (() if FLAGS.fidelities else ("search_metric",)):
        if not FLAGS[name].value:
            raise app.UsageError(f"benchmark needs --{name}")
    if FLAGS.plot and not FLAGS.plot.endswith((".png", ".svg")):
        raise app.UsageError(f"--plot must end in .png or .svg, got {FLAGS.plot}")
    if (FLAGS.tournament, FLAGS.offspring) != ("nsga2", 1) and "pareto_evolution" not in FLAGS.algorithms:
        raise app.UsageError("--tournament and --offspring are Pareto evolution's: give --algorithms=pareto_evolution")
    if FLAGS.budget_s:
        if FLAGS.dedup:
            raise app.UsageError("--dedup counts evaluations (--budget); a --budget_s run charges every one its time")
        return time_benchmark(plot_best_so_far)
    from experiments.tabular import load_table, run_benchmark

    for name in ("fidelities", "rungs", "cost_column", "rung_rule"):
        if FLAGS[name].value and FLAGS[name].present:
            raise app.UsageError(f"--{name} needs --budget_s (a simulated time budget)")
    from experiments.fronts import percentile_limits

    params = algorithm_params()
    try:
        costs = table_costs()
        table = load_table(FLAGS.table, FLAGS.space, FLAGS.arch_column, FLAGS.search_metric,
                           FLAGS.report_metric, costs.columns())
        limits = percentile_limits(table, FLAGS.latency_column, [float(p) for p in FLAGS.gap_percentiles]) \
            if FLAGS.latency_column and FLAGS.gap_percentiles and FLAGS.objectives else []
        marks = whole_numbers("at_evaluations", FLAGS.at_evaluations)
        result = run_benchmark(table, FLAGS.space, FLAGS.algorithms, FLAGS.budget, FLAGS.runs,
                               FLAGS.seed, FLAGS.mode, params, FLAGS.dedup, costs, limits,
                               FLAGS.report_metric, marks, FLAGS.search_metric)
    except ValueError as err:
        raise app.UsageError(str(err)) from None
    if FLAGS.plot:
        plot_best_so_far(result["curves"], FLAGS.plot, FLAGS.report_metric,
                         f"{FLAGS.space}: {FLAGS.report_metric} of the pick by {FLAGS.search_metric}")
    figures = {k: v for k, v in result.items() if k != "curves"}
    figures["report_metric"], figures["search_metric"] = FLAGS.report_metric, FLAGS.search_metric
    figures["plot"] = FLAGS.plot or None
    if FLAGS.format == "json":
        print(json.dumps(figures))
        return
    budgets = list(next(iter(result["summary"].values())))
    shown = [("", f"{FLAGS.report_metric} of the pick")]
    if "objectives" in result and len(result["objectives"]) > 1:
        shown.append(("hypervolume_fraction", f"hypervolume of the front found, as a share of the table's "
                      f"{result['table_front_size']}-cell front ({','.join(result['objectives'])}; "
                      f"{FLAGS.report_metric} in place of the first)"))
    if "gap_limits" in result:
        shown.append(("limit_gap", f"{FLAGS.report_metric} gap to the best cell under each of "
                      f"{len(result['gap_limits'])} {FLAGS.latency_column} limits, averaged"))
    for key, title in shown:
        print(f"{title} (mean +- std over {FLAGS.runs} runs), by evaluations:")
        print(f"{'algorithm':<24}" + "".join(f"{b:>20}" for b in budgets))
        for name, by_budget in result["summary"].items():
            figures = [by_budget[b][key] if key else by_budget[b] for b in budgets]
            print(f"{name:<24}" + "".join(f"{f['mean']:>11.4f} +- {f['std']:<6.4f}" for f in figures))
    if FLAGS.plot:
        print(f"plot: {FLAGS.plot}")


def algorithm_params() -> dict:
    """The algorithms' own parameters the flags give (those of evolution/params.py)."""
    return {name: FLAGS[name].value for name in ("population_size", "sample_size", "tournament", "offspring")}


def table_costs():
    """The cost settings the flags give (experiments/tabular.py TableCosts)."""
    from evolution.objectives import MnasReward, parse_goals
    from experiments.tabular import TableCosts

    limits = {m: FLAGS[f"max_{m}"].value for m in LIMITED if FLAGS[f"max_{m}"].value}
    reward = MnasReward("latency_ms", FLAGS.latency_target_ms, FLAGS.latency_weight) if FLAGS.latency_target_ms else None
    return TableCosts(FLAGS.latency_column, FLAGS.params_column, parse_goals(FLAGS.objectives), limits, reward,
                      measure_columns(FLAGS.measure_columns))


def measure_columns(items: list[str]) -> dict[str, tuple[str, float]]:
    """--measure_columns: MEASURE:COLUMN[:SCALE] items as {measure: (column, scale)}."""
    columns = {}
    for item in items:
        measure, _, rest = item.partition(":")
        column, _, scale = rest.partition(":")
        try:
            columns[measure] = (column, float(scale or 1.0))
        except ValueError:
            raise ValueError(f"--measure_columns: {item!r} is not MEASURE:COLUMN[:SCALE]") from None
        if measure not in LIMITED or not column:
            raise ValueError(f"--measure_columns: {item!r} is not MEASURE:COLUMN[:SCALE] with a measure of {list(LIMITED)}")
    return columns


def time_benchmark(plot) -> None:
    """--budget_s: the algorithms on the simulated clock."""
    from experiments.simulator import Fidelities, parse_fidelities, run_time_benchmark
    from experiments.tabular import load_table

    params = algorithm_params()
    try:
        columns = parse_fidelities(FLAGS.fidelities) or {FLAGS.epochs: FLAGS.search_metric}
        rungs = tuple(whole_numbers("rungs", FLAGS.rungs))
        if FLAGS["rung_rule"].present and not rungs:
            raise ValueError("--rung_rule needs --rungs")
        fidelities = Fidelities(columns, rungs, FLAGS.reduction_factor, FLAGS.rung_rule)
        costs = table_costs()
        more = [*columns.values(), *([FLAGS.cost_column] if FLAGS.cost_column else []), *costs.columns()]
        table = load_table(FLAGS.table, FLAGS.space, FLAGS.arch_column, columns[fidelities.first],
                           FLAGS.report_metric, more)
        result = run_time_benchmark(table, FLAGS.space, FLAGS.algorithms, fidelities, FLAGS.cost_column,
                                    FLAGS.budget_s, FLAGS.workers, FLAGS.runs, FLAGS.seed, FLAGS.mode, params, costs)
    except ValueError as err:
        raise app.UsageError(str(err)) from None
    if FLAGS.plot:
        plot(result["curves"], FLAGS.plot, FLAGS.report_metric,
             f"{FLAGS.space}, {FLAGS.workers} worker(s): {FLAGS.report_metric} of the pick",
             x=result["grid_s"] / 3600, xlabel="simulated hours")
    figures = {k: v for k, v in result.items() if k not in ("curves", "grid_s")}
    figures["report_metric"], figures["plot"] = FLAGS.report_metric, FLAGS.plot or None
    if FLAGS.format == "json":
        print(json.dumps(figures))
        return
    print(f"{FLAGS.report_metric} of the pick (mean +- std [95% interval] over {FLAGS.runs} runs), "
          f"{FLAGS.workers} worker(s), at a share of {FLAGS.budget_s:g} simulated seconds; {result['pick']}:")
    shares = list(next(iter(result["summary"].values())))
    print(f"{'algorithm':<24}" + "".join(f"{float(s):>24.0%}" for s in shares) + f"{'trials':>9}")
    for name, by_share in result["summary"].items():
        cells = "".join(f"{v['mean']:>10.3f} +- {v['std']:<5.2f} [{v['ci95']:.2f}]" if v["n"] else f"{'-':>24}"
                        for v in by_share.values())
        print(f"{name:<24}{cells}{result['mean_trials'][name]:>9.1f}")
    if FLAGS.plot:
        print(f"plot: {FLAGS.plot}")

