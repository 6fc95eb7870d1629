"""amoeba benchmark --table=FILE.csv --search_metric=COL --report_metric=COL [flags]: compare
search algorithms on a tabular NAS benchmark in seconds (the table is the evaluator).

The table is a CSV with one column holding the architecture in the space's string form (for
nasbench201: |op~0|+|op~0|op~1|+|op~0|op~1|op~2|) and numeric metric columns; it must cover the
whole space. Prints mean and standard deviation of the report metric of each algorithm's pick
(best so far by the search metric) at a few budgets, and writes a best-so-far plot.

With --budget_s the budget is simulated wall time (experiments/simulate/simulator.py): every evaluation
costs its epochs times --cost_column, --workers run at once, --fidelities name the search metric
at each number of epochs, and --rungs make the search multi-fidelity under --rung_rule
(evolution/rungs.py RUNG_RULES: stopping, payoff or promotion). The algorithms' own parameters take their
defaults and help from evolution/params.py.
"""

from __future__ import annotations

SUMMARY = "judge search algorithms on a tabular benchmark (NAS-Bench-201) in seconds"  # for `amoeba --help`

import json

from absl import app, flags

from evolution.objectives import LIMITED
from experiments.simulate.benchmark_config import BenchmarkConfig
from experiments.commands import whole_numbers
from experiments.settings import define_flags

FLAGS = flags.FlagValues()
SETTINGS = define_flags(BenchmarkConfig, FLAGS, module_name=__name__)  # each flag one field of BenchmarkConfig


def _check_flags(args: list[str]) -> None:
    """UsageError for a benchmark command that cannot run, before any table is read."""
    if args:
        raise app.UsageError(f"benchmark takes no positional arguments, got {args}")
    for name in ("table", "report_metric") + (() if FLAGS.fidelities else ("search_metric",)):
        if not FLAGS[name].value:
            raise app.UsageError(f"benchmark needs --{name}")
    if FLAGS.plot and not FLAGS.plot.endswith((".png", ".svg")):
        raise app.UsageError(f"--plot must end in .png or .svg, got {FLAGS.plot}")
    if (FLAGS.tournament, FLAGS.offspring) != ("nsga2", 1) and "pareto_evolution" not in FLAGS.algorithms:
        raise app.UsageError("--tournament and --offspring are Pareto evolution's: give --algorithms=pareto_evolution")


def main(args: list[str]) -> None:
    from experiments.simulate.plots import plot_best_so_far

    _check_flags(args)
    if FLAGS.budget_s:
        if FLAGS.dedup:
            raise app.UsageError("--dedup counts evaluations (--budget); a --budget_s run charges every one its time")
        return time_benchmark(plot_best_so_far)
    from experiments.simulate.tabular import load_table, run_benchmark

    for name in ("fidelities", "rungs", "cost_column", "rung_rule"):
        if FLAGS[name].value and FLAGS[name].present:
            raise app.UsageError(f"--{name} needs --budget_s (a simulated time budget)")
    from experiments.simulate.fronts import percentile_limits

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
    """The cost settings the flags give (experiments/simulate/tabular.py TableCosts)."""
    from evolution.objectives import MnasReward, parse_goals
    from experiments.simulate.tabular import TableCosts

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
    from experiments.simulate.simulator import Fidelities, parse_fidelities, run_time_benchmark
    from experiments.simulate.tabular import load_table

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

