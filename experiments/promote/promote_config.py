"""What a promote is: `PromoteConfig`, one field per setting. Each field with help text is a flag of
`amoeba promote` (experiments/settings.py derives them; the recipe's flags come from TrainConfig
through experiments/recipe_flags.py), and `settings()` is what a rerun must keep: every field but
those marked free (how the models run, not what is trained). No TensorFlow here.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from experiments.promote.comparison import EXPORT_CHOICES
from experiments.tracking.mlflow_log import check_mlflow
from experiments.search.search_config import SearchConfig
from experiments.settings import FREE, as_json
from core import storage
from core.export_formats import EXPORT_FORMAT_HELP, check_formats, check_precision
from core.train_config import TrainConfig

# The recipe's settings that change how the models run, not what is trained: free on a rerun
RECIPE_HOW_IT_RUNS = ("eval_batch_size", "iterations_per_loop", "save_checkpoints_steps", "save_checkpoints_secs",
                      "cache", "tpu")
_SEARCH = {f.name: f for f in dataclasses.fields(SearchConfig)}
FORMERLY_FREE = ("target_top1", "target_top5", "export_choice")  # free on a rerun before issue 52: a plan lacks them


def _setting(default: Any, help: str, free: bool = False, **meta: Any) -> Any:
    return field(default=default, metadata={"help": help, **({"on_resume": FREE} if free else {}), **meta})


def _as_search(name: str, help: str) -> Any:
    """A resource setting as `amoeba search` has it: its default, the help given here; free on a rerun."""
    return _setting(_SEARCH[name].default, help, free=True)


@dataclass(frozen=True)
class PromoteConfig:
    output_dir: str = field(metadata={"help": "Folder for the models, the plan and the comparison; rerun to resume.",
                                      "on_resume": FREE})
    data: str = field(metadata={"help": "A dir made by `amoeba prepare` (local or gs://)."})
    recipe: dict[str, Any] = field(metadata={"flag": False})  # TrainConfig fields but model, genotype, data, model_dir
    search_dirs: tuple[str, ...] = _setting((), "Output dirs of `amoeba search` to promote cells from.",
                                            flag="search_dir")
    top_k: int = _setting(3, "Distinct genotypes promoted from each search.")
    audit_k: int = _setting(0, "Also promote this many of each search's other distinct genotypes, drawn at random "
                               "(seeded) from those it ranked below the top_k: the report's Kendall tau then says "
                               "whether the search's proxy ranks nets as full training does.")
    finetune_epochs: float = _setting(0.0, "A supernet search's promoted nets (--evaluator=supernet) are also "
                                           "evaluated with the weights they inherit from its supernet; with E > 0, "
                                           "each is also fine-tuned E epochs from them under the recipe (its "
                                           "schedule over E epochs): rows inherited, fine-tuned and from scratch "
                                           "of the same net.")
    race_seeds: int = _setting(1, "Each search's pick and each baseline trained at this many seeds (--seed, "
                                  "--seed+1, ...; rows NAME-seedS), and their training steps timed interleaved in "
                                  "--step_rounds rounds: the race's figure at each net's own pace, steps to the target "
                                  "x the step, with an interval over seeds and rounds, beside the wall clock's "
                                  "(experiments/promote/seed_race.py; 1: the wall clock's only).")
    step_rounds: int = _setting(5, "With --race_seeds: rounds of the interleaved step timing (free on a rerun: "
                                   "other rounds time the steps again).", free=True)
    at_target: float | None = _setting(None, "Promote each search's trials ranked again at this accuracy, under "
                                             "its --target_accuracy, by their times to it from their "
                                             "evaluations, without training (amoeba results --at_target; a "
                                             "time-to-accuracy search's): a target the search set too near "
                                             "its proxy's ceiling, lowered. Default: as the search ranked.")
    baselines: tuple[str, ...] = _setting((), "Named models trained beside them (trainer/models.py's table, e.g. "
                                              "resnet20,resnet9,amoebanet_d; resnet9@0.25: ResNet-9 at a quarter "
                                              "of its widths).")
    match_params: str | None = _setting(None, "A model name or a parameter count: each cell's --filters is set so its "
                                              "parameters are within 10% of it (default with --baselines and no "
                                              "--filters: the first baseline).")
    target_top1: tuple[float, ...] = _setting((), "Top-1 accuracies to measure the time, training multiply-adds "
                                                  "and cost to (DAWNBench: the first evaluation at or over each; "
                                                  "e.g. 0.5,0.7); the report's race is to the highest one a "
                                                  "model reached on the validation split. Fixed by the first run: "
                                                  "a changed target is a new promote.")
    target_top5: tuple[float, ...] = _setting((), "Top-5 accuracies to measure them to.")
    export_dir: str | None = _setting(None, "Export the model --export_choice picks here at the end (--export_format), "
                                            "for `amoeba predict` and TF Serving.", free=True)
    export_format: tuple[str, ...] = _setting(("saved_model",), EXPORT_FORMAT_HELP, free=True)
    export_choice: str = _setting("accuracy", "Which model --export_dir exports, among each search's pick (the cell "
                                              "it ranked first, not the best of several on the evaluation split) "
                                              "and the baselines, on the validation split (--validation_images): "
                                              "accuracy (top-1; says when it is within noise) or time_to_target "
                                              "(the first to the highest --target_top1). Fixed by the first run: a "
                                              "changed choice is a new promote.", choices=EXPORT_CHOICES)
    mlflow_tracking_uri: str | None = _setting(None, "Log each promoted model as an MLflow run there (its "
                                                     "comparison row; the exported files as artifacts of the "
                                                     "exported model's run); the experiment is the output dir's "
                                                     "name (needs mlflow-skinny).", free=True)
    cost_per_hour: float = _setting(0.0, "Price of one trial's resources per hour: the cost to the targets "
                                         "(DAWNBench's cost; 0: not shown).", free=True)
    cpus_per_trial: float = _as_search("cpus_per_trial", "CPUs per model (0: the cluster's CPUs shared out among "
                                                         "the concurrent models).")
    gpus_per_trial: float = _as_search("gpus_per_trial", "GPUs per model; a fraction shares a GPU.")
    tpus_per_trial: int = _as_search("tpus_per_trial", "TPU chips per model (Ray's TPU resource; trains under a "
                                                       "TPUStrategy on them).")
    max_concurrent: int = _as_search("max_concurrent", "Models trained at the same time (0: as many as the "
                                                       "resources allow).")
    max_failures: int = _as_search("max_failures", "Retries of a model whose worker died; each resumes from its "
                                                   "checkpoint.")
    ray_address: str | None = _as_search("ray_address", "Join a running Ray cluster: auto or HOST:PORT (default: a "
                                                        "private one on 127.0.0.1).")
    size_flags: tuple[str, ...] = field(default=(), metadata={"flag": False, "on_resume": FREE})  # recipe sizes
    # given on the command line (filters, num_cells): they resize macro genotypes, which otherwise train at
    # their own size (the plan records the genotype each model trains, so a rerun keeps it)

    def __post_init__(self) -> None:
        if not self.search_dirs and not self.baselines:
            raise ValueError("nothing to promote: give --search_dir, --baselines or both")
        if self.top_k < 0:
            raise ValueError(f"top_k: must be 0 or more, got {self.top_k}")
        if self.race_seeds < 1 or self.step_rounds < 1:
            raise ValueError(f"race_seeds, step_rounds: at least 1, got {self.race_seeds}, {self.step_rounds}")
        if not self.finetune_epochs >= 0:
            raise ValueError(f"finetune_epochs: 0 (none) or more epochs, got {self.finetune_epochs}")
        if self.at_target is not None and not (self.search_dirs and 0 < self.at_target < 1):
            raise ValueError(f"at_target: an accuracy in (0, 1) to rank the trials of --search_dir by, got "
                             f"{self.at_target}{'' if self.search_dirs else ' without a --search_dir'}")
        for b in self.baselines:
            baseline_model(b)  # a ValueError naming the unknown one
        if len(set(self.baselines)) < len(self.baselines):
            raise ValueError(f"baselines: {list(self.baselines)} names a model twice")
        if self.match_params and not self.match_params.isdigit():
            try:
                baseline_model(self.match_params)
            except ValueError:
                raise ValueError(f"match_params: {self.match_params!r} is neither a model name nor a parameter "
                                 "count") from None
        for name in ("target_top1", "target_top5"):
            value = getattr(self, name)  # one number (as before there were several), or 0: none
            targets = tuple(v for v in ((value,) if isinstance(value, (int, float)) else value) if v)
            object.__setattr__(self, name, tuple(float(v) for v in targets))
            if any(not 0 < v <= 1 for v in targets):
                raise ValueError(f"{name}: accuracies in (0, 1], got {list(targets)}")
        check_formats(self.export_format)
        if self.export_dir:
            check_precision(self.export_format, self.recipe.get("precision", "float32"))
        check_mlflow(self.mlflow_tracking_uri)
        if self.export_choice not in EXPORT_CHOICES:
            raise ValueError(f"export_choice: one of {list(EXPORT_CHOICES)}, got {self.export_choice!r}")
        if self.export_choice == "time_to_target" and not self.target_top1:
            raise ValueError("export_choice: time_to_target needs --target_top1 (the accuracy to race to)")
        self.train_config("check", "resnet20")  # the recipe's own checks, at once

    def targets(self) -> dict[str, tuple[float, ...]]:
        """The target accuracies by metric: {"top1": (0.5, 0.7), "top5": ()}."""
        return {"top1": self.target_top1, "top5": self.target_top5}

    def train_config(self, name: str, model: str, genotype: Any = None, **changes: Any) -> TrainConfig:
        """The recipe for one model; the NASNet-only options (dropout, drop path, aux head) are off for
        other families (ResNets)."""
        from trainer.models import MODEL_FAMILIES

        recipe = {**self.recipe, **changes}
        if not MODEL_FAMILIES[model].nasnet:
            recipe.update(dropout=0.0, drop_path_keep_prob=1.0, aux_weight=0.0)
        if not MODEL_FAMILIES[model].widths:
            recipe.update(width_multiplier=1.0)
        if self.tpus_per_trial and not recipe.get("tpu"):
            recipe["tpu"] = "local"  # the trial's own TPU chips (Ray's TPU resource)
        base = self.output_dir if storage.is_gcs(self.output_dir) else os.path.abspath(self.output_dir)
        return TrainConfig(model=model, genotype=genotype, data=self.data,
                           model_dir=storage.join(base, "models", name), **recipe)

    def settings(self) -> dict[str, Any]:
        """What fixes the plan and the trained models (not how they run): compared on a rerun."""
        data = {f.name: as_json(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.metadata.get("on_resume") != FREE}
        data["recipe"] = {k: as_json(v) for k, v in self.recipe.items() if k not in RECIPE_HOW_IT_RUNS}
        return data


def baseline_model(baseline: str) -> tuple[str, float | None]:
    """(model name, width multiplier or None) of a --baselines entry: a MODEL_FAMILIES name, or
    NAME@WIDTH for a family with widths (resnet9@0.25: ResNet-9 at a quarter of its widths)."""
    from trainer.models import MODEL_FAMILIES

    name, _, width = baseline.partition("@")
    known = [n for n, family in MODEL_FAMILIES.items() if not family.space]
    if name not in known:
        raise ValueError(f"baselines: unknown {baseline!r}; known: {known}")
    if not width:
        return name, None
    try:
        value = float(width)
    except ValueError:
        value = 0.0
    if not MODEL_FAMILIES[name].widths or not value > 0:
        scaled = [n for n in known if MODEL_FAMILIES[n].widths]
        raise ValueError(f"baselines: {baseline!r}: NAME@WIDTH takes a positive width, for {scaled} only")
    return name, value


def with_new_recipe_fields(saved: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """`saved` with each setting (and recipe field) it lacks and `now` gives, at the field's default: a
    plan written before a PromoteConfig or TrainConfig field existed (or was kept) was made at that
    default."""
    own = {f.name: as_json(f.default) for f in dataclasses.fields(PromoteConfig)
           if f.default is not dataclasses.MISSING}
    own.update({k: now[k] for k in FORMERLY_FREE if k in now})  # never saved: the run's own, as they were free
    saved = {**{k: own[k] for k in now if k not in saved and k in own}, **saved}
    if not isinstance(saved.get("recipe"), dict):
        return saved
    defaults = {f.name: as_json(f.default) for f in dataclasses.fields(TrainConfig)
                if f.default is not dataclasses.MISSING}
    recipe = dict(saved["recipe"])
    for name in (now.get("recipe") or {}):
        if name not in recipe and name in defaults:
            recipe[name] = defaults[name]
    return {**saved, "recipe": recipe}
