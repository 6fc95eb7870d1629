"""Reference: Syne Tune 0.16's own simulator on the shared NAS-Bench-201 tables, beside our
multi-fidelity evolution (benchmarks/tabular_rungs.py), at the same budgets and report metric.

Runs in a SEPARATE virtual environment (Syne Tune is not a dependency of amoeba-nas):
    python3 -m venv /tmp/stvenv && /tmp/stvenv/bin/pip install syne-tune==0.16.0
    /tmp/stvenv/bin/python benchmarks/syne_tune_nb201.py --runs=30
It imports nothing of ours. Each run's pick is chosen by our rule (the 12-epoch leader, displaced by
the best 200-epoch result once the leader has one too), so only the search differs; scored by
val_acc_200ep. Schedulers: REA at 12 epochs (P=10, S=3), ASHA (grace 12, max 200, eta 3) with
random search and with regularized evolution as its searcher.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import math
import os
import statistics
import tempfile

import numpy as np
import pandas as pd

SHARED = os.environ.get("AMOEBA_SHARED", os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
TABLES = {"cifar100": 40_000.0, "imagenet16": 120_000.0}
OPS = ["none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"]


def edges(arch: str) -> list[str]:
    return [item.split("~")[0] for group in arch.split("+") for item in group.strip("|").split("|")]


def blackbox(frame: pd.DataFrame, fidelities: list[int]):
    from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular
    from syne_tune.config_space import choice, randint

    hps = pd.DataFrame([edges(a) for a in frame.arch], columns=[f"e{i}" for i in range(6)])
    columns = {12: "val_acc_12ep", 200: "val_acc_200ep"}
    values = np.stack([np.stack([frame[columns[f]].to_numpy(), f * frame.train_s_per_epoch.to_numpy()], axis=-1)
                       for f in fidelities], axis=1)[:, None]  # (cells, 1 seed, fidelities, 2)
    return BlackboxTabular(hps, {f"e{i}": choice(OPS) for i in range(6)}, {"epoch": randint(1, max(fidelities))},
                           values, fidelity_values=np.array(fidelities), objectives_names=["val_acc", "elapsed_time"])


def scheduler(name: str, space: dict, seed: int):
    from syne_tune.optimizer.baselines import REA
    from syne_tune.optimizer.schedulers.asha import AsynchronousSuccessiveHalving

    if name == "REA 12ep":
        return REA(space, "val_acc", do_minimize=False, random_seed=seed, population_size=10, sample_size=3)
    searcher = {"ASHA": "random_search", "ASHA + REA": "regularized_evolution"}[name]
    kwargs = {"population_size": 10, "sample_size": 3} if searcher == "regularized_evolution" else {}
    return AsynchronousSuccessiveHalving(space, "val_acc", do_minimize=False, searcher=searcher, time_attr="epoch",
                                         max_t=200, grace_period=12, reduction_factor=3, random_seed=seed,
                                         searcher_kwargs=kwargs)


def pick(results: pd.DataFrame, frame: pd.DataFrame, budget: float) -> float:
    """Our rule on what Syne Tune observed within the budget; the pick's val_acc_200ep."""
    seen = results[results.st_tuner_time <= budget]
    low, high = seen[seen.epoch == 12], seen[seen.epoch == 200]
    leader = low.loc[low.val_acc.idxmax()]
    key = tuple(leader[f"config_e{i}"] for i in range(6))
    if key in {tuple(r[f"config_e{i}"] for i in range(6)) for _, r in high.iterrows()}:
        leader = high.loc[high.val_acc.idxmax()]
    arch = "|{}~0|+|{}~0|{}~1|+|{}~0|{}~1|{}~2|".format(*(leader[f"config_e{i}"] for i in range(6)))
    return float(frame.set_index("arch").loc[arch, "val_acc_200ep"])


def run(name: str, frame: pd.DataFrame, budget: float, seed: int) -> float:
    from syne_tune import StoppingCriterion, Tuner
    from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback
    from syne_tune.blackbox_repository import UserBlackboxBackend

    box = blackbox(frame, [12] if name == "REA 12ep" else [12, 200])
    backend = UserBlackboxBackend(box, elapsed_time_attr="elapsed_time", seed=0)
    callback = SimulatorCallback()
    tuner = Tuner(trial_backend=backend, scheduler=scheduler(name, box.configuration_space, seed),
                  stop_criterion=StoppingCriterion(max_wallclock_time=budget), n_workers=1, sleep_time=0,
                  callbacks=[callback], results_update_interval=1e9, print_update_interval=1e9,
                  save_tuner=False, tuner_name=f"nb201-{seed}")
    with contextlib.redirect_stdout(io.StringIO()):  # the tuner's own banner and progress
        tuner.run()
    return pick(callback.dataframe(), frame, budget)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--tables", default="cifar100")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    os.environ["SYNETUNE_FOLDER"] = tempfile.mkdtemp(prefix="syne-tune-")  # its result files, not ~/syne-tune
    figures: dict = {"runs": args.runs}
    for table in args.tables.split(","):
        frame = pd.read_csv(os.path.join(SHARED, "data", "nasbench201", f"nb201_{table}.csv"))
        for factor in (1, 4):
            budget = TABLES[table] * factor
            for name in ("REA 12ep", "ASHA", "ASHA + REA"):
                picks = [run(name, frame, budget, seed) for seed in range(args.runs)]
                mean, se = statistics.mean(picks), statistics.stdev(picks) / math.sqrt(len(picks))
                figures[f"{table} {factor}x {name}"] = {"mean": round(mean, 3), "se": round(se, 3)}
                print(f"{table} {factor}x ({budget:,.0f} s) {name:<12} {mean:.2f} +- {se:.2f}", flush=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
