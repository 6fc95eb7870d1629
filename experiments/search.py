"""`amoeba search`: a search algorithm driving candidate training through Ray Tune.

The output dir holds the journal (the state), search_config.json, results.csv and
best_genotype.json. Running again with the same output dir resumes from the journal. This module
orchestrates only: no TensorFlow here (trials import it in their own worker processes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from evolution import ALGORITHMS, JournalLock, SearchAlgorithm, make_algorithm, resume
from evolution.algorithms import as_json, genotype_of
from evolution.objectives import LIMITED, MEASURES, Limits, MnasReward, parse_goals
from evolution.rungs import Rungs
from experiments.results import top_table, write_results
from searchspace import SearchSpace, space_from_config
from core.proxy_config import ProxyConfig, check_proxy
from core import storage
from core.storage import read_json, write_json

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
    max_concurrent: int = 0  # 0: as many as the cluster's resources allow
    seed: int = 0
    num_blocks: int = 5
    cpus_per_trial: float = 0.0  # 0: the cluster's CPUs shared out among the concurrent trials
    gpus_per_trial: float = 0.0  # fractions share a GPU (TensorFlow's memory growth is on)
    tpus_per_trial: int = 0  # Ray's TPU resource: TPU chips of the trial's own host
    max_failures: int = 2  # Tune's retries of a trial whose worker died (a lost node, a crash)
    max_consecutive_failures: int = 5  # the circuit breaker (0: off)
    reuse_workers: bool = True  # keep each trial's worker process warm for the next trial
    # a Tune experiment's trials; a longer search runs several in turn. Tune holds about 100 KB of
    # driver memory per trial of an experiment until it ends (benchmarks/README.md: search_scaling.py)
    trials_per_tuner: int = 200
    ray_address: str | None = None
    upload_to: str | None = None  # gs://BUCKET/PATH: a copy of the results, kept up to date
    rungs: tuple[int, ...] = ()  # multi-fidelity: epochs at which trials report (evolution/rungs.py)
    reduction_factor: float = 3.0
    objectives: tuple[str, ...] = ()  # pareto_evolution's goals, e.g. ("val_accuracy:max", "latency_ms:min")
    max_params: int = 0  # size limits: a child over one is rejected before training (0: none)
    max_multiply_adds: int = 0
    max_latency_ms: float = 0.0  # batch-1 latency limit: measured by the trial, infeasible over it
    latency_target_ms: float = 0.0  # > 0: MnasNet's reward, accuracy x (cost / target)^latency_weight
    latency_weight: float = -0.07
    cost_metric: str = "latency_ms"  # the reward's cost measure
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    objective: str = "val_accuracy"  # the metric a trial reports that the search maximises (mode max) or minimises
    mode: str = "max"
    space: dict[str, Any] | None = None  # another space's to_config() (default: NASNet cells of num_blocks blocks)
    initial: tuple[Any, ...] = ()  # genotypes (their JSON) that open the first population, before random ones
    trainable: str = ""  # a function of one's own (experiments.api), named; empty: the proxy trainer

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm: unknown {self.algorithm!r}; known: {sorted(ALGORITHMS)}")
        if self.trials_per_tuner < 1:
            raise ValueError(f"trials_per_tuner: must be at least 1, got {self.trials_per_tuner}")
        if self.max_trials < 1 or self.max_concurrent < 0:
            raise ValueError("max_trials must be at least 1 and max_concurrent at least 0 (0: from resources)")
        for name in ("cpus_per_trial", "gpus_per_trial", "tpus_per_trial", "max_failures",
                     "max_consecutive_failures"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)}")
        if self.upload_to and not self.upload_to.startswith("gs://"):
            raise ValueError(f"upload_to: must be a gs://BUCKET/PATH, got {self.upload_to!r}")
        if self.rungs:
            Rungs(self.rungs, self.reduction_factor)  # validates them
            if self.proxy.tpu or self.tpus_per_trial:
                raise ValueError("rungs: TPU trials train through Keras's fit and have no rungs yet")
            if self.proxy.train_seconds:
                raise ValueError("train_seconds: a time budget per candidate replaces --rungs' epochs; give one")
        if self.proxy.tpu or self.tpus_per_trial:
            tpu_lacks = [name for name, on in (("train_seconds", self.proxy.train_seconds),
                                               ("max_latency_ms", self.max_latency_ms),
                                               ("latency_target_ms", self.latency_target_ms),
                                               ("objectives", self.algorithm == "pareto_evolution")) if on]
            if tpu_lacks:
                raise ValueError(f"{', '.join(tpu_lacks)}: TPU trials train through Keras's fit, which measures "
                                 "no latency or step time and has no time budget yet")
        if self.proxy.train_seconds and self.proxy.timeout_s and self.proxy.train_seconds >= 0.8 * self.proxy.timeout_s:
            raise ValueError(f"train_seconds: {self.proxy.train_seconds:g} s leaves no room under the trial timeout "
                             f"of {self.proxy.timeout_s:g} s (--trial_timeout_s); raise it or train shorter")
        if self.cost_metric not in MEASURES:
            raise ValueError(f"cost_metric: unknown {self.cost_metric!r}; known: {sorted(MEASURES)}")
        if self.objectives and self.algorithm != "pareto_evolution":
            raise ValueError("objectives: several objectives need --algorithm=pareto_evolution")
        parse_goals(list(self.objectives), MEASURES)  # validates them
        space = self.search_space()
        for i, genotype in enumerate(self.initial):  # before anything is written
            genotype_of(space, genotype, f"initial[{i}]")
        self.limits()
        self.reward()

    def limits(self) -> Limits:
        return Limits({m: getattr(self, f"max_{m}") for m in LIMITED if getattr(self, f"max_{m}")})

    def reward(self) -> MnasReward | None:
        if not self.latency_target_ms:
            return None
        return MnasReward(self.cost_metric, self.latency_target_ms, self.latency_weight)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["proxy"] = self.proxy.to_dict()
        return data

    def algorithm_params(self) -> dict[str, Any]:
        goals = parse_goals(list(self.objectives) or ["val_accuracy:max", "latency_ms:min"], MEASURES)
        return {"population_size": self.population_size, "sample_size": self.sample_size,
                "objectives": [str(g) for g in goals]}

    def size_measure(self) -> Callable[[Any], dict[str, int]] | None:
        """With a size limit: a child's size, built in a Ray worker (Ray is up when it is asked)."""
        if not (self.max_params or self.max_multiply_adds):
            return None
        from experiments.trial import size_measure

        return size_measure(self.proxy.to_dict(), self.search_space().to_config())

    def search_space(self) -> SearchSpace:
        """The space candidates come from: NASNet cells, the one family the proxy trainer builds, unless
        a function of one's own trains them (`space`)."""
        return space_from_config(self.space or {"name": "nasnet", "num_blocks": self.num_blocks})

    def new_algorithm(self, journal_path: str | None = None, journal_lock: JournalLock | None = None
                      ) -> SearchAlgorithm:
        rungs = Rungs(self.rungs, self.reduction_factor) if self.rungs else None
        return make_algorithm(self.algorithm, self.search_space(), self.algorithm_params(), seed=self.seed,
                              journal_path=journal_path, journal_lock=journal_lock, rungs=rungs,
                              reward=self.reward(), limits=self.limits(), measure=self.size_measure(),
                              objective=self.objective, mode=self.mode, initial=self.initial)


def _comparable_proxy(proxy: dict[str, Any]) -> dict[str, Any]:
    """The proxy settings that change a candidate's fitness (not its time limit or threads); a
    setting that an older search_config.json lacks had its default then; image sizes as resolved."""
    known = ProxyConfig().to_dict()
    settings = {**known, **{k: v for k, v in proxy.items() if k in known}}  # an older config's max_params left out
    settings["image_size"] = ProxyConfig(**settings).input_size
    return {k: v for k, v in settings.items() if k not in ("timeout_s", "threads", "tpu")}


def _changed_settings(config: SearchConfig, algorithm: SearchAlgorithm, saved: dict[str, Any] | None) -> list[str]:
    expected = config.new_algorithm().config()
    changed = [f"{k}: {algorithm.config()[k]!r} in the journal, {v!r} now"
               for k, v in expected.items() if as_json(algorithm.config()[k]) != as_json(v)]
    if saved is not None:
        before, now = _comparable_proxy(saved["proxy"]), _comparable_proxy(config.proxy.to_dict())
        changed += [f"proxy {k}: {before.get(k)!r} before, {now.get(k)!r} now"
                    for k in sorted(set(before) | set(now)) if before.get(k) != now.get(k)]
    return changed


def open_search(config: SearchConfig) -> SearchAlgorithm:
    """A new search in `config.output_dir`, or the one already there, resumed from its journal.

    Raises JournalLocked, naming the running driver, when another driver has the search open, and
    ValueError when the settings differ from the saved search's in a way that would mix
    incomparable trials (algorithm, seed, P, S, space, proxy task), and when a data dir cannot
    feed the proxy.
    """
    if not config.trainable:
        check_proxy(config.proxy)
    os.makedirs(config.output_dir, exist_ok=True)
    journal = os.path.join(config.output_dir, JOURNAL)
    config_path = os.path.join(config.output_dir, CONFIG)
    lock = JournalLock(journal)  # one driver per search, from before it reads or writes anything
    if os.path.exists(journal) and os.path.getsize(journal) > 0:
        algorithm = resume(journal, lock=lock, measure=config.size_measure())
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
    try:
        write_json(config_path, config.to_json())  # before the journal: a journal always has its config
    except BaseException:
        lock.release()
        raise
    return config.new_algorithm(journal_path=journal, journal_lock=lock)


class SearchHalted(RuntimeError):
    """The circuit breaker stopped the search; a rerun with the same command resumes it."""


class SearchInterrupted(SearchHalted):
    """Ctrl-C stopped the search; a rerun with the same command resumes it."""


@contextlib.contextmanager
def stop_on_interrupt() -> Iterator[threading.Event]:
    """Ctrl-C (SIGINT) sets the event: the search stops its trials as the circuit breaker does and
    ends (Ray Tune's own handler, which ends one Tune experiment and lets the next start, is turned
    off); a second Ctrl-C ends the driver at once. Only the main thread can take the signal."""
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return

    def handle(signum: int, frame: Any) -> None:
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()
        print("interrupted: stopping the running trials (Ctrl-C again to end at once); run the same command "
              "again to resume", flush=True)

    before, tune_handler = signal.signal(signal.SIGINT, handle), os.environ.get("TUNE_DISABLE_SIGINT_HANDLER")
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, before)
        if tune_handler is None:
            os.environ.pop("TUNE_DISABLE_SIGINT_HANDLER", None)
        else:
            os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = tune_handler


class ClusterTooSmall(ValueError):
    """The Ray cluster lacks the resources one trial asks for (a config error)."""


class CircuitBreaker:
    """Counts this run's failed candidates in a row (a rerun starts from zero) and trips at `limit`
    (0: never): a broken data dir must not burn the search's budget."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_a_row = 0
        self.last_error: str | None = None

    def record(self, status: str, error: str | None) -> None:
        """An infeasible candidate (over a limit) is neither a failure nor a success here."""
        if status == "infeasible":
            return
        self.in_a_row = self.in_a_row + 1 if status != "ok" else 0
        self.last_error = error if status != "ok" else self.last_error

    @property
    def tripped(self) -> bool:
        return 0 < self.limit <= self.in_a_row


def trial_resources(config: SearchConfig, cluster: dict[str, float]) -> tuple[dict[str, float], int]:
    """Each trial's Ray resources, and how many trials run at once: `max_concurrent`, or as many as
    the cluster's CPUs, GPUs and TPUs allow for the per-trial amounts asked. CPUs not asked for are
    shared out among the concurrent trials."""
    asked = {"GPU": config.gpus_per_trial, "TPU": config.tpus_per_trial, "CPU": config.cpus_per_trial}
    limits = {kind: int(cluster.get(kind, 0) / amount + 1e-9) for kind, amount in asked.items() if amount}
    concurrent = config.max_concurrent or min(limits.values(), default=max(1, int(cluster.get("CPU", 1))))
    short = [kind for kind, limit in limits.items() if limit < 1]
    if short:
        have = ", ".join(f"{cluster.get(kind, 0):g} {kind}" for kind in short)
        raise ClusterTooSmall(f"the Ray cluster has {have}: not enough for one trial "
                         f"({', '.join(f'{asked[k]:g} {k}' for k in short)} per trial)")
    cpu = cluster.get("CPU", 1)
    cpus = config.cpus_per_trial or float(max(1, int(cpu // concurrent)))
    if not config.cpus_per_trial and (config.gpus_per_trial or config.tpus_per_trial):
        cpus = min(cpus, cpu / concurrent)  # accelerators set the pace: trials may share a CPU
    resources = {"CPU": cpus, "GPU": config.gpus_per_trial, "TPU": config.tpus_per_trial}
    return {k: v for k, v in resources.items() if v}, concurrent


def run_search(config: SearchConfig, algorithm: SearchAlgorithm, trainable: Any = None,
               make_trainable: Callable[[Any], Any] | None = None) -> SearchAlgorithm:
    """Run the search's remaining trials through Ray Tune; the journal records every result.
    `trainable` (a function of the trial's config; default: train the candidate) is for measuring
    and testing the machinery itself; `make_trainable(notes)` makes one that is given the search's
    FailureNotes (what a hung trial's watchdog writes down). Raises SearchHalted when the circuit
    breaker trips."""
    import ray
    from ray import tune
    from ray.tune.search import ConcurrencyLimiter
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from evolution.tune_searcher import EvolutionSearcher, RungScheduler
    from experiments.local_ray import init_ray
    from experiments.progress import ProgressCallback
    from experiments.trial import FailureNotes, run_trial

    budget = config.max_trials - algorithm.completed()
    if budget <= 0:
        print(f"{config.output_dir}: all {algorithm.completed()} trials already done")
        return algorithm
    started_ray = not ray.is_initialized()
    if started_ray:
        quiet = {"TF_CPP_MIN_LOG_LEVEL": "2"}
        if config.ray_address:  # workers of another cluster get our packages shipped to them
            import core, evolution, experiments, searchspace, trainer

            init_ray(config.ray_address, {"env_vars": quiet, "py_modules": [core, evolution, experiments, searchspace,
                                                                            trainer]})
        else:  # a local Ray's workers inherit this environment (a runtime_env costs 0.5 s of start-up)
            for name, value in quiet.items():
                os.environ.setdefault(name, value)
            init_ray(None)
    breaker = CircuitBreaker(config.max_consecutive_failures)
    interrupt = contextlib.ExitStack()
    interrupted = interrupt.enter_context(stop_on_interrupt())

    def halted() -> bool:
        return breaker.tripped or interrupted.is_set()

    try:
        resources, concurrent = trial_resources(config, ray.cluster_resources())
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        notes = FailureNotes.options(scheduling_strategy=here).remote()  # outlives any worker node

        def record(algorithm: SearchAlgorithm, trial_id: int) -> None:
            outcome = algorithm.outcomes[trial_id]
            breaker.record(outcome.status, outcome.error)
            on_result(algorithm, trial_id, config)

        def failure_reason(trial_id: int, tune_trial_id: str) -> str | None:
            return ray.get(notes.get.remote(trial_id), timeout=60)

        if make_trainable is not None:
            trainable = make_trainable(notes)
        elif trainable is None:
            trainable = tune.with_parameters(
                run_trial, proxy={**config.proxy.to_dict(), "threads": max(1, int(resources["CPU"])),
                                  "tpu": "local" if config.tpus_per_trial else None},
                space=algorithm.space.to_config(), notes=notes)
        progress = ProgressCallback(algorithm, config.max_trials)
        # Tune keeps a record of every trial of an experiment until it ends (about 70 KB each): a long
        # search runs as a series of experiments of at most trials_per_tuner trials, one journal.
        part = 0
        while not halted() and (left := config.max_trials - algorithm.completed()) > 0:
            before, part = algorithm.completed(), part + 1
            searcher = EvolutionSearcher(algorithm, min(left, config.trials_per_tuner), on_tell=record,
                                         failure_reason=failure_reason, should_stop=halted,
                                         checkpoint_root=os.path.abspath(os.path.join(config.output_dir, CHECKPOINTS)))
            tune.Tuner(
                tune.with_resources(trainable, resources),
                tune_config=tune.TuneConfig(
                    search_alg=ConcurrencyLimiter(searcher, max_concurrent=concurrent),
                    scheduler=RungScheduler(algorithm, on_rung=on_rung) if algorithm.rungs else None,
                    num_samples=min(left, config.trials_per_tuner),
                    reuse_actors=config.reuse_workers,  # warm workers: TensorFlow imported, data decoded once
                    # short names: Tune's default spells the whole genotype into each trial's dir name
                    trial_name_creator=_tune_trial_name,
                    trial_dirname_creator=_tune_trial_name,
                ),
                run_config=tune.RunConfig(
                    name=time.strftime("tune-%Y%m%d-%H%M%S") + f"-{part}",
                    storage_path=os.path.abspath(os.path.join(config.output_dir, "tune")),
                    verbose=0,
                    stop=_stop_all_when(halted),
                    failure_config=tune.FailureConfig(max_failures=config.max_failures),
                    callbacks=[progress],
                ),
            ).fit()
            if algorithm.completed() == before and not algorithm.waiting_reissue():  # every trial stopped
                break
    finally:
        interrupt.close()
        if started_ray:
            ray.shutdown()
        write_results(algorithm, config.output_dir)
        algorithm.close()
    if config.upload_to:
        _upload(lambda: storage.copy_tree_to_gcs(config.output_dir, config.upload_to), config.upload_to)
    if breaker.tripped:
        raise SearchHalted(f"stopped: {breaker.in_a_row} candidates failed in a row (--max_consecutive_failures="
                           f"{config.max_consecutive_failures}); the last: {breaker.last_error}. Fix the cause and "
                           "run the same command again: the search resumes where it stopped")
    if interrupted.is_set():
        raise SearchInterrupted(f"interrupted with {len(algorithm.pending())} trials in flight; run the same command "
                                "again: the search resumes where it stopped, in-flight trials re-issued")
    return algorithm


def _tune_trial_name(trial: Any) -> str:
    return f"trial_{trial.config['trial_id']}_{trial.trial_id}"


def _stop_all_when(condition: Callable[[], bool]) -> Any:
    """A Tune Stopper that ends the whole experiment once `condition()` holds (Ray is imported
    lazily in this module, so the class is made here)."""
    from ray import tune

    class StopAll(tune.Stopper):
        def __init__(self, condition: Callable[[], bool]) -> None:
            self.condition = condition

        def __call__(self, trial_id: str, result: dict) -> bool:
            return False

        def stop_all(self) -> bool:
            return self.condition()

        def __getstate__(self) -> dict:
            return {}  # Tune pickles its stopper into tuner.pkl; the condition (a lock, the breaker) stays here

        def __setstate__(self, state: dict) -> None:
            self.condition = lambda: False  # only read back by Tune's restore, which a search never uses

    return StopAll(condition)


RESULT_FILES = (JOURNAL, CONFIG, "results.csv", "best_genotype.json")
CHECKPOINTS = "checkpoints"  # a multi-fidelity trial's state after its last rung, until it ends


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
    from evolution.tune_searcher import checkpoint_dir

    shutil.rmtree(checkpoint_dir(os.path.join(config.output_dir, CHECKPOINTS), trial_id), ignore_errors=True)
    write_results(algorithm, config.output_dir)
    if config.upload_to:
        _upload(lambda: upload_results(config.output_dir, config.upload_to), config.upload_to)
    trial, outcome = algorithm.trials[trial_id], algorithm.outcomes[trial_id]
    origin = trial.mutation if trial.parent_id is None else f"child of {trial.parent_id}: {trial.mutation}"
    if outcome.status == "ok":
        result = describe_result(algorithm, outcome.metrics)
    else:
        result = f"{outcome.status.upper()} ({outcome.error})"
    best_trial, best_outcome = algorithm.best() or (None, None)
    best = f"best {algorithm.score(best_outcome.metrics):.4f}" if best_outcome else "no best yet"
    print(f"[{algorithm.completed()}/{config.max_trials}] trial {trial_id} ({origin}): {result}; {best}",
          flush=True)


def describe_result(algorithm: SearchAlgorithm, metrics: dict[str, Any]) -> str:
    """The objective (and the reward, with one), then each other goal and cost measure reported."""
    parts = [f"{algorithm.objective} {metrics[algorithm.objective]:.4f}"]
    if algorithm.reward is not None:
        parts.append(f"reward {algorithm.score(metrics):.4f}")
    if "params" in metrics:
        parts.append(f"{metrics['params']:,.0f} params")
    for name, label in (("latency_ms", "latency"), ("step_ms", "step")):
        if name in metrics:
            parts.append(f"{label} {metrics[name]:.3g} ms")
    return ", ".join(parts)


def on_rung(algorithm: SearchAlgorithm, trial_id: int, decision: str) -> None:
    """After each rung decision: one line."""
    metrics = algorithm.rung_results.get(trial_id, [{}])[-1]
    if "rung" in metrics:
        print(f"  trial {trial_id} at rung {metrics['rung']} ({metrics['epochs']} epochs): {algorithm.objective} "
              f"{metrics[algorithm.objective]:.4f} -> {decision}", flush=True)


def summary(algorithm: SearchAlgorithm, output_dir: str) -> str:
    done = algorithm.completed()
    failed = sum(o.status == "failed" for o in algorithm.outcomes.values())
    infeasible = sum(o.status == "infeasible" for o in algorithm.outcomes.values())
    over = f", {infeasible} infeasible" if infeasible else ""
    rejected = f"; {algorithm.rejected} children rejected untrained for their size" if algorithm.rejected else ""
    lines = [f"{done} trials done ({failed} failed{over}){rejected}; results in {output_dir}/results.csv"]
    best = algorithm.best()
    if best is None:
        lines.append("no trial succeeded")
    else:
        trial, outcome = best
        value = algorithm.score(outcome.metrics)
        lines.append(f"best {'reward' if algorithm.reward else algorithm.objective}: {value:.4f} (trial {trial.trial_id}); "
                     f"genotype in {output_dir}/best_genotype.json")
        lines.append("top 5:")
        lines.append(top_table(algorithm, 5))
        lines.append(f"best genotype (trial {trial.trial_id}):")
        lines.append(trial.genotype.describe())
    return "\n".join(lines)
