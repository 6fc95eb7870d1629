"""`amoeba search`: a search algorithm driving candidate training through Ray Tune.

The output dir holds the journal (the state), search_config.json, results.csv and
best_genotype.json. Running again with the same output dir resumes from the journal. This module
orchestrates only: no TensorFlow here (trials import it in their own worker processes).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from evolution import ALGORITHMS, SearchAlgorithm, make_algorithm, resume
from experiments.results import top_table, write_results
from searchspace import SearchSpace, space_from_config
from trainer.proxy import ProxyConfig, check_proxy
from trainer import storage
from trainer.storage import read_json, write_json

log = logging.getLogger(__name__)
JOURNAL = "journal.jsonl"
CONFIG = "search_config.json"


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
    reuse_workers: bool = True  # keep each trial's worker process warm for the next trial
    ray_address: str | None = None
    upload_to: str | None = None  # gs://BUCKET/PATH: a copy of the results, kept up to date
    proxy: ProxyConfig = field(default_factory=ProxyConfig)

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm: unknown {self.algorithm!r}; known: {sorted(ALGORITHMS)}")
        if self.max_trials < 1 or self.max_concurrent < 1:
            raise ValueError("max_trials and max_concurrent must be at least 1")
        if self.upload_to and not self.upload_to.startswith("gs://"):
            raise ValueError(f"upload_to: must be a gs://BUCKET/PATH, got {self.upload_to!r}")
        if self.cpus_per_trial < 0:
            raise ValueError(f"cpus_per_trial: must be >= 0, got {self.cpus_per_trial}")

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["proxy"] = self.proxy.to_dict()
        return data

    def algorithm_params(self) -> dict[str, Any]:
        return {"population_size": self.population_size, "sample_size": self.sample_size}

    def search_space(self) -> SearchSpace:
        """The space candidates come from: NASNet cells, the one family the proxy trainer builds."""
        return space_from_config({"name": "nasnet", "num_blocks": self.num_blocks})

    def new_algorithm(self, journal_path: str | None = None) -> SearchAlgorithm:
        return make_algorithm(self.algorithm, self.search_space(), self.algorithm_params(), seed=self.seed,
                              journal_path=journal_path)


def _comparable_proxy(proxy: dict[str, Any]) -> dict[str, Any]:
    """The proxy settings that change a candidate's fitness (not its time limit or threads); a
    setting that an older search_config.json lacks had its default then; image sizes as resolved."""
    settings = {**ProxyConfig().to_dict(), **proxy}
    settings["image_size"] = ProxyConfig(**settings).input_size
    return {k: v for k, v in settings.items() if k not in ("timeout_s", "threads")}


def _changed_settings(config: SearchConfig, algorithm: SearchAlgorithm, saved: dict[str, Any] | None) -> list[str]:
    expected = config.new_algorithm().config()
    changed = [f"{k}: {algorithm.config()[k]!r} in the journal, {v!r} now"
               for k, v in expected.items() if algorithm.config()[k] != v]
    if saved is not None:
        before, now = _comparable_proxy(saved["proxy"]), _comparable_proxy(config.proxy.to_dict())
        changed += [f"proxy {k}: {before.get(k)!r} before, {now.get(k)!r} now"
                    for k in sorted(set(before) | set(now)) if before.get(k) != now.get(k)]
    return changed


def open_search(config: SearchConfig) -> SearchAlgorithm:
    """A new search in `config.output_dir`, or the one already there, resumed from its journal.

    Raises ValueError when the settings differ from the saved search's in a way that would mix
    incomparable trials (algorithm, seed, P, S, space, proxy task), and when a data dir cannot
    feed the proxy.
    """
    check_proxy(config.proxy)
    os.makedirs(config.output_dir, exist_ok=True)
    journal = os.path.join(config.output_dir, JOURNAL)
    config_path = os.path.join(config.output_dir, CONFIG)
    if os.path.exists(journal) and os.path.getsize(journal) > 0:
        algorithm = resume(journal)
        saved = read_json(config_path) if os.path.exists(config_path) else None
        changed = _changed_settings(config, algorithm, saved)
        if changed:
            algorithm.close()
            raise ValueError(f"{config.output_dir} holds a different search ({'; '.join(changed)}); "
                             "use a new --output_dir for a different search")
        log.info("resumed %s: %d trials done, %d to re-issue", journal, algorithm.completed(),
                 len(algorithm.pending()))
        write_json(config_path, config.to_json())
        return algorithm
    write_json(config_path, config.to_json())  # before the journal: a journal always has its config
    return config.new_algorithm(journal_path=journal)


def run_search(config: SearchConfig, algorithm: SearchAlgorithm) -> SearchAlgorithm:
    """Run (or finish) the search opened by `open_search`; returns it with every result told."""
    import ray
    from ray import tune
    from ray.tune.search import ConcurrencyLimiter

    from evolution.tune_searcher import EvolutionSearcher
    from experiments.progress import ProgressCallback
    from experiments.trial import run_trial

    budget = config.max_trials - algorithm.completed()
    if budget <= 0:
        print(f"{config.output_dir}: all {algorithm.completed()} trials already done")
        return algorithm
    started_ray = not ray.is_initialized()
    if started_ray:
        runtime_env: dict[str, Any] = {"env_vars": {"TF_CPP_MIN_LOG_LEVEL": "2"}}
        if config.ray_address:  # workers of another cluster get our packages shipped to them
            import evolution, experiments, searchspace, trainer

            runtime_env["py_modules"] = [evolution, experiments, searchspace, trainer]
        ray.init(
            address=config.ray_address,
            include_dashboard=False,
            logging_level=logging.WARNING,
            log_to_driver=False,  # TensorFlow start-up chatter; errors go to Tune error files
            runtime_env=runtime_env,
        )
    cpus = config.cpus_per_trial or max(1, int(ray.cluster_resources().get("CPU", 1)) // config.max_concurrent)
    try:
        searcher = EvolutionSearcher(
            algorithm, budget, on_tell=lambda a, t: on_result(a, t, config)
        )
        trainable = tune.with_resources(
            tune.with_parameters(run_trial, proxy={**config.proxy.to_dict(), "threads": max(1, int(cpus))},
                                 space=algorithm.space.to_config()),
            {"cpu": cpus},
        )
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=ConcurrencyLimiter(searcher, max_concurrent=config.max_concurrent),
                num_samples=budget,
                reuse_actors=config.reuse_workers,  # warm workers: TensorFlow imported, data decoded once
            ),
            run_config=tune.RunConfig(
                name=time.strftime("tune-%Y%m%d-%H%M%S"),
                storage_path=os.path.abspath(os.path.join(config.output_dir, "tune")),
                verbose=0,
                callbacks=[ProgressCallback(algorithm, config.max_trials)],
            ),
        )
        tuner.fit()
    finally:
        if started_ray:
            ray.shutdown()
    write_results(algorithm, config.output_dir)
    algorithm.close()
    if config.upload_to:
        _upload(lambda: storage.copy_tree_to_gcs(config.output_dir, config.upload_to), config.upload_to)
    return algorithm


RESULT_FILES = (JOURNAL, CONFIG, "results.csv", "best_genotype.json")


def upload_results(output_dir: str, upload_to: str) -> None:
    """Copy the search's state and result files to gs:// (Tune's own storage stays local)."""
    for name in RESULT_FILES:
        local = os.path.join(output_dir, name)
        if os.path.exists(local):
            storage.write_bytes(storage.join(upload_to, name), storage.read_bytes(local))


def _upload(copy, where: str) -> None:
    """An upload that fails is reported, never fatal: the local output dir is the search's state."""
    try:
        copy()
    except Exception as err:  # noqa: BLE001 - any client or network error
        log.warning("could not upload to %s: %s", where, err)
        print(f"warning: could not upload to {where}: {err}", flush=True)


def on_result(algorithm: SearchAlgorithm, trial_id: int, config: SearchConfig) -> None:
    """After each result: rewrite the results files (and their gs:// copy) and print one line."""
    write_results(algorithm, config.output_dir)
    if config.upload_to:
        _upload(lambda: upload_results(config.output_dir, config.upload_to), config.upload_to)
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
