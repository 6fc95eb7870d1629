"""The search a prepared image dir gets when the command names no space (`amoeba search --data=DIR`
with no flagfile): what won the CIFAR-10 race on 2 CPU cores (benchmarks/README.md), sized to the
data by the rule below. Flags and keywords that are given win over it; a flagfile's too.

What won: the convnet space from airbench94 (the whole first population, under --repeats=reuse:
trained once, and every parent until a child beats it), airbench's fast recipe in the proxy
(search_cifar10_cpu_convnet.cfg's), and time to a validation accuracy as the objective.

The rule, for N training images of C classes in the dir (every N that `amoeba prepare` writes,
from 2: one image is held out and one trained on; a dir of 1 is refused, naming it):
- held out to score candidates: V = N/10, at least 20 per class but never more than N/5, at most
  2,000 and at least 1 (CIFAR-10's proxy: 2,000 of 50,000; 300 images of 10 classes: 60);
- candidates train on T = min(N - V, 10,000) images for E = 80,000 / T epochs, rounded, between
  4 and 30 (CIFAR-10's: 8 epochs of 10,000), evaluated after every epoch with the flip;
- batch 256, or for T under 2,560 the largest power of two that gives 10 steps an epoch (at least
  16, but never more than T: under 16 images, the largest power of two up to T); learning rate
  0.375 x batch / 256 (airbench's 1.5 at 1,024); the whitening bias trains the first 3/8 of the
  epochs (airbench: 3 of 9.9); images at 32 pixels;
- population 6, tournament 3; one trial at a time on all the machine's CPUs (a time is only
  comparable alone: two trials on 2 cores would each train at half speed against the calibration's);
- amoeba promote of such a search: its top 2 beside airbench94 at full and half width, ResNet-9 at
  a quarter and ResNet-20 (the baselines fast on a CPU), all under airbench94's recipe
  (airbench94_cifar10.cfg) on the N - V images left after promote_held_out's V validation images
  (held_out's rule: what the promote chooses the export and the race's target by) for
  PROMOTE_IMAGES images' worth of epochs, at least airbench's 9.9 and at most 40 (9.9 on CIFAR-10;
  28.7 on 3,870 photos: the six models in about 30 minutes on 2 cores), at batch 1,024 or, under
  20,480 images, the power of two that gives 20 steps an epoch
  (at least 64, but never more than N: the largest power of two up to N), the learning rate
  scaled with it, evaluated 10 times, one model at a time. The search's budget does not cover it:
  the calibration's line is followed by the promote's estimate at the calibration's pace (6 models
  x 9.9 epochs of N images once N > 10,101: hours for CIFAR-10's 50,000, days for a million);
- the target: TARGET_SHARE of the validation accuracy airbench94 ends the proxy's E epochs
  with, measured before the search (its own one-trial search in DIR/calibration, resumed like
  any search; one that failed is trained again by a rerun), evaluated and timed as a candidate is
  (every epoch, on the candidates' --target_clock); target_seconds: TARGET_SECONDS_FACTOR x that
  clock's seconds at its end, the trial timeout twice that; the search's time: SEARCH_BUDGET_S less
  the calibration's whole trial (time_budget_s: no trial is handed out after it; a candidate that
  cannot win stops early and children are screened: evolution/target_race.py), at most 60 trials,
  the calibration's run the first of them (the search's trial 0, scored at the target, not
  trained again); a --max_trials given leaves the time unbounded unless --time_budget_s is given too. A target within
  the validation split's noise (Wilson's 95% half-width at V images) of chance or of the seed's
  own accuracy gets a warning.

Pure Python: this module must not import TensorFlow or Ray.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from core import storage
from core.data_dir import METADATA_FILE, no_metadata_message

SEED = "airbench94"
TARGET_SHARE = 0.95  # CIFAR-10's proxy: 0.76 against airbench94's 0.80 at 8 epochs
TARGET_SECONDS_FACTOR = 1.5
SEARCH_BUDGET_S = 1500.0  # with calibration and the promote, the photo example in an hour
TRIALS = (6, 60)
PROXY_IMAGES = 80_000  # images a candidate sees: 8 epochs of 10,000
PROMOTE_IMAGES = 100_000  # images each promoted model sees on small data
MIN_SEARCH_IMAGES = 2  # one held out to score candidates, one to train them on
FAST_RECIPE = {  # search_cifar10_cpu_convnet.cfg's proxy recipe, at batch 256
    "momentum": 0.85, "nesterov": True, "lr_schedule": "triangular", "weight_decay": 1.33e-3,
    "bn_lr_factor": 64.0, "bn_weight_decay": 2.08e-5, "label_smoothing": 0.2, "lookahead_every": 5,
    "augmentation": "airbench", "eval_tta": "flip", "epochs_per_eval": 1.0, "image_size": 32,
}


BASELINES = ("airbench94", "airbench94@0.5", "resnet9@0.25", "resnet20")
PROMOTE_TOP_K = 2
AIRBENCH_RECIPE = {  # airbench94_cifar10.cfg's recipe, at batch 1,024
    "image_size": 32, "augmentation": "airbench", "optimizer": "momentum", "momentum": 0.85, "nesterov": True,
    "lr_schedule": "triangular", "eval_tta": "flip_translate", "weight_decay": 1.33e-3, "label_smoothing": 0.2,
    "bn_lr_factor": 64.0, "bn_weight_decay": 2.08e-5, "lookahead_every": 5, "cache": True,
}


@dataclass(frozen=True)
class DataFacts:
    """What the rule reads of a prepared dir: its training images and classes (and the dir, to name
    it in an error; empty when the facts were not read from one)."""

    train_images: int
    classes: int
    source: str = field(default="", compare=False)

    @classmethod
    def read(cls, data_dir: str) -> "DataFacts":
        """From `data_dir`'s metadata.json (written by `amoeba prepare`); ValueError naming the file."""
        path = storage.join(data_dir, METADATA_FILE)
        if not storage.exists(path):
            raise ValueError(no_metadata_message(data_dir, "make the dir with `amoeba prepare` (or `amoeba prepare "
                                                           "--index_tfrecords` for TFRecords made elsewhere)"))
        meta = storage.read_json(path)
        try:
            return cls(int(meta["num_train_images"]), int(meta["num_label_classes"]), data_dir)
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: no usable num_train_images and num_label_classes ({err})") from None


def power_of_two(n: int) -> int:
    """The largest power of two up to `n` (1 below 2)."""
    return 1 << max(0, int(n).bit_length() - 1)


def held_out(facts: DataFacts) -> int:
    """V: the images held out to score candidates, by the rule (N/10, at least 20 per class but
    never more than N/5, at most 2,000 and at least 1)."""
    n = facts.train_images
    return max(1, min(2_000, max(n // 10, min(20 * facts.classes, n // 5))))


def proxy_settings(facts: DataFacts) -> dict[str, Any]:
    """The proxy's settings by the rule (ProxyConfig field -> value), the target left to calibration;
    ValueError naming the dir when it has too few images to hold one out and train on the rest."""
    if facts.train_images < MIN_SEARCH_IMAGES:
        raise ValueError(f"{facts.source or 'the data dir'}: {facts.train_images} training image(s) of "
                         f"{facts.classes} class(es) are too few to search: a search holds images out to score "
                         f"candidates and trains them on the rest, so it needs at least {MIN_SEARCH_IMAGES}; "
                         "prepare the dir again from more images")
    held = held_out(facts)
    train = min(facts.train_images - held, 10_000)
    epochs = min(30, max(4, round(PROXY_IMAGES / train)))
    batch = 256 if train >= 2_560 else min(power_of_two(train), max(16, power_of_two(train // 10)))
    return {**FAST_RECIPE, "validation_images": held, "train_images": train, "epochs": epochs,
            "train_batch_size": batch, "learning_rate": 0.375 * batch / 256,
            "whiten_bias_epochs": round(3 * epochs / 8, 2)}


def search_settings() -> dict[str, Any]:
    """The search's own settings by the rule (SearchConfig field -> value); its population opens with
    SEED as many times as it holds (`amoeba search` fills that in)."""
    return {"proxy_space": "convnet", "repeats": "reuse", "population_size": 6, "sample_size": 3, "max_concurrent": 1}


def promote_held_out(facts: DataFacts) -> int:
    """The validation images amoeba promote holds out of the training split by default (its
    --validation_images: what it chooses the export and the race's target by): held_out's rule, none
    of a single image."""
    return held_out(facts) if facts.train_images >= MIN_SEARCH_IMAGES else 0


def promote_settings(facts: DataFacts) -> tuple[dict[str, Any], dict[str, Any]]:
    """amoeba promote's settings for a search sized to its data, by the rule: (PromoteConfig field ->
    value, recipe field -> value)."""
    if facts.train_images < 1:
        raise ValueError(f"{facts.source or 'the data dir'}: no training image to promote on")
    n = facts.train_images - promote_held_out(facts)  # the models train on the rest
    epochs = round(min(40.0, max(9.9, PROMOTE_IMAGES / n)), 1)
    batch = 1024 if n >= 20_480 else min(power_of_two(n), max(64, power_of_two(n // 20)))
    recipe = {**AIRBENCH_RECIPE, "num_epochs": epochs, "train_batch_size": batch, "learning_rate": 1.5 * batch / 1024,
              "whiten_bias_epochs": round(3 * epochs / 9.9, 2), "epochs_per_eval": round(epochs / 9.9, 2)}
    return {"baselines": BASELINES, "top_k": PROMOTE_TOP_K, "max_concurrent": 1}, recipe


def calibrated(accuracy: float, seconds: float, trial_seconds: float | None = None) -> dict[str, Any]:
    """The target and the time limits from the calibration run: the validation accuracy airbench94
    ends the proxy's epochs with, its seconds on the candidates' clock (the limit's) and its whole
    trial's (the length's; default the same) (ProxyConfig and SearchConfig fields -> values)."""
    trial_seconds = seconds if trial_seconds is None else trial_seconds
    if not 0 < accuracy <= 1 or not seconds > 0 or not trial_seconds > 0:
        raise ValueError(f"calibration: an accuracy in (0, 1] and positive seconds, got {accuracy}, {seconds}: no "
                         "target to race to; give --target_accuracy and --target_seconds to skip the calibration")
    limit = round(TARGET_SECONDS_FACTOR * seconds, 1)
    return {"target_accuracy": round(TARGET_SHARE * accuracy, 4), "target_seconds": limit,
            "timeout_s": round(2 * limit, 1), "max_trials": TRIALS[1],
            "time_budget_s": round(max(trial_seconds, SEARCH_BUDGET_S - trial_seconds), 1)}


def wilson_half_width(accuracy: float, images: int, z: float = 1.96) -> float:
    """The half-width of Wilson's 95% interval of an accuracy measured on `images` held-out images:
    the validation split's noise at that accuracy."""
    n = max(1, images)
    return z / (1 + z * z / n) * math.sqrt(accuracy * (1 - accuracy) / n + z * z / (4 * n * n))


def target_warning(target: float, accuracy: float, classes: int, validation_images: int) -> str | None:
    """A warning line when the calibrated `target` is within the validation split's noise of chance
    (1 / `classes`: a net that guesses may reach it at its first evaluation, and the search ranks by
    the time to one, by speed alone) or of the seed's own `accuracy` (whether a net as good reaches
    it is the draw of the held-out images). None when it is clear of both."""
    chance, noise = 1 / max(1, classes), wilson_half_width(target, validation_images)
    why = (["within it of chance, so a net that guesses may reach it at its first evaluation and candidates rank "
            "by speed alone"] if target - chance < noise else [])
    if accuracy - target < noise:
        why.append(f"within it of {SEED}'s own {accuracy:.4f}, so whether a net as good reaches it is the draw of "
                   "the held-out images")
    if not why:
        return None
    return (f"warning: the target {target:.4f} is inside the validation split's noise: {validation_images:,} "
            f"held-out images measure it to +/-{noise:.4f} (Wilson 95% half-width), chance (1/{classes} classes) "
            f"is {chance:.4f}; {'; and '.join(why)}. More held-out images (--validation_images) or a "
            "--target_accuracy and --target_seconds of your own tell nets apart")


def calibration_dir(output_dir: str) -> str:
    """Where a sized search's calibration runs: its own one-trial search beside the search's files."""
    return os.path.join(output_dir, "calibration")


def promote_seconds(facts: DataFacts, seconds_per_image: float) -> float:
    """The sized promote's length at `seconds_per_image` (a model's seconds per training image, as
    the calibration ran): each of its models trains its epochs of the training images it does not
    hold out."""
    settings, recipe = promote_settings(facts)
    models = len(settings["baselines"]) + settings["top_k"]
    return models * recipe["num_epochs"] * (facts.train_images - promote_held_out(facts)) * seconds_per_image


def promote_line(facts: DataFacts, seconds_per_image: float) -> str:
    """The line that warns of the promote's length next to the search's (the search's budget does
    not cover it): its models, epochs and images, and their time at the calibration's pace."""
    settings, recipe = promote_settings(facts)
    models = len(settings["baselines"]) + settings["top_k"]
    return (f"amoeba promote afterwards (not in the search's time): {models} models x {recipe['num_epochs']:g} "
            f"epochs of {facts.train_images - promote_held_out(facts):,} images, about "
            f"{duration(promote_seconds(facts, seconds_per_image))} "
            "at that pace, one model at a time (its --epochs or fewer --baselines shorten it)")


def duration(seconds: float) -> str:
    """`seconds` in the unit a person reads best: minutes, hours or days."""
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 24 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
