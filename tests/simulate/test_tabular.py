"""`amoeba benchmark` on a synthetic NAS-Bench-201 table generated here."""

import json

import numpy as np
import pytest

from evolution import RandomSearch
from experiments.simulate.tabular import load_table, run_benchmark, run_once, write_synthetic_table
from searchspace import NasBench201Space
from tests.conftest import amoeba_here as amoeba  # in this process: a Python start less each



def write_table(path, drop=0, extra_rows=()):
    write_synthetic_table(str(path), drop=drop)
    if extra_rows:
        with open(path, "a") as f:
            f.write("\n".join(extra_rows) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def table_path(tmp_path_factory):
    return write_table(tmp_path_factory.mktemp("t") / "nb201.csv")


@pytest.fixture(scope="module")
def table(table_path):
    return load_table(table_path, "nasbench201", "arch", "val", "test")


def test_regularized_evolution_beats_random_search(table):
    result = run_benchmark(table, "nasbench201", ["regularized_evolution", "random"], budget=150,
                           runs=40, seed=0, mode="max", params={"population_size": 20, "sample_size": 5},
                           dedup=False)
    re_final = result["curves"]["regularized_evolution"][:, -1]
    random_final = result["curves"]["random"][:, -1]
    stderr = np.sqrt(re_final.var() / 40 + random_final.var() / 40)
    print(f"final test_acc: RE {re_final.mean():.3f}, random {random_final.mean():.3f}, stderr {stderr:.3f}")
    assert re_final.mean() > random_final.mean() + 4 * stderr
    summary = result["summary"]["regularized_evolution"]
    assert list(summary) == ["15", "38", "75", "150"]
    assert summary["150"]["mean"] == pytest.approx(re_final.mean())


def test_curves_are_best_so_far_by_the_search_metric(table):
    curve, charged = run_once(table, "nasbench201", "random", 50, 3, "max", {}, dedup=False)
    assert len(charged) == 50 and len(curve) == 50
    # Recompute by hand: the same random proposals, the pick = best so far by the search metric.
    search = RandomSearch(NasBench201Space(), seed=3, objective="search")
    best_val, expected = -np.inf, []
    for _ in range(50):
        key = search.ask().genotype.key()
        if table.search[key] > best_val:
            best_val, pick = table.search[key], table.report[key]
        expected.append(pick)
    np.testing.assert_array_equal(curve, expected)


def test_dedup_does_not_charge_repeats(table):
    params = {"population_size": 10, "sample_size": 5}
    _, plain = run_once(table, "nasbench201", "regularized_evolution", 400, 1, "max", params, dedup=False)
    curve, deduped = run_once(table, "nasbench201", "regularized_evolution", 400, 1, "max", params, dedup=True)
    assert len(plain) == 400 and len(set(plain)) < 400  # evolution does revisit cells
    assert len(deduped) == len(set(deduped)) == 400 and len(curve) == 400


@pytest.mark.parametrize(
    "extra, drop, message",
    [
        (["|conv_9x9~0|+|none~0|none~1|+|none~0|none~1|none~2|,1,1"], 0, r":15627: NAS-Bench-201 .*edge 0->1: unknown op"),
        (["|none~0|+|none~0|none~1|,1,1"], 0, r":15627: .*3 node groups"),
        ([",1,1"], 0, r":15627: column 'arch' is empty"),
        (["|none~0|+|none~0|none~1|+|none~0|none~1|none~2|,1,1"], 0, r":15627: duplicate .*first on line 2"),
        ([], 1, r"does not cover the nasbench201 space: 1 of 15625 .*missing"),
    ],
)
def test_bad_tables_name_the_row(tmp_path, extra, drop, message):
    path = write_table(tmp_path / "bad.csv", drop=drop, extra_rows=extra)
    with pytest.raises(ValueError, match=message):
        load_table(path, "nasbench201", "arch", "val", "test")


def test_non_numeric_metric_and_missing_column(tmp_path):
    path = tmp_path / "bad.csv"
    write_table(path)
    lines = path.read_text().splitlines()
    cells = lines[5].split(",")
    lines[5] = ",".join(cells[:2] + ["n/a"] + cells[3:])  # the test column
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"bad.csv:6: column 'test' is not a finite number: 'n/a'"):
        load_table(str(path), "nasbench201", "arch", "val", "test")
    with pytest.raises(ValueError, match="no column 'valid'"):
        load_table(str(path), "nasbench201", "arch", "valid", "test_acc")


def test_command_prints_json_and_writes_a_plot(table_path, tmp_path):
    plot = tmp_path / "curve.png"
    result = amoeba("benchmark", f"--table={table_path}", "--search_metric=val", "--report_metric=test",
                    "--budget=30", "--runs=5", f"--plot={plot}", "--format=json")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(figures["summary"]) == {"regularized_evolution", "random"}
    assert figures["summary"]["random"]["30"]["std"] > 0  # five seeds do not all pick alike
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pareto_evolution_finds_a_better_front_and_limits_hold(table_path):
    """The front found (hypervolume share of the table's, gap under latency limits) by Pareto
    evolution against random search; a limited search never charges a cell over its limit; the
    command gives each run's front as architecture strings."""
    from evolution.objectives import parse_goals
    from experiments.simulate.fronts import percentile_limits
    from experiments.simulate.tabular import TableCosts

    table = load_table(table_path, "nasbench201", "arch", "val", "test", ["lat", "params_mb"])
    costs = TableCosts("lat", objectives=parse_goals("val:max,lat:min"))
    limits = percentile_limits(table, "lat")
    result = run_benchmark(table, "nasbench201", ["pareto_evolution", "random"], 200, 8, 0, "max",
                           {"population_size": 20, "sample_size": 5}, False, costs, limits, "test", [50, 200])
    pareto, rand = result["summary"]["pareto_evolution"]["200"], result["summary"]["random"]["200"]
    assert 0 < rand["hypervolume_fraction"]["mean"] < pareto["hypervolume_fraction"]["mean"] <= 1
    assert 0 <= pareto["limit_gap"]["mean"] < rand["limit_gap"]["mean"]
    limited = TableCosts("lat", limits={"latency_ms": limits[2], "params": 1e6 * limits[2] / 20})
    _, keys = run_once(table, "nasbench201", "regularized_evolution", 100, 0, "max",
                       {"population_size": 10, "sample_size": 3}, False, limited)
    assert len(keys) == 100 and max(table.columns["lat"][k] for k in keys) <= limits[2]
    shown = amoeba("benchmark", f"--table={table_path}", "--search_metric=val", "--report_metric=test", "--plot=",
                   "--algorithms=pareto_evolution", "--objectives=val:max,lat:min", "--latency_column=lat",
                   "--budget=40", "--runs=2", "--format=json", "--tournament=limit", "--offspring=3")
    figures = json.loads(shown.stdout.strip().splitlines()[-1])
    assert (figures["params"]["tournament"], figures["params"]["offspring"]) == ("limit", 3)
    assert len(figures["fronts"]["pareto_evolution"]) == 2 and "|" in figures["fronts"]["pareto_evolution"][0][0]
    assert "limit_gap" in figures["summary"]["pareto_evolution"]["40"] and len(figures["gap_limits"]) == 10


def test_command_reports_a_bad_table(tmp_path):
    path = write_table(tmp_path / "short.csv", drop=3)
    result = amoeba("benchmark", f"--table={path}", "--search_metric=val", "--report_metric=test", "--plot=",
                    check=False)
    assert result.returncode == 1 and "does not cover" in result.stderr


def test_command_on_a_simulated_clock(table_path, tmp_path):
    plot = tmp_path / "hours.svg"
    result = amoeba("benchmark", f"--table={table_path}", "--report_metric=test", "--fidelities=1:val,4:test",
                    "--rungs=1,4", "--budget_s=200", "--workers=4", "--runs=5", f"--plot={plot}", "--format=json",
                    "--latency_column=lat", "--max_latency_ms=9", "--latency_target_ms=8",  # limited, rewarded
                    "--rung_rule=promotion")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["rungs"] == [1, 4] and figures["workers"] == 4 and "pick" in figures
    assert figures["rung_rule"] == "promotion"
    assert set(figures["summary"]["random"]) == {"0.1", "0.25", "0.5", "1"}
    assert "simulated hours" in plot.read_text()
    bad = amoeba("benchmark", f"--table={table_path}", "--report_metric=test", "--search_metric=val",
                 "--rungs=1,4", "--plot=", check=False)
    assert bad.returncode == 1 and "--rungs needs --budget_s" in bad.stderr


def test_pareto_evolution_may_not_take_the_report_column_as_a_goal(table_path):
    """Defect: a goal naming the report column (first or not) reported inflated results; the refusal
    names the flag."""
    from evolution.objectives import parse_goals
    from experiments.simulate.tabular import TableCosts

    table = load_table(table_path, "nasbench201", "arch", "val", "test", ["lat"])
    for goals in ("test:max,lat:min", "val:max,test:max"):
        with pytest.raises(ValueError, match="--objectives"):
            run_benchmark(table, "nasbench201", ["pareto_evolution"], 20, 1, 0, "max", {}, False,
                          TableCosts("lat", objectives=parse_goals(goals)), report_metric="test", search_metric="val")


def test_any_limited_measure_is_read_from_its_column(table_path):
    """A limit on a measure without a flag of its own (multiply_adds) is one column entry; a limit
    on a measure that cannot be limited, or without a column, is refused naming the flags."""
    from experiments.simulate.tabular import TableCosts

    table = load_table(table_path, "nasbench201", "arch", "val", "test", ["lat"])
    ceiling = float(np.median(list(table.columns["lat"].values())))
    costs = TableCosts(limits={"multiply_adds": 1000 * ceiling}, more_columns={"multiply_adds": ("lat", 1000.0)})
    _, keys = run_once(table, "nasbench201", "regularized_evolution", 60, 0, "max",
                       {"population_size": 10, "sample_size": 3}, False, costs)
    assert max(table.columns["lat"][k] for k in keys) <= ceiling
    with pytest.raises(ValueError, match="cannot be limited"):
        run_once(table, "nasbench201", "random", 5, 0, "max", {}, False, TableCosts(limits={"step_ms": 1.0}))
    with pytest.raises(ValueError, match="need --measure_columns"):
        run_once(table, "nasbench201", "random", 5, 0, "max", {}, False, TableCosts(limits={"multiply_adds": 1.0}))


def test_the_benchmark_commands_algorithm_defaults_are_the_algorithms():
    from evolution import RegularizedEvolution
    from evolution.params import EvolutionParams
    from experiments.commands import benchmark

    declared = EvolutionParams()
    for name in ("population_size", "sample_size"):
        assert benchmark.FLAGS[name].default == getattr(declared, name)
        assert benchmark.FLAGS[name].help.startswith(("P:", "S:"))
    assert RegularizedEvolution(NasBench201Space()).params() == declared.to_config()
