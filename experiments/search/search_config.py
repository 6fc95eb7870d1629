"""What a search is: `SearchConfig`, one field per setting (opening its output dir, new or resumed:
experiments/search/output_dir.py).

Each field is a flag of `amoeba search`, a keyword of `experiments.api.search` and, unless its
metadata says otherwise, a setting a resumed search compares (experiments/settings.py reads the
metadata; docs/extending-setting.md shows adding one). No TensorFlow or Ray here.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from evolution import ALGORITHMS, JournalLock, SearchAlgorithm, make_algorithm
from evolution.algorithms import genotype_of
from evolution.objectives import LIMITED, MEASURES, SIZE_MEASURES, Limits, MnasReward, parse_goals
from evolution.params import ParetoParams
from experiments.tracking.mlflow_log import check_mlflow
from evolution.repeats import REPEATS
from evolution.rungs import RUNG_RULES, Rungs
from evolution.target_race import SCREEN_SCORES, SCREEN_STEP, SCREEN_STEPS, TargetRace
from experiments.settings import FREE, JOURNAL as BY_JOURNAL
from searchspace import NasNetMacroSpace, SearchSpace, convnet_space, space_from_config
from searchspace.supernet import ELASTIC_MUTATIONS, not_shared, supernet_space
from core.proxy_config import PRECISIONS, PROXY_DATASETS, PROXY_RENAMED, ProxyConfig

SEARCH_RUNG_RULES = tuple(name for name, rule in RUNG_RULES.items() if not rule.pauses)  # a paused trial: not via Tune
log = logging.getLogger(__name__)
TIME_TO_TARGET = "seconds_to_target"  # the proxy's objective with --target_accuracy (mode min)
# A time-to-target search's race (evolution/target_race.py): the defaults measured on recorded
# curves and trained nets (benchmarks/target_stops.py; benchmarks/README.md)
STOP_MARGIN, MISS_SLACK, SCREEN_CHILDREN, SCREEN_SCORE = 1.1, 0.02, 4, "step_ms"


def _setting(default: Any, help: str, on_resume: str = "compared", **meta: Any) -> Any:
    """A field with its help text and how a resumed search treats it (experiments/settings.py)."""
    return field(default=default, metadata={"help": help, "on_resume": on_resume, **meta})


def _runs(default: Any, help: str, **meta: Any) -> Any:
    """A setting of how the search runs (resources, limits of time, where results go): free to
    change when it is resumed."""
    return _setting(default, help, FREE, **meta)


def _algo(default: Any, help: str, **meta: Any) -> Any:
    """A setting the algorithm is built from: the journal records it and a resume compares it."""
    return _setting(default, help, BY_JOURNAL, **meta)


def _algo_param(name: str) -> Any:
    """An algorithm parameter as a setting: its default, help and choices are the algorithm's own
    declaration (evolution/params.py), written nowhere else."""
    declared = {f.name: f for f in dataclasses.fields(ParetoParams)}[name]
    return _algo(declared.default, declared.metadata["help"],
                 **({"choices": declared.metadata["choices"]} if "choices" in declared.metadata else {}))


PROXY_FLAGS = {  # how ProxyConfig's fields are flags of `amoeba search`
    "rename": {"timeout_s": "trial_timeout_s"},
    "choices": {"dataset": sorted(PROXY_DATASETS), "precision": list(PRECISIONS)},
    "shared": {"seed": "seed"},  # the search's seed seeds candidate training too
    "skip": ("threads", "tpu"),  # set per trial from its resources
    "free": ("timeout_s", "hang_grace_s", "threads", "tpu"),  # a rerun may give a trial more time or threads
    "resolve": {"image_size": lambda proxy: proxy.input_size},  # 0 and the dataset's own size are the same
    "renamed": PROXY_RENAMED,  # a saved search's old names, read as today's
}


@dataclass(frozen=True)
class SearchConfig:
    output_dir: str = field(metadata={"help": "Folder for the journal and results; rerun to resume.",
                                      "on_resume": FREE})
    algorithm: str = _algo("regularized_evolution", "Search algorithm.", choices=sorted(ALGORITHMS))
    max_trials: int = _runs(30, "Total number of trials of the search.")
    population_size: int = _algo_param("population_size")
    sample_size: int = _algo_param("sample_size")
    initial_last: bool = _algo_param("initial_last")
    tournament: str = _algo_param("tournament")
    offspring: int = _algo_param("offspring")
    time_budget_s: float = _runs(0.0, "Hand out no new trial once this run of the search has lasted this many "
                                      "seconds; those in flight finish (0: no limit).")
    max_concurrent: int = _runs(0, "Trials trained at the same time (0: as many as the cluster's CPUs, GPUs and "
                                   "TPUs allow for the per-trial amounts).")
    seed: int = _algo(0, "Seed of the search and of candidate training.")
    num_blocks: int = _algo(5, "B: blocks per cell (with --space=nasnet_macro: the most).", api=False)
    proxy_space: str = _algo("nasnet", "What the proxy trainer searches: nasnet, the paper's cells in a network of "
                                       "--num_cells and --filters; nasnet_macro, the cells and the network around them "
                                       "(cells per stack, F, blocks, reduction, input projection; "
                                       "searchspace/nasnet_macro.py); convnet, plain conv nets that hold airbench94 and "
                                       "ResNet-9 (stem, activation, stage widths, convs, residuals, head; "
                                       "searchspace/convnet.py).", flag="space",
                             choices=("nasnet", "nasnet_macro", "convnet"),
                             api=False)
    ops: tuple[str, ...] = _algo((), "The ops a cell may use, from searchspace/ops.py's table (default: the paper's "
                                     "8), e.g. none,max_pool_3x3,conv_1x1,plain_conv_3x3,sep_conv_3x3.", api=False)
    mutations: tuple[str, ...] = _algo((), "The mutations a child may get (default: all of the space's), e.g. "
                                           "activation,stem,pool_order for --space=convnet (searchspace/convnet.py "
                                           "MUTATIONS) or op for --space=nasnet (hidden_state, op).", api=False)
    cpus_per_trial: float = _runs(0.0, "CPUs per trial (0: the cluster's CPUs shared out among the concurrent "
                                       "trials).")
    gpus_per_trial: float = _runs(0.0, "GPUs per trial; a fraction shares a GPU (0.5: two trials per GPU, each "
                                       "taking only the memory it uses).")
    tpus_per_trial: int = _runs(0, "TPU chips per trial (Ray's TPU resource).")
    max_failures: int = _runs(2, "Retries of a trial whose worker died (a lost node, a crash); a failed candidate "
                                 "is not retried.")
    max_consecutive_failures: int = _runs(5, "Stop the search after this many failed candidates in a row, "
                                             "showing the last error (0: never).")
    reuse_workers: bool = _runs(True, "Keep each trial worker process warm for the next trial (Ray Tune actor "
                                      "reuse); --noreuse_workers starts a fresh process per trial.")
    progress_every_s: float = _runs(60.0, "Seconds between the search's progress lines (done, running, best, "
                                          "trials per hour, ETA).")
    # Tune holds about 100 KB of driver memory per trial of an experiment until it ends
    # (benchmarks/README.md: search_scaling.py): a longer search runs several in turn
    trials_per_tuner: int = _runs(200, "Trials per Ray Tune experiment; a longer search runs several in turn "
                                       "(Tune keeps each experiment's trials in the driver's memory).")
    ray_address: str | None = _runs(None, "Join a running Ray cluster: auto or HOST:PORT (default: start a private "
                                          "one on this machine, on 127.0.0.1 only).")
    upload_to: str | None = _runs(None, "gs://BUCKET/PATH: keep a copy of the journal and results there "
                                        "(google-cloud-storage; the output dir stays the state).")
    mlflow_tracking_uri: str | None = _runs(None, "Log each finished trial as an MLflow run there (experiment: the "
                                                  "output dir's name; needs mlflow-skinny).")
    rungs: tuple[int, ...] = _algo((), "Multi-fidelity: epochs at which each candidate reports and ASHA continues "
                                       "or stops it (e.g. 1,3,9; the last replaces --epochs).", api=False)
    reduction_factor: float = _algo(3.0, "With --rungs, ASHA's eta: the top 1/eta at a rung goes on "
                                         "(evolution/rungs.py).", api=False)
    rung_rule: str = _algo("stopping", "With --rungs, the rule that decides at each rung (evolution/rungs.py): "
                                       "stopping (ASHA's top 1/eta, within a cost cap) or payoff (the same, and a "
                                       "higher rung only while its results change the lead as often, per result, "
                                       "as the rung's own).", choices=SEARCH_RUNG_RULES, api=False)
    objectives: tuple[str, ...] = _algo((), "With --algorithm=pareto_evolution: MEASURE:max|min goals (default "
                                            "val_accuracy:max,latency_ms:min); measures: "
                                            + ", ".join(sorted(MEASURES)) + ".")
    evaluator: str = _algo("train", "How a candidate is scored: train (from scratch, on the proxy task) or supernet "
                                    "(a subnet of one weight-sharing supernet trained first, with --space=convnet: "
                                    "inherited weights, BN recalibrated, in seconds; searchspace/supernet.py says what "
                                    "it shares).", choices=("train", "supernet"))
    supernet_sandwich: int = _setting(4, "With --evaluator=supernet: subnets a training step of the supernet (the "
                                      "largest, the smallest and the rest random; BigNAS: 4).")
    max_params: int = _algo(0, "A child with more trainable parameters is rejected before it is trained and another "
                               "proposed (0: no limit).", api=False)
    max_multiply_adds: int = _algo(0, "A child with more multiply-adds per image is rejected before it is trained "
                                      "(0: no limit).", api=False)
    min_params: int = _algo(0, "A child with fewer trainable parameters is rejected before it is trained "
                               "(a faster net of the seed's capacity; 0: no floor).", api=False)
    max_latency_ms: float = _algo(0.0, "A candidate slower at batch 1 on its trial's device is measured, recorded "
                                       "infeasible and not trained (0: no limit).")
    latency_target_ms: float = _algo(0.0, "> 0: score candidates by MnasNet's reward, val_accuracy x (cost / "
                                          "target)^latency_weight, the cost being --cost_metric.")
    latency_weight: float = _algo(-0.07, "The reward's exponent w (MnasNet: -0.07).")
    cost_metric: str = _algo("latency_ms", "The reward's cost measure.", choices=sorted(MEASURES))
    stop_margin: float = _algo(STOP_MARGIN, "With --target_accuracy: a candidate still short of the target when its "
                                            "clock passes the best time to target so far x this stops, scored as a "
                                            "miss (it cannot win; 0: off).")
    miss_slack: float = _algo(MISS_SLACK, "With --target_accuracy: a candidate whose accuracy at an evaluation is "
                                          "under every hit's at the same evaluation by more than this stops, "
                                          "predicted to miss (negative: off; evolution/target_race.py).")
    min_hits: int = _algo(3, "With --miss_slack: the hits evaluated that often before an evaluation has a bound.")
    screen_children: int = _algo(SCREEN_CHILDREN, "With --target_accuracy: children drawn per mutation of regularized "
                                                  "evolution; the one "
                                                  "--screen_score predicts fastest is trained, the others journaled "
                                                  "untrained (1: no screen).")
    screen_score: str = _algo(SCREEN_SCORE, "What screens children: " + "; ".join(
        f"{name}, {score.description}" for name, score in SCREEN_SCORES.items()) + ".", choices=tuple(SCREEN_SCORES))
    proxy: ProxyConfig = field(default_factory=ProxyConfig, metadata={"flatten": PROXY_FLAGS})
    objective: str = _algo("val_accuracy", "The metric a trial reports that the search maximises (mode max) or "
                                           "minimises (mode min).", flag=False)  # the proxy trainer's is fixed
    mode: str = _algo("max", "max or min: whether a larger objective is better.", flag=False, choices=("max", "min"))
    space: dict[str, Any] | None = _algo(None, "Another space's to_config() (default: NASNet cells of num_blocks "
                                               "blocks).", flag=False, api=False)
    initial: tuple[Any, ...] = _algo((), "Cells that open the first population, in order, before random ones: "
                                         "reference names (amoebanet_a, amoebanet_d, nasnet_a) or JSON files (a "
                                         "genotype, or a search's best_genotype.json).")
    repeats: str = _algo("train", "A proposal of a network already evaluated: train it again (train: the paper's "
                                  "way) or take its earlier result (reuse: journaled as such, not charged to "
                                  "max_trials; not with rungs; a twin of a running trial waits for its result).",
                         choices=REPEATS)
    retry_failed: bool = _runs(False, "Resuming: train the failed trials again, with their ids (after fixing what "
                                      "failed them); the retries are journaled.")
    trainable: str = _runs("", "A function of one's own (experiments.api), named; empty: the proxy trainer.",
                           flag=False, api=False)
    sized_to_data: bool = _runs(False, "The settings not given were sized to --data by experiments/search/sizing.py's rule "
                                       "(`amoeba search --data` without --space); amoeba promote sizes its own then.",
                                flag=False, api=False)

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm: unknown {self.algorithm!r}; known: {sorted(ALGORITHMS)}")
        if self.mode not in ("max", "min"):
            raise ValueError(f"mode: 'max' or 'min', got {self.mode!r}")
        if self.trials_per_tuner < 1:
            raise ValueError(f"trials_per_tuner: must be at least 1, got {self.trials_per_tuner}")
        if self.max_trials < 1 or self.max_concurrent < 0 or self.time_budget_s < 0:
            raise ValueError("max_trials must be at least 1, max_concurrent and time_budget_s at least 0 (0: from "
                             "resources; no limit)")
        for name in ("cpus_per_trial", "gpus_per_trial", "tpus_per_trial", "max_failures",
                     "max_consecutive_failures"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)}")
        if self.upload_to and not self.upload_to.startswith("gs://"):
            raise ValueError(f"upload_to: must be a gs://BUCKET/PATH, got {self.upload_to!r}")
        check_mlflow(self.mlflow_tracking_uri)
        self._check_trainer()
        self._time_to_target_objective()
        self.race()  # validates its settings
        if self.cost_metric not in MEASURES:
            raise ValueError(f"cost_metric: unknown {self.cost_metric!r}; known: {sorted(MEASURES)}")
        if self.objectives and self.algorithm != "pareto_evolution":
            raise ValueError("objectives: several objectives need --algorithm=pareto_evolution")
        if (self.tournament, self.offspring) != ("nsga2", 1) and self.algorithm != "pareto_evolution":
            raise ValueError("tournament, offspring: Pareto evolution's; give --algorithm=pareto_evolution")
        parse_goals(list(self.objectives), MEASURES)  # validates them
        space = self.search_space()
        for i, genotype in enumerate(self.initial):  # before anything is written
            genotype_of(space, genotype, f"initial[{i}]")
        self.limits()
        if self.reward() is not None:
            self.reward().check(self.objective, self.mode)

    def _time_to_target_objective(self) -> None:
        """With the proxy's --target_accuracy the search minimises seconds_to_target."""
        if not self.proxy.target_accuracy or self.trainable:
            return
        if self.algorithm == "pareto_evolution" or self.latency_target_ms:
            raise ValueError("target_accuracy: time to accuracy is one objective; it goes with neither "
                             "--algorithm=pareto_evolution nor --latency_target_ms")
        object.__setattr__(self, "objective", TIME_TO_TARGET)
        object.__setattr__(self, "mode", "min")

    def _check_trainer(self) -> None:
        """What the proxy trainer's ways of training (rungs, a time budget, TPUs) rule out together."""
        proxy, tpu = self.proxy, self.proxy.tpu or self.tpus_per_trial
        if self.rung_rule not in SEARCH_RUNG_RULES:
            raise ValueError(f"rung_rule: one of {list(SEARCH_RUNG_RULES)} (a rule that pauses trials is for "
                             f"amoeba benchmark only), got {self.rung_rule!r}")
        if self.rung_rule != "stopping" and not self.rungs:
            raise ValueError(f"rung_rule: {self.rung_rule!r} needs --rungs")
        if self.rungs:
            Rungs(self.rungs, self.reduction_factor)  # validates them
            if tpu:
                raise ValueError("rungs: TPU trials train through Keras's fit and have no rungs yet")
            if proxy.train_seconds or proxy.target_accuracy:
                raise ValueError("train_seconds, target_accuracy: a time budget or a time to accuracy per "
                                 "candidate replaces --rungs' epochs; give one")
        if tpu:
            tpu_lacks = [name for name, on in (("train_seconds", proxy.train_seconds),
                                               ("target_accuracy", proxy.target_accuracy),
                                               ("max_latency_ms", self.max_latency_ms),
                                               ("latency_target_ms", self.latency_target_ms),
                                               ("objectives", self.algorithm == "pareto_evolution")) if on]
            if tpu_lacks:
                raise ValueError(f"{', '.join(tpu_lacks)}: TPU trials train through Keras's fit, which measures "
                                 "no latency or step time and has no time budget yet")
            recipe = proxy.fast_recipe_changes()
            if recipe:
                raise ValueError(f"{', '.join(recipe)}: TPU trials train the proxy's plain recipe through Keras's "
                                 "fit (SGD with Nesterov momentum, warm-up and cosine) and none of the fast one yet")
        if self.evaluator not in ("train", "supernet"):
            raise ValueError(f"evaluator: train or supernet, got {self.evaluator!r}")
        if self.evaluator == "supernet":
            self._check_supernet()
        if proxy.whiten_bias_epochs and self.proxy_space != "convnet" and not self.trainable:
            raise ValueError("whiten_bias_epochs: only the convnet space's nets have a whitening stem "
                             "(--space=convnet)")
        if proxy.train_seconds and proxy.timeout_s and proxy.train_seconds >= 0.8 * proxy.timeout_s:
            raise ValueError(f"train_seconds: {proxy.train_seconds:g} s leaves no room under the trial timeout "
                             f"of {proxy.timeout_s:g} s (--trial_timeout_s); raise it or train shorter")

    def _check_supernet(self) -> None:
        """What a supernet's subnets are scored without: training of their own, and what it does not share."""
        proxy = self.proxy
        if self.proxy_space != "convnet" or self.space or self.trainable:
            raise ValueError("evaluator supernet: the convnet space's (--space=convnet) supernet only")
        trains = [name for name, on in (("rungs", self.rungs), ("train_seconds", proxy.train_seconds),
                                        ("target_accuracy", proxy.target_accuracy), ("tpu", proxy.tpu or
                                                                                     self.tpus_per_trial)) if on]
        if trains:
            raise ValueError(f"{', '.join(trains)}: a candidate's own training; --evaluator=supernet scores "
                             "subnets of one trained supernet instead")
        unused = [name for name, on in (("ema_decay", proxy.ema_decay), ("precision", proxy.precision != "float32"))
                  if on]
        if unused:
            raise ValueError(f"{', '.join(unused)}: the supernet trains in float32 without a weight average")
        if set(self.mutations) - set(ELASTIC_MUTATIONS):
            raise ValueError(f"mutations: a supernet's subnets differ only by {list(ELASTIC_MUTATIONS)}, got "
                             f"{list(self.mutations)} (searchspace/supernet.py says why)")
        if self.supernet_sandwich < 2:
            raise ValueError(f"supernet_sandwich: at least 2 (the largest and the smallest), got "
                             f"{self.supernet_sandwich}")

    def limits(self) -> Limits:
        return Limits({m: getattr(self, f"max_{m}") for m in LIMITED if getattr(self, f"max_{m}")},
                      {"params": self.min_params} if self.min_params else {})

    def race(self) -> TargetRace | None:
        """A time-to-target search's stops and screen (the proxy trainer's; None for other searches)."""
        if not self.proxy.target_accuracy or self.trainable or self.evaluator != "train":
            return None
        children = self.screen_children if self.algorithm == "regularized_evolution" else 1  # no parent: no screen
        race = TargetRace(self.stop_margin, self.miss_slack, self.min_hits, children, self.screen_score)
        return race if race.acts else None

    def reward(self) -> MnasReward | None:
        target = self.latency_target_ms
        return MnasReward(self.cost_metric, target, self.latency_weight) if target else None

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "proxy": self.proxy.to_dict()}

    def algorithm_params(self) -> dict[str, Any]:
        goals = parse_goals(list(self.objectives) or list(ParetoParams.objectives), MEASURES)
        return {"population_size": self.population_size, "sample_size": self.sample_size,
                "initial_last": self.initial_last, "tournament": self.tournament, "offspring": self.offspring,
                "objectives": [str(g) for g in goals]}

    def size_measure(self) -> Callable[[Any], dict[str, float]] | None:
        """With a size limit, or the limit tournament on a size goal: a child's size, built in a Ray
        worker (Ray is up when it is asked)."""
        goals = parse_goals(list(self.objectives), MEASURES)[1:]
        race = self.race()
        screened = race is not None and race.screen_children > 1 and SCREEN_SCORES[race.screen_score].measured
        limited = self.min_params or any(getattr(self, f"max_{m}") for m in SIZE_MEASURES) or screened
        aimed = self.tournament == "limit" and not self.trainable and any(g.metric in SIZE_MEASURES for g in goals)
        if not (limited or aimed):
            return None
        from experiments.search.trial import size_measure

        timed = SCREEN_STEPS if screened and SCREEN_SCORES[race.screen_score].measured == SCREEN_STEP else 0
        return size_measure(self.proxy.to_dict(), self.search_space().to_config(), timed)

    def search_space(self) -> SearchSpace:
        """The space candidates come from: NASNet cells, the one family the proxy trainer builds, unless
        a function of one's own trains them (`space`)."""
        if self.space:
            if self.mutations:
                raise ValueError("mutations: set them in the space's own config (`space`), not beside it")
            return space_from_config(self.space)
        ops = {"ops": list(self.ops)} if self.ops else {}
        if self.proxy_space == "nasnet_macro":
            if self.mutations:
                raise ValueError("mutations: the nasnet and convnet spaces' (--space=nasnet_macro draws its own)")
            return NasNetMacroSpace(max_blocks=self.num_blocks, **ops)
        if self.proxy_space == "convnet":
            if self.ops:
                raise ValueError("ops: the ops of cells; the convnet space has none (its convs are 3x3)")
            space = convnet_space(self.proxy.input_size, self.mutations)
            return self._supernet_space(space) if self.evaluator == "supernet" else space
        mutations = {"mutations": list(self.mutations)} if self.mutations else {}
        return space_from_config({"name": "nasnet", "num_blocks": self.num_blocks, **ops, **mutations})

    def _supernet_space(self, space: Any) -> Any:
        """The supernet's subnets: its frame and widths the first --initial's, else airbench94's; every
        other --initial one of them (a ValueError naming it else)."""
        from searchspace.convnet import AIRBENCH94

        seed = genotype_of(space, self.initial[0], "initial[0]") if self.initial else AIRBENCH94
        for i, genotype in enumerate(self.initial[1:], 1):
            wrong = not_shared(seed, genotype_of(space, genotype, f"initial[{i}]"))
            if wrong:
                raise ValueError(f"initial[{i}]: not a subnet of the supernet initial[0] frames (its "
                                 f"{', '.join(wrong)} differ; searchspace/supernet.py)")
        return supernet_space(seed, space)

    def new_algorithm(self, journal_path: str | None = None, journal_lock: JournalLock | None = None
                      ) -> SearchAlgorithm:
        rungs = Rungs(self.rungs, self.reduction_factor) if self.rungs else None
        return make_algorithm(self.algorithm, self.search_space(), self.algorithm_params(), seed=self.seed,
                              journal_path=journal_path, journal_lock=journal_lock, rungs=rungs,
                              rung_rule=self.rung_rule if rungs else None, reward=self.reward(),
                              limits=self.limits(), measure=self.size_measure(),
                              objective=self.objective, mode=self.mode, initial=self.initial, repeats=self.repeats,
                              race=self.race())
