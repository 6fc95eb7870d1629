"""`amoeba search`: a search algorithm driving candidate training through Ray Tune.

The output dir holds the journal (the state), search_config.json, results.csv and
best_genotype.json. Running again with the same output dir resumes from the journal. This module
orchestrates only: no TensorFlow here (trials import it in their own worker processes).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from evolution import ALGORITHMS, SearchAlgorithm, resume
from trainer.storage import write_json
from experiments.results import top_table, write_results
from searchspace import NasNetSpace
from trainer.proxy import ProxyConfig

log = logging.getLogger(__name__)
JOURNAL = "journal.jsonl"
CONFIG = "search_config.json"
# Settings a resumed search must keep: changing them would mix incomparable trials.
FIXED_SETTINGS = ("algorithm", "population_size", "sample_size", "seed", "num_blocks", "proxy")


@dataclass(frozen=True)
class SearchConfig:
    output_dir: str
    algorithm: str = "regularized_evolution"
    max_trials: int = 30
    population_size: int = 10
    sample_size: int = 3
    max_concurrent: int = 2
    seed: int = 0
    num_blocks: int = 5
    cpus_per_trial: float = 0.0  # 0: the machine's CPUs shared by max_concurrent trials
    ray_address: str | None = None
    proxy: ProxyConfig = field(default_factory=ProxyConfig)

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm: unknown {self.algorithm!r}; known: {sorted(ALGORITHMS)}")
        if self.max_trials < 1 or self.max_concurrent < 1:
            raise ValueError("max_trials and max_concurrent must be at least 1")
        if self.cpus_per_trial < 0:
            raise ValueError(f"cpus_per_trial: must be >= 0, got {self.cpus_per_trial}")

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["proxy"] = self.proxy.to_dict()
        return data

    def trial_cpus(self) -> float:
        return self.cpus_per_trial or max(1, (os.cpu_count() or 1) // self.max_concurrent)


def make_algorithm(config: SearchConfig, journal_path: str) -> SearchAlgorithm:
    space = NasNetSpace(num_blocks=config.num_blocks)
    kwargs: dict[str, Any] = {"seed": config.seed, "journal_path": journal_path}
    if config.algorithm == "regularized_evolution":
        kwargs.update(population_size=config.population_size, sample_size=config.sample_size)
    return ALGORITHMS[config.algorithm](space, **kwargs)


def open_search(config: SearchConfig) -> SearchAlgorithm:
    """A new search in `config.output_dir`, or the one already there, resumed from its journal."""
    os.makedirs(config.output_dir, exist_ok=True)
    journal = os.path.join(config.output_dir, JOURNAL)
    config_path = os.path.join(config.output_dir, CONFIG)
    if os.path.exists(journal) and os.path.getsize(journal) > 0:
        with open(config_path, encoding="utf-8") as f:
            saved = json.load(f)
        current = config.to_json()
        changed = [k for k in FIXED_SETTINGS if saved.get(k) != current[k]]
        if changed:
            raise ValueError(
                f"{config.output_dir} holds a search with different {', '.join(changed)} "
                f"(saved: {', '.join(f'{k}={saved.get(k)!r}' for k in changed)}); "
                "use a new --output_dir for a different search"
            )
        algorithm = resume(journal)
        log.info("resumed %s: %d trials done, %d to re-issue", journal, algorithm.completed(),
                 len(algorithm.pending()))
    else:
        algorithm = make_algorithm(config, journal)
    write_json(config_path, config.to_json())
    return algorithm


def run_search(config: SearchConfig) -> SearchAlgorithm:
    """Run (or finish) the search; returns the algorithm with every result told."""
    import ray
    from ray import tune
    from ray.tune.search import ConcurrencyLimiter

    from evolution.tune_searcher import EvolutionSearcher
    from experiments.trial import run_trial

    algorithm = open_search(config)
    budget = config.max_trials - algorithm.completed()
    if budget <= 0:
        print(f"{config.output_dir}: all {algorithm.completed()} trials already done")
        return algorithm
    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(
            address=config.ray_address,
            include_dashboard=False,
            logging_level=logging.WARNING,
            log_to_driver=False,  # TensorFlow start-up chatter; errors go to Tune error files
            runtime_env={"env_vars": {"TF_CPP_MIN_LOG_LEVEL": "2"}},
        )
    try:
        searcher = EvolutionSearcher(
            algorithm, budget, on_tell=lambda a, t: on_result(a, t, config)
        )
        trainable = tune.with_resources(
            tune.with_parameters(run_trial, proxy=config.proxy.to_dict()), {"cpu": config.trial_cpus()}
        )
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=ConcurrencyLimiter(searcher, max_concurrent=config.max_concurrent),
                num_samples=budget,
            ),
            run_config=tune.RunConfig(
                name=time.strftime("tune-%Y%m%d-%H%M%S"),
                storage_path=os.path.abspath(os.path.join(config.output_dir, "tune")),
                verbose=0,
            ),
        )
        tuner.fit()
    finally:
        if started_ray:
            ray.shutdown()
    write_results(algorithm, config.output_dir)
    algorithm.close()
    return algorithm


def on_result(algorithm: SearchAlgorithm, trial_id: int, config: SearchConfig) -> None:
    """After each result: rewrite the results files and print one progress line."""
    write_results(algorithm, config.output_dir)
    trial, outcome = algorithm.trials[trial_id], algorithm.outcomes[trial_id]
    origin = "random" if trial.parent_id is None else f"child of {trial.parent_id}: {trial.mutation}"
    if outcome.status == "ok":
        result = f"{algorithm.objective} {outcome.metrics[algorithm.objective]:.4f}"
    else:
        result = f"FAILED ({outcome.error})"
    best_trial, best_outcome = algorithm.best() or (None, None)
    best = f"best {best_outcome.metrics[algorithm.objective]:.4f}" if best_outcome else "no best yet"
    print(f"[{algorithm.completed()}/{config.max_trials}] trial {trial_id} ({origin}): {result}; {best}",
          flush=True)


def summary(algorithm: SearchAlgorithm, output_dir: str) -> str:
    done = algorithm.completed()
    failed = sum(o.status != "ok" for o in algorithm.outcomes.values())
    lines = [f"{done} trials done ({failed} failed); results in {output_dir}/results.csv"]
    best = algorithm.best()
    if best is None:
        lines.append("no trial succeeded")
    else:
        trial, outcome = best
        value = outcome.metrics[algorithm.objective]
        lines.append(f"best {algorithm.objective}: {value:.4f} (trial {trial.trial_id}); "
                     f"genotype in {output_dir}/best_genotype.json")
        lines.append("top 5:")
        lines.append(top_table(algorithm, 5))
        lines.append(f"best genotype (trial {trial.trial_id}):")
        lines.append(trial.genotype.describe())
    return "\n".join(lines)
