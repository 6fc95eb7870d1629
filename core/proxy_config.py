"""The proxy task a search candidate is trained on: a plain value object, and the one registry of
proxy datasets, PROXY_DATASETS (one entry per dataset, naming its loader).

Importing this module must stay cheap for the search driver: no TensorFlow here. A loader is
named by its import path and imported only when a trial worker loads the data.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from core.export_formats import check_runtimes
from core.fast_recipe import LOOKAHEAD_DECAY, TRIANGLE, TTA_VIEWS, check_fast_recipe


@dataclass(frozen=True)
class ProxyDataset:
    """One entry of the registry. `image_size` is the size used when the search gives none;
    `validation_fraction` the share of the training split held out when it gives no count;
    `loader` the "module:function" that loads it (`function(proxy)` -> trainer.proxy_data's
    ArrayDataset), imported only when a trial loads the data."""

    description: str
    image_size: int
    validation_fraction: float
    loader: str
    num_images: int = 0  # a built-in's size (a data dir's is in its metadata.json)
    channels: int = 3
    num_classes: int = 0  # a built-in's (a data dir's is in its metadata.json)
    needs_data_dir: bool = False
    augment: bool = False  # CIFAR-style: pad by image_size/8, random crop back, random flip

    def __post_init__(self) -> None:
        module, _, function = self.loader.partition(":")
        if not module or not function.isidentifier():
            raise ValueError(f"ProxyDataset loader: needs 'module:function', got {self.loader!r}")

    def load_function(self) -> Callable[["ProxyConfig"], Any]:
        """The loader function (its module imported now); an ImportError or AttributeError names it."""
        module, _, function = self.loader.partition(":")
        try:
            return getattr(importlib.import_module(module), function)
        except AttributeError:
            raise AttributeError(f"proxy dataset loader {self.loader!r}: {module} has no {function}") from None

    def load(self, proxy: "ProxyConfig") -> Any:
        """The dataset's images for `proxy`: the loader's ArrayDataset (in a trial worker)."""
        return self.load_function()(proxy)


# One entry per proxy dataset: `amoeba search --dataset` takes its names.
PROXY_DATASETS: dict[str, ProxyDataset] = {
    "digits": ProxyDataset("scikit-learn's 1,797 8x8 handwritten digits (built in)", image_size=8,
                           validation_fraction=0.2, loader="trainer.proxy_data:load_digits",
                           num_images=1797, channels=1, num_classes=10),
    "prepared": ProxyDataset("the training split of a dir made by `amoeba prepare` (--data)", image_size=32,
                             validation_fraction=0.1, loader="trainer.proxy_data:load_prepared",
                             needs_data_dir=True, augment=True),
}
DATA_DIR_DATASET = "prepared"
PROXY_SCHEDULES = ("cosine", "triangular")  # trainer/fused_optimizer.py's RestartingSchedule
PROXY_AUGMENTATIONS = ("cifar", "airbench")  # trainer/proxy_data.py's
# Fields renamed to amoeba train's names: a search saved before reads in today's, the old flags warn
PROXY_RENAMED = {"batch_size": "train_batch_size", "warmup_epochs": "lr_warmup_epochs"}
# --target_accuracy's clock (ProxyConfig.target_clock): the training and its evaluations, as `amoeba
# promote` counts (DAWNBench's). A search made while it counted training only recorded none.
# steady: the same count at the trial's steady pace (its steps x their median, its evaluations x
# theirs): the trace and the waits on the input pipeline between steps left out. The candidate's
# limit, target_seconds, is on the same clock: it stops once that clock is past it
TARGET_CLOCK = "training_and_evaluations"
TARGET_CLOCKS = (TARGET_CLOCK, "steady")
LATENCY_RUNTIMES = ("keras", "tflite")  # trainer/candidate_network.py's batch-1 latency, by runtime
# --precision, in `amoeba search` and `amoeba train` alike: the Keras dtype policy of each
PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16", "mixed_float16": "mixed_float16"}


@dataclass(frozen=True)
class ProxyConfig:
    """The proxy task a candidate is trained on during search.

    `validation_images` are held out of the dataset's TRAINING split (stratified, fixed seed) and
    are what a candidate is scored on; 0 means the dataset's validation_fraction. A prepared dir's
    evaluation split is never read. `train_images` caps the training images (0: all the rest);
    `image_size` 0 means the dataset's own size.
    """

    dataset: str = field(default="digits", metadata={"help": "Proxy dataset (default: digits; with --data: "
                                                             "prepared)."})
    data: str | None = field(default=None, metadata={"help": "A dir made by `amoeba prepare` to search on (its "
                                                           "training split only; the evaluation split is never read)."})
    image_size: int = field(default=0, metadata={"help": "Image size candidates see; images are resized (0: the "
                                                         "dataset's own)."})
    validation_images: int = field(default=0, metadata={"help": "Images held out of the training split (stratified, "
                                                                "fixed seed) to score candidates (0: the dataset's "
                                                                "share)."})
    train_images: int = field(default=0, metadata={"help": "Cap on the training images a candidate trains on (0: all "
                                                           "that are not held out)."})
    epochs: int = field(default=4, metadata={"help": "Proxy training epochs per candidate."})
    num_cells: int = field(default=1, metadata={"help": "N: normal cells per stack of the proxy network."})
    filters: int = field(default=8, metadata={"help": "F: filters of the first stack of the proxy network."})
    train_batch_size: int = field(default=64, metadata={"help": "Proxy training batch size."})
    learning_rate: float = field(default=0.1, metadata={"help": "Proxy peak learning rate (SGD)."})
    momentum: float = field(default=0.9, metadata={"help": "Proxy SGD momentum."})
    nesterov: bool = field(default=True, metadata={"help": "Proxy SGD with Nesterov momentum (--nonesterov: "
                                                           "plain momentum)."})
    seed: int = field(default=0, metadata={"help": "Seed of candidate training."})
    timeout_s: float = field(default=900.0, metadata={"help": "A candidate still training after this many seconds "
                                                              "fails (0: no limit)."})
    hang_grace_s: float | None = field(default=None, metadata={
        "help": "The time limit is checked between training steps; a trial hung elsewhere has its worker ended "
                "this many seconds past --trial_timeout_s (default: the larger of 60 s and a quarter of the "
                "limit)."})
    threads: int = field(default=0, metadata={"help": "TensorFlow intra/inter-op threads (0: TensorFlow's "
                                                      "default)."})
    train_seconds: float = field(default=0.0, metadata={"help": "> 0: train each candidate this many seconds of its "
                                                                "own steady training steps (the step count fixed from "
                                                                "its first steps) instead of --epochs."})
    weight_decay: float = field(default=0.0, metadata={"help": "Proxy L2 weight decay on the kernels (the loss "
                                                               "gains weight_decay x sum(w^2)/2, as in amoeba train)."})
    lr_warmup_epochs: float = field(default=0.0, metadata={"help": "Proxy learning rate: a linear warm-up from 0 "
                                                                   "over this many epochs before the cosine."})
    lr_schedule: str = field(default="cosine", metadata={
        "help": "Proxy learning rate after the warm-up: cosine to 0, or triangular (airbench's, as amoeba train's: "
                "--lr_start_factor, --lr_peak_at, --lr_end_factor; with rungs, each rung's own triangle).",
        "choices": PROXY_SCHEDULES})
    lr_start_factor: float = field(default=TRIANGLE["lr_start_factor"], metadata={
        "help": "Triangular: the first step's learning rate, times --learning_rate."})
    lr_peak_at: float = field(default=TRIANGLE["lr_peak_at"], metadata={
        "help": "Triangular: the fraction of the training steps at which the rate peaks."})
    lr_end_factor: float = field(default=TRIANGLE["lr_end_factor"], metadata={
        "help": "Triangular: the last step's learning rate, times --learning_rate."})
    label_smoothing: float = field(default=0.0, metadata={
        "help": "Proxy label smoothing: this share of each label spread over all classes (as amoeba train's)."})
    bn_lr_factor: float = field(default=1.0, metadata={
        "help": "The batch-norm offsets' learning rate, times --learning_rate (airbench94: 64)."})
    bn_weight_decay: float = field(default=0.0, metadata={
        "help": "L2 weight decay of the batch-norm offsets (--weight_decay skips them)."})
    lookahead_every: int = field(default=0, metadata={
        "help": "airbench's lookahead: every this many steps the weights' running average is updated and copied "
                "back; the model ends each rung as the average (0: off; as amoeba train's)."})
    lookahead_decay: float = field(default=LOOKAHEAD_DECAY, metadata={
        "help": "The lookahead average's decay at the last step, times (step / steps)^3 before."})
    ema_decay: float = field(default=0.0, metadata={
        "help": "> 0: a moving average of the trainable weights with this decay, updated after every step and "
                "evaluated in their place (as amoeba train's; rung checkpoints hold it; 0: off)."})
    bn_momentum: float = field(default=0.0, metadata={
        "help": "> 0: every batch-norm layer's moving-average momentum (Keras's convention; airbench94's 0.6); "
                "0: the family's own."})
    bn_epsilon: float = field(default=0.0, metadata={
        "help": "> 0: every batch-norm layer's epsilon (airbench94's 1e-12); 0: the family's own."})
    whiten_bias_epochs: float = field(default=0.0, metadata={
        "help": "A whitening stem's bias (--space=convnet) trains this many epochs, then stays (0: always)."})
    augmentation: str = field(default="cifar", metadata={
        "help": "Proxy training augmentation of a dataset that augments (a prepared dir; digits are not): cifar, "
                "zero pad-crop-flip; airbench, 2-pixel reflect translation and the alternating flip.",
        "choices": PROXY_AUGMENTATIONS})
    eval_tta: str = field(default="none", metadata={
        "help": "Test-time augmentation of the proxy's validation (as amoeba train's): flip, flip_translate.",
        "choices": TTA_VIEWS})
    target_accuracy: float = field(default=0.0, metadata={
        "help": "> 0: score candidates by their time to this validation accuracy (DAWNBench's measure): each "
                "trains the --epochs schedule, evaluated every --epochs_per_eval, and stops at the target or at "
                "--target_seconds; the search minimises seconds_to_target."})
    target_seconds: float = field(default=0.0, metadata={
        "help": "With --target_accuracy: seconds a candidate gets to reach it on --target_clock, its evaluations "
                "counted (it stops once that clock is past them); one that does not scores target_seconds x (1 + "
                "the accuracy it lacks), after every one that did."})
    epochs_per_eval: float = field(default=0.25, metadata={"help": "With --target_accuracy: epochs between "
                                                                   "evaluations."})
    target_clock: str = field(default=TARGET_CLOCK, metadata={
        "help": "What --target_accuracy's time counts: training_and_evaluations, the wall seconds (as amoeba "
                "promote counts); steady, the steps to the target x the trial's median step plus its "
                "evaluations x their median, so that nets reaching the target at the same evaluation rank by "
                "their steady cost, not by their trace or the waits on the input pipeline.",
        "choices": TARGET_CLOCKS})
    calibration: bool = field(default=False, metadata={
        "help": "The calibration's run (experiments/search/calibration.py): trained to the end of --epochs, evaluated "
                "every --epochs_per_eval on --target_clock as a --target_accuracy candidate is, its target_curve "
                "recorded; no target and no stop (its curve sets the search's target).",
        "flag": False, "api": False})
    stop_after_s: float = field(default=0.0, metadata={
        "help": "A --target_accuracy candidate's own earlier stop, on --target_clock: past the search's best time to "
                "target so far x --stop_margin it cannot win, and stops as a miss (set per trial by the search: "
                "evolution/target_race.py; 0: at --target_seconds).", "flag": False, "api": False})
    stop_below: tuple[float, ...] = field(default=(), metadata={
        "help": "A --target_accuracy candidate's predicted miss: at its i-th evaluation, an accuracy under the i-th "
                "value (0: no bound) stops it as a miss (set per trial by the search: evolution/target_race.py).",
        "flag": False, "api": False})
    latency_runtime: str = field(default="keras", metadata={
        "help": "What measures latency_ms (batch 1, median of 10 calls, before training): keras (the traced Keras "
                "model in TensorFlow) or tflite (the network converted to TFLite, run by LiteRT's interpreter: "
                "latency as deployed on this CPU; needs ai-edge-litert).", "choices": LATENCY_RUNTIMES})
    precision: str = field(default="float32", metadata={"help": "Compute precision of the proxy training: bfloat16 "
                                                                "and mixed_float16 compute in 16 bits and keep "
                                                                "float32 weights."})
    tpu: str | None = field(default=None, metadata={"help": "local: train on this worker's TPU chips (a search's "
                                                            "--tpus_per_trial)."})

    def __post_init__(self) -> None:
        positive = {"epochs": self.epochs, "num_cells": self.num_cells, "filters": self.filters,
                    "train_batch_size": self.train_batch_size, "learning_rate": self.learning_rate}
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"proxy {name}: must be positive, got {value}")
        if self.dataset not in PROXY_DATASETS:
            raise ValueError(f"proxy dataset: unknown {self.dataset!r}; known: {sorted(PROXY_DATASETS)}")
        if self.spec.needs_data_dir and not self.data:
            raise ValueError(f"proxy dataset {self.dataset!r} needs --data=DIR (a dir made by `amoeba prepare`)")
        if self.data and not self.spec.needs_data_dir:
            raise ValueError(f"proxy dataset {self.dataset!r} is built in and reads no --data dir "
                             f"(--data={self.data}); leave --dataset unset to search on the dir")
        if self.precision not in PRECISIONS:
            raise ValueError(f"proxy precision: unknown {self.precision!r}; known: {list(PRECISIONS)}")
        if self.latency_runtime not in LATENCY_RUNTIMES:
            raise ValueError(f"proxy latency_runtime: unknown {self.latency_runtime!r}; known: {list(LATENCY_RUNTIMES)}")
        if self.latency_runtime == "tflite":
            if self.precision != "float32":
                raise ValueError(f"proxy latency_runtime: tflite converts float32 networks only, not {self.precision}")
            try:
                check_runtimes(["tflite"])  # a config error before any trial, not a failure of each
            except ImportError as err:
                raise ValueError(f"proxy latency_runtime: {err}") from None
        for name in ("image_size", "validation_images", "train_images", "timeout_s", "hang_grace_s", "threads",
                     "train_seconds", "weight_decay", "lr_warmup_epochs", "target_seconds"):
            if (getattr(self, name) or 0) < 0:
                raise ValueError(f"proxy {name}: must be >= 0, got {getattr(self, name)}")
        self._check_target()
        self._check_recipe()

    def _check_recipe(self) -> None:
        """The fast-recipe fields, checked as amoeba train checks them (core/fast_recipe.py)."""
        for name, known in (("lr_schedule", PROXY_SCHEDULES), ("augmentation", PROXY_AUGMENTATIONS)):
            if getattr(self, name) not in known:
                raise ValueError(f"proxy {name}: unknown {getattr(self, name)!r}; known: {list(known)}")
        check_fast_recipe(self, "proxy ")
        if self.lr_schedule == "triangular" and self.train_seconds:
            raise ValueError("proxy lr_schedule triangular: not with --train_seconds (whose step count is fixed "
                             "after the first steps, at the peak rate); use the cosine")

    def _check_target(self) -> None:
        """A time-to-accuracy proxy needs its time limit, and rules out a time budget."""
        if not 0 <= self.target_accuracy < 1:
            raise ValueError(f"proxy target_accuracy: a fraction in [0, 1), got {self.target_accuracy}")
        if self.target_clock not in TARGET_CLOCKS:
            raise ValueError(f"proxy target_clock: {self.target_clock!r} is not one of {list(TARGET_CLOCKS)}, the "
                             "clocks a time to accuracy is measured on")
        if self.epochs_per_eval <= 0:
            raise ValueError(f"proxy epochs_per_eval: must be positive, got {self.epochs_per_eval}")
        if self.target_accuracy and not self.target_seconds:
            raise ValueError("target_accuracy: needs --target_seconds, the time a candidate gets to reach it "
                             "(one that does not is ranked after every one that did)")
        if self.target_seconds and not self.target_accuracy:
            raise ValueError("target_seconds: only with --target_accuracy")
        object.__setattr__(self, "stop_below", tuple(float(bound) for bound in self.stop_below))
        if (self.stop_after_s or self.stop_below) and not self.target_accuracy:
            raise ValueError("stop_after_s, stop_below: a --target_accuracy candidate's stops; only with it")
        if self.stop_after_s < 0 or any(not 0 <= bound < 1 for bound in self.stop_below):
            raise ValueError(f"stop_after_s, stop_below: seconds >= 0 and accuracies in [0, 1), got "
                             f"{self.stop_after_s}, {list(self.stop_below)}")
        if self.calibration and (self.target_accuracy or self.target_seconds or self.train_seconds):
            raise ValueError("calibration: trains the --epochs schedule to its end, with no target, time limit "
                             "or --train_seconds")
        if self.target_accuracy and self.train_seconds:
            raise ValueError("target_accuracy: a time to accuracy replaces --train_seconds' time budget; give one")
        if self.target_seconds and self.timeout_s and self.target_seconds >= 0.8 * self.timeout_s:
            raise ValueError(f"target_seconds: {self.target_seconds:g} s leaves no room under the trial timeout "
                             f"of {self.timeout_s:g} s (--trial_timeout_s); raise it or give less")

    def reached_target(self, seconds: float, accuracy: float) -> bool:
        """A hit of --target_accuracy: an evaluation at or over it that ended within target_seconds
        of training (DAWNBench's time: the training and its evaluations, as `amoeba promote` counts)."""
        return accuracy >= self.target_accuracy and seconds < self.target_seconds

    def seconds_to_target(self, reached_s: float | None, best_accuracy: float) -> float:
        """A --target_accuracy search's score (minimised): a hit's time, under target_seconds; a miss
        target_seconds x (1 + the accuracy it lacked at its best, 0 if it got there too late), at
        least target_seconds: every miss ranks after every hit, the nearer miss first."""
        if reached_s is not None:
            return reached_s
        return self.target_seconds * (1 + max(0.0, self.target_accuracy - best_accuracy))

    def seconds_to_target_on(self, curve: list[list[float]]) -> dict[str, float | None]:
        """A trial's target_curve (its evaluations' [seconds, accuracy], in order) scored at this
        target_accuracy as the trial itself was: seconds_to_target, time_to_target_s (None for a
        miss) and best_val_accuracy."""
        if not curve:
            raise ValueError("target_curve: no evaluation to score")
        reached = next((seconds for seconds, accuracy in curve if self.reached_target(seconds, accuracy)), None)
        best = max(accuracy for _, accuracy in curve)
        return {"seconds_to_target": self.seconds_to_target(reached, best), "time_to_target_s": reached,
                "best_val_accuracy": best}

    def fast_recipe_changes(self) -> list[str]:
        """The fast-recipe fields set away from the plain proxy recipe's (the names of those set)."""
        plain = ProxyConfig()
        names = ("nesterov", "lr_schedule", "label_smoothing", "bn_lr_factor", "bn_weight_decay", "lookahead_every",
                 "ema_decay", "bn_momentum", "bn_epsilon", "whiten_bias_epochs", "augmentation", "eval_tta")
        return [name for name in names if getattr(self, name) != getattr(plain, name)]

    @property
    def spec(self) -> ProxyDataset:
        return PROXY_DATASETS[self.dataset]

    @property
    def input_size(self) -> int:
        """The image size candidates see."""
        return self.image_size or self.spec.image_size

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def data_key(self) -> tuple[Any, ...]:
        """What decides the loaded arrays: trials with the same key share a worker's cached data."""
        return (self.dataset, self.data, self.input_size, self.validation_images, self.train_images)


MAX_PROXY_BYTES = 6 << 30  # decoded images one trial worker may hold in memory


@dataclass(frozen=True)
class SplitPlan:
    """How a proxy uses a training split: its first `pool` images in file order are read, of which
    `num_validation` are held out (stratified, fixed seed) and `num_train` train the candidates."""

    pool: int
    num_validation: int
    num_train: int

    def memory_bytes(self, image_size: int, channels: int = 3) -> int:
        return self.pool * image_size * image_size * channels


def _ceil(x: float) -> int:
    return math.ceil(round(x, 9))  # 63 * 0.1 / 0.9 is 7.000000000000001, not 8 images


def plan_split(proxy: ProxyConfig, num_images: int) -> SplitPlan:
    """The split of `num_images` training-split images; ValueError when it cannot feed a batch.

    Without a cap every image is in the pool and validation_images (or the dataset's fraction of
    the pool) are held out. With `train_images`, the pool is the cap plus the hold-out, as far as
    the data goes; when the data ends first, the fraction applies to what there is."""
    fraction = proxy.spec.validation_fraction
    wanted_val = proxy.validation_images or _ceil(proxy.train_images * fraction / (1 - fraction))
    if proxy.train_images and proxy.train_images + wanted_val <= num_images:
        pool = proxy.train_images + wanted_val
        num_val = wanted_val
    else:
        pool = num_images
        num_val = min(proxy.validation_images or _ceil(pool * fraction), pool)
    num_train = min(pool - num_val, proxy.train_images or pool)
    if num_train < proxy.train_batch_size:
        raise ValueError(f"{proxy.data or proxy.dataset}: {num_images} training-split images leave {num_train} to "
                         f"train on after {num_val} held out for validation, fewer than train_batch_size "
                         f"{proxy.train_batch_size}")
    return SplitPlan(pool, num_val, num_train)


def check_proxy(proxy: ProxyConfig) -> SplitPlan:
    """What the search driver checks before any trial starts: the split fits the data (and, for a
    data dir, memory). ValueError / FileNotFoundError name the dir or dataset and what to change."""
    if proxy.spec.needs_data_dir:
        return check_data_dir(proxy)
    return plan_split(proxy, proxy.spec.num_images)


def check_data_dir(proxy: ProxyConfig) -> SplitPlan:
    """Read a prepared dir's metadata.json (no TensorFlow) and check the proxy fits in memory.

    ValueError or FileNotFoundError name the dir and what to change; the search driver calls this
    before any trial starts."""
    from core import storage

    path = storage.join(proxy.data, "metadata.json")
    if not storage.exists(path):
        from core.data_dir import no_metadata_message

        raise FileNotFoundError(no_metadata_message(proxy.data, "make the dir with `amoeba prepare` (or `amoeba "
                                                    "prepare --index_tfrecords` for TFRecords made elsewhere)"))
    try:
        num_images = int(storage.read_json(path)["num_train_images"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: malformed metadata ({type(err).__name__}: {err})") from None
    plan = plan_split(proxy, num_images)
    need = plan.memory_bytes(proxy.input_size)
    if need > MAX_PROXY_BYTES:
        raise ValueError(f"{proxy.data}: {plan.pool:,} images at {proxy.input_size} px need {need / 2**30:.1f} GiB "
                         f"in each trial worker's memory (limit {MAX_PROXY_BYTES / 2**30:.0f} GiB); "
                         f"cap them with --train_images or a smaller --image_size")
    return plan
