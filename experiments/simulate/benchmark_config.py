"""`amoeba benchmark`'s settings, each one field of BenchmarkConfig: its flag, default, choices and
help come from it (experiments/settings.py). The algorithms' own parameters (population and sample
size, the Pareto tournament and offspring) take their defaults and help from evolution/params.py,
and a limit per limited measure (evolution/objectives.py's LIMITED) is a field `max_MEASURE`.

Pure Python: must not import TensorFlow or Ray.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evolution.objectives import LIMITED, MEASURES
from evolution.params import TOURNAMENTS, EvolutionParams, ParetoParams, help_of
from evolution.rungs import RUNG_RULES

_EVOLUTION, _PARETO = help_of(EvolutionParams), help_of(ParetoParams)


def _s(default: Any, help: str, **meta: Any) -> Any:
    return field(default=default, metadata={"help": help, **meta})


def _limit(measure: str) -> Any:
    return _s(0.0, f"A proposal whose {measure} ({MEASURES[measure].description}) is above this is rejected "
                   "before it is charged; 0: no limit. Read from --latency_column, --params_column or "
                   "--measure_columns.")


@dataclass(frozen=True)
class BenchmarkConfig:
    space: str = _s("nasbench201", "Search space of the table.", choices=("nasbench201",))
    table: str | None = _s(None, "CSV file of the benchmark.")
    arch_column: str = _s("arch", "Column with the architecture string.")
    search_metric: str | None = _s(None, "Column the search optimises (e.g. validation accuracy).")
    report_metric: str | None = _s(None, "Column reported for the picked architecture (e.g. test accuracy).")
    mode: str = _s("max", "Whether larger or smaller search metric is better.", choices=("max", "min"))
    algorithms: tuple[str, ...] = _s(("regularized_evolution", "random"), "Algorithms to compare.")
    budget: int = _s(150, "Evaluations per run.")
    runs: int = _s(100, "Runs per algorithm (seeds seed..seed+runs-1).")
    seed: int = _s(0, "First seed.")
    population_size: int = _s(EvolutionParams.population_size, _EVOLUTION["population_size"])
    sample_size: int = _s(EvolutionParams.sample_size, _EVOLUTION["sample_size"])
    tournament: str = _s(ParetoParams.tournament, _PARETO["tournament"], choices=TOURNAMENTS)
    offspring: int = _s(ParetoParams.offspring, _PARETO["offspring"])
    budget_s: float = _s(0.0, "Simulated wall-clock budget in seconds (0: count evaluations, --budget).")
    cost_column: str | None = _s(None, "Column of seconds per training epoch: what an evaluation costs "
                                       "(with --budget_s; without it an epoch costs 1).")
    workers: int = _s(1, "Trials at once on the simulated clock (asynchronous).")
    fidelities: tuple[str, ...] = _s((), "EPOCHS:COLUMN pairs, the search metric at each fidelity "
                                         "(e.g. 12:val_acc_12ep,200:val_acc_200ep); default --epochs:--search_metric.")
    rungs: tuple[str, ...] = _s((), "Epochs at which trials report and ASHA decides (a subset of the "
                                    "fidelities' epochs, e.g. 12,200); default: every evaluation at the first "
                                    "fidelity.")
    reduction_factor: float = _s(3.0, "ASHA's eta: the top 1/eta at a rung goes on.")
    rung_rule: str = _s("stopping", "With --rungs: the rule that decides at each rung (evolution/rungs.py): "
                                    "stopping (go on or stop when a trial reports), payoff (the same, a higher "
                                    "rung bought only while its results change the lead as often, per result, as "
                                    "the rung's own) or promotion (a trial pauses at its rung; the best paused one "
                                    "goes on when the rung's share allows).", choices=tuple(sorted(RUNG_RULES)))
    epochs: int = _s(12, "Epochs one evaluation costs without --fidelities.")
    dedup: bool = _s(False, "Do not charge an architecture already evaluated to the budget.")
    objectives: tuple[str, ...] = _s((), "COLUMN:max|min goals (e.g. val_acc_12ep:max,latency_ms_pixel3:min): "
                                         "pareto_evolution searches them; every algorithm's evaluated cells are "
                                         "scored by the hypervolume of their front against the table's (the "
                                         "report metric in place of the first).")
    latency_column: str | None = _s(None, "Column of a cell's latency (ms): what --max_latency_ms, "
                                          "--latency_target_ms and the per-limit gaps read.")
    params_column: str = _s("params_mb", "Column of a cell's parameters, in millions (--max_params).")
    max_params: float = _limit("params")
    max_multiply_adds: float = _limit("multiply_adds")
    max_latency_ms: float = _limit("latency_ms")
    measure_columns: tuple[str, ...] = _s((), "MEASURE:COLUMN[:SCALE] items: the table column holding a limited "
                                              "measure (times SCALE, default 1), for measures without a flag of "
                                              "their own (e.g. multiply_adds:madds_m:1e6).")
    latency_target_ms: float = _s(0.0, "> 0: the search scores cells by MnasNet's reward, search metric x "
                                       "(latency / target)^--latency_weight.")
    latency_weight: float = _s(-0.07, "The reward's exponent.")
    gap_percentiles: tuple[str, ...] = _s(("5", "15", "25", "35", "45", "55", "65", "75", "85", "95"), "With "
                                          "--latency_column and --objectives: latency limits at these percentiles "
                                          "of the column; the gap is the best report metric of any cell under a "
                                          "limit minus the best among the cells of the front found under it, "
                                          "averaged over the limits.")
    at_evaluations: tuple[str, ...] = _s((), "Evaluation counts to give figures at (default: about 10, 25, 50 and "
                                             "100% of --budget).")
    plot: str = _s("benchmark.png", "Plot file (.png or .svg); empty for none.")
    format: str = _s("text", "Output format.", choices=("text", "json"))


LIMIT_FIELDS = tuple(f"max_{measure}" for measure in LIMITED)  # each a field above (tests/test_benchmark.py)
