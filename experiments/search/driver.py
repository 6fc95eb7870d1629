"""`amoeba search`: a search algorithm driving candidate training through Ray Tune.

The output dir holds the journal (the state), search_config.json, results.csv and
best_genotype.json. Running again with the same output dir resumes from the journal. What a
search is lives in experiments/search/search_config.py (SearchConfig) and output_dir.py (opening its
dir); this module runs it. It orchestrates only: no TensorFlow here (trials import it in their own worker processes).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import shutil
import time
from typing import Any, Callable

from evolution import SearchAlgorithm
from experiments.search import ranking
from experiments.layout import CHECKPOINTS, CONFIG, JOURNAL, RESULT_FILES
from experiments.search.resources import ClusterTooSmall, trial_resources
from experiments.tracking.hparams import tune_without_tensorboard, write_search_hparams
from experiments.tracking.mlflow_log import log_search_trials
from experiments.search.results import top_table, write_results
from experiments.search.local_ray import local_ray_gone
from experiments.search.output_dir import open_search, resume_differences
from experiments.search.search_config import SearchConfig
from experiments.search.stop_signals import stop_on_interrupt
from core import storage

__all__ = ["CHECKPOINTS", "CONFIG", "JOURNAL", "RESULT_FILES", "CircuitBreaker", "ClusterTooSmall", "SearchConfig",
           "SearchHalted", "SearchInterrupted", "open_search", "resume_differences", "run_search", "summary",
           "trial_resources"]
log = logging.getLogger(__name__)


class SearchHalted(RuntimeError):
    """The circuit breaker stopped the search; a rerun with the same command resumes it."""


class SearchInterrupted(SearchHalted):
    """Ctrl-C or SIGTERM stopped the search; a rerun with the same command resumes it."""


CODE_ERRORS = ("the trial finished without reporting", "the training function returned without reporting")
CANDIDATE_FAILURES = ("nan", "out of memory", "oom", "resourceexhausted", "timeout")  # a bad candidate's, lowercase


def looks_like_code_error(reason: str | None) -> bool:
    """Whether a failure's reason says the training code is wrong, not the candidate: a missing
    objective, a silent return, or an exception that is not out of memory, NaN or a timeout."""
    if not reason:
        return False
    if reason.startswith(CODE_ERRORS):
        return True
    return bool(re.match(r"^[\w.]+(Error|Exception)\b", reason)) and not any(
        word in reason.lower() for word in CANDIDATE_FAILURES)


class CircuitBreaker:
    """Counts this run's failed candidates in a row (a rerun starts from zero) and trips at `limit`
    (0: never): a broken data dir must not burn the search's budget. With `code_errors` (a training
    function of one's own) it also trips at the first failure that looks like a bug in that code
    (`looks_like_code_error`) while no trial of this run has succeeded: every trial so far failed
    by the code, not by its candidate. (The proxy trainer's exceptions are its candidates' or its
    data's: counted.)"""

    def __init__(self, limit: int, code_errors: bool = False) -> None:
        self.limit = limit
        self.code_errors = code_errors
        self.in_a_row = 0
        self.last_error: str | None = None
        self.succeeded = False
        self.code_error: str | None = None

    def record(self, status: str, error: str | None) -> None:
        """An infeasible candidate (over a limit) is neither a failure nor a success here."""
        if status == "infeasible":
            return
        self.in_a_row = self.in_a_row + 1 if status != "ok" else 0
        self.last_error = error if status != "ok" else self.last_error
        self.succeeded = self.succeeded or status == "ok"
        if self.code_errors and status != "ok" and not self.succeeded and looks_like_code_error(error):
            self.code_error = self.code_error or error

    @property
    def tripped(self) -> bool:
        return self.limit > 0 and (self.limit <= self.in_a_row or self.code_error is not None)


def run_search(config: SearchConfig, algorithm: SearchAlgorithm, trainable: Any = None,
               make_trainable: Callable[[Any], Any] | None = None) -> SearchAlgorithm:
    """Run the search's remaining trials through Ray Tune; the journal records every result.
    `trainable` (a function of the trial's config; default: train the candidate) is for measuring
    and testing the machinery itself; `make_trainable(notes)` makes one that is given the search's
    FailureNotes (what a hung trial's watchdog writes down). Raises SearchHalted when the circuit
    breaker trips."""
    import ray

    if config.max_trials - algorithm.completed() <= 0:
        print(f"{config.output_dir}: all {algorithm.completed()} trials already done")
        return algorithm
    started_ray = _start_ray(config)
    breaker = CircuitBreaker(config.max_consecutive_failures, code_errors=bool(config.trainable))
    interrupt = contextlib.ExitStack()
    interrupted = interrupt.enter_context(stop_on_interrupt(
        ray_gone=local_ray_gone if started_ray and not config.ray_address else None,
        last_words=lambda: interrupted_message(algorithm)))
    try:
        from experiments.search.supernet import ensure_supernet  # trained once, before the first trial
        if config.evaluator != "supernet" or ensure_supernet(config, algorithm.space, interrupted) is not None:
            _run_tuners(config, algorithm, breaker, lambda: breaker.tripped or interrupted.is_set(), trainable,
                        make_trainable)
    finally:
        interrupt.close()
        if started_ray:
            ray.shutdown()
        write_results(algorithm, config.output_dir)
        algorithm.close()
    if config.upload_to:
        _upload(lambda: storage.copy_tree_to_gcs(config.output_dir, config.upload_to), config.upload_to)
    if breaker.tripped and breaker.code_error is not None:
        raise SearchHalted(f"stopped at the first failure, which looks like a bug in the training function, not a "
                           f"bad candidate: {breaker.code_error}. Fix it and call search() again with "
                           "retry_failed=True: the failed trials are trained again, with their ids")
    if breaker.tripped:
        failed = "a candidate failed" if breaker.in_a_row == 1 else f"{breaker.in_a_row} candidates failed in a row"
        raise SearchHalted(f"stopped: {failed} (--max_consecutive_failures="
                           f"{config.max_consecutive_failures}); the last: {breaker.last_error}. Fix the cause and "
                           "run the same command again: the search resumes where it stopped")
    if interrupted.is_set():
        raise SearchInterrupted(interrupted_message(algorithm))
    return algorithm


def interrupted_message(algorithm: SearchAlgorithm) -> str:
    """What a search stopped by a signal says last."""
    return (f"interrupted with {len(algorithm.pending())} trials in flight; run the same command again: the search "
            "resumes where it stopped, in-flight trials re-issued")


def _start_ray(config: SearchConfig) -> bool:
    """Start Ray (a private local one, or join `ray_address`) unless it is up; True when started."""
    import ray

    from experiments.search.local_ray import init_ray

    if ray.is_initialized():
        return False
    quiet = {"TF_CPP_MIN_LOG_LEVEL": "2"}
    if config.ray_address:  # workers of another cluster get our packages shipped to them
        from experiments.settings import OUR_PACKAGES

        packages = [importlib.import_module(name) for name in OUR_PACKAGES]
        init_ray(config.ray_address, {"env_vars": quiet, "py_modules": packages})
    else:  # a local Ray's workers inherit this environment (a runtime_env costs 0.5 s of start-up)
        for name, value in quiet.items():
            os.environ.setdefault(name, value)
        init_ray(None)
    return True


def _run_tuners(config: SearchConfig, algorithm: SearchAlgorithm, breaker: CircuitBreaker,
                halted: Callable[[], bool], trainable: Any, make_trainable: Callable[[Any], Any] | None) -> None:
    """Tune experiments in turn until the search has all its trials or is halted. Tune keeps a
    record of every trial of an experiment until it ends (about 70 KB each): a long search runs as a
    series of experiments of at most trials_per_tuner trials, one journal."""
    import ray

    from evolution.tune_searcher import EvolutionSearcher, checkpoint_dir
    from experiments.search.progress import ProgressCallback
    from experiments.search.supernet import supernet_dir
    from experiments.search.trial import FailureNotes, run_trial

    resources, concurrent = trial_resources(config, ray.cluster_resources())
    notes = FailureNotes()

    def record(algorithm: SearchAlgorithm, trial_id: int) -> None:
        outcome = algorithm.outcomes[trial_id]
        breaker.record(outcome.status, outcome.error)
        on_result(algorithm, trial_id, config)

    def failure_reason(trial_id: int, tune_trial_id: str) -> str | None:
        return notes.get(trial_id)

    if make_trainable is not None:
        trainable = make_trainable(notes)
    elif trainable is None:
        from ray import tune

        trainable = tune.with_parameters(
            run_trial, proxy={**config.proxy.to_dict(), "threads": max(1, int(resources["CPU"])),
                              "tpu": "local" if config.tpus_per_trial else None},
            space=algorithm.space.to_config(), notes=notes, objectives=[g.metric for g in algorithm.goals],
            supernet=supernet_dir(config.output_dir) if config.evaluator == "supernet" else None)
    checkpoint_root = os.path.abspath(os.path.join(config.output_dir, CHECKPOINTS))  # each trial's state dir
    progress = ProgressCallback(algorithm, config.max_trials, every_s=config.progress_every_s,
                                trial_dir=lambda trial_id: checkpoint_dir(checkpoint_root, trial_id))
    part, started = 0, time.monotonic()
    spent = lambda: bool(config.time_budget_s) and time.monotonic() - started >= config.time_budget_s  # noqa: E731
    try:
        while not halted() and not spent() and (left := config.max_trials - algorithm.completed()) > 0:
            before, part = algorithm.completed(), part + 1
            searcher = EvolutionSearcher(algorithm, min(left, config.trials_per_tuner), on_tell=record,
                                         failure_reason=failure_reason, should_stop=lambda: halted() or spent(),
                                         checkpoint_root=checkpoint_root)
            with tune_without_tensorboard():  # TensorBoard: each trial once, as experiments/tracking/hparams.py writes it
                _tuner(config, algorithm, searcher, trainable, resources, concurrent,
                       min(left, config.trials_per_tuner), halted, progress, part).fit()
            if algorithm.completed() == before and not algorithm.waiting_reissue():  # every trial stopped
                break
    finally:
        notes.clear()  # a Ray that outlives the search (a notebook's, a cluster's) keeps none of them


def _tuner(config: SearchConfig, algorithm: SearchAlgorithm, searcher: Any, trainable: Any,
           resources: dict[str, float], concurrent: int, num_samples: int, halted: Callable[[], bool],
           progress: Any, part: int) -> Any:
    """One Tune experiment of the search."""
    from ray import tune
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback
    from ray.tune.search import ConcurrencyLimiter

    from evolution.tune_searcher import RungScheduler

    stopper = _stop_all_when(halted)
    return tune.Tuner(
        tune.with_resources(trainable, resources),
        tune_config=tune.TuneConfig(
            search_alg=ConcurrencyLimiter(searcher, max_concurrent=concurrent),
            scheduler=RungScheduler(algorithm, on_rung=on_rung) if algorithm.rungs else None,
            num_samples=num_samples,
            reuse_actors=config.reuse_workers,  # warm workers: TensorFlow imported, data decoded once
            # short names: Tune's default spells the whole genotype into each trial's dir name
            trial_name_creator=_tune_trial_name,
            trial_dirname_creator=_tune_trial_name,
        ),
        run_config=tune.RunConfig(
            name=time.strftime("tune-%Y%m%d-%H%M%S") + f"-{part}",
            storage_path=os.path.abspath(os.path.join(config.output_dir, "tune")),
            verbose=0,
            stop=stopper,
            failure_config=tune.FailureConfig(max_failures=config.max_failures),
            callbacks=[progress, stopper, CSVLoggerCallback(), JsonLoggerCallback()],  # no TBX: see _run_tuners
        ),
    )


def _tune_trial_name(trial: Any) -> str:
    return f"trial_{trial.config['trial_id']}_{trial.trial_id}"


TUNE_LOG = logging.getLogger("ray.tune.execution.tune_controller")


def _not_killed(record: logging.LogRecord) -> bool:
    """False for Tune's log of a trial whose worker the halted search killed (it is no failure)."""
    error = record.exc_info[1] if record.exc_info else None
    return type(error).__name__ != "ActorDiedError" or "killed by `ray.kill`" not in str(error)


STOP_GRACE_S = 2.0  # after a halt, how long a running trial has to reach a report and stop by itself


def _stop_all_when(condition: Callable[[], bool], grace_s: float = STOP_GRACE_S) -> Any:
    """A Tune Stopper that ends the whole experiment once `condition()` holds, and the Tune Callback
    that first ends its running trials: a trial still running `grace_s` after the halt (blocked in a
    long step that never reports) has its worker killed, where Tune would wait 10 s for each before
    ending. A killed trial stays in flight (the searcher tells nothing while halted) and is
    re-issued on resume. Ray is imported lazily in this module, so the class is made here."""
    import ray
    from ray import tune

    class StopAll(tune.Stopper, tune.Callback):
        def __init__(self, condition: Callable[[], bool]) -> None:
            self.condition = condition
            self.halted_at: float | None = None
            self.running: list = []

        def __call__(self, trial_id: str, result: dict) -> bool:
            return False

        def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
            self.running = [t for t in trials if t.status == "RUNNING"]
            if not self.condition():
                return
            self.halted_at = self.halted_at or time.monotonic()
            if time.monotonic() - self.halted_at < grace_s:
                return
            if self.running:  # Tune would log each killed worker's ActorDiedError as a trial failure
                TUNE_LOG.addFilter(_not_killed)
            for trial in self.running:
                actor = trial.temporary_state.ray_actor
                if actor is not None:
                    log.info("trial %s still running %.0f s after the search stopped: its worker is ended", trial,
                             grace_s)
                    ray.kill(actor, no_restart=True)
            self.running = []

        def stop_all(self) -> bool:
            return self.condition() and self.halted_at is not None and not self.running

        def on_experiment_end(self, trials: list, **info: Any) -> None:
            TUNE_LOG.removeFilter(_not_killed)

        def __getstate__(self) -> dict:
            return {}  # Tune pickles its stopper into tuner.pkl; the condition (a lock, the breaker) stays here

        def __setstate__(self, state: dict) -> None:
            self.condition, self.halted_at, self.running = (lambda: False), None, []  # for Tune's restore only

    return StopAll(condition)


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
    write_search_hparams(algorithm, config.output_dir)  # TensorBoard's HParams dashboard: each trial once
    if config.mlflow_tracking_uri:
        log_search_trials(algorithm, config.output_dir, config.mlflow_tracking_uri)  # each trial once, too
    if config.upload_to:
        _upload(lambda: upload_results(config.output_dir, config.upload_to), config.upload_to)
    trial, outcome = algorithm.trials[trial_id], algorithm.outcomes[trial_id]
    origin = trial.mutation if trial.parent_id is None else f"child of {trial.parent_id}: {trial.mutation}"
    if outcome.status == "ok":
        result = describe_result(algorithm, outcome.metrics)
        if outcome.metrics.get("stop_reason") in ("past the incumbent", "predicted miss"):
            result += f" (stopped early: {outcome.metrics['stop_reason']})"
    else:
        result = f"{outcome.status.upper()} ({outcome.error})"
    best_trial, best_outcome = ranking.best(algorithm) or (None, None)
    best = f"best {algorithm.score(best_outcome.metrics):.4f}" if best_outcome else "no best yet"
    print(f"[{algorithm.completed()}/{config.max_trials}] trial {trial_id} ({origin}): {result}; {best}",
          flush=True)


def describe_result(algorithm: SearchAlgorithm, metrics: dict[str, Any]) -> str:
    """The objective (and the reward, with one), then each other goal and cost measure reported."""
    parts = [f"{algorithm.objective} {metrics[algorithm.objective]:.4f}"]
    if algorithm.reward is not None:
        parts.append(f"reward {algorithm.score(metrics):.4f}")
    if "params" in metrics:  # a function of one's own may count them in millions
        params = metrics["params"]
        parts.append(f"{params:,.0f} params" if float(params).is_integer() else f"{params:g} params")
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
    best = ranking.best(algorithm)
    if best is None:
        lines.append("no trial succeeded")
    else:
        trial, outcome = best
        value = algorithm.score(outcome.metrics)
        lines.append(f"best {ranking.score_name(algorithm)}: {value:.4f} (trial {trial.trial_id}); "
                     f"genotype in {output_dir}/best_genotype.json")
        lines.append("top 5:")
        lines.append(top_table(algorithm, 5))
        lines.append(f"best genotype (trial {trial.trial_id}):")
        lines.append(trial.genotype.describe())
    return "\n".join(lines)
