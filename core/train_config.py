"""What a full training run is: `TrainConfig`, a plain value object, and the choice lists of its
fields. No TensorFlow here, so commands take their flag defaults and choices from it cheaply.

The NASNet fields mean what they mean in `amoeba search`: `num_cells` is N, the normal cells per
stack (3 stacks), `filters` is F, the first stack's filters.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from core.augmentations import AUGMENTATIONS
from core.fast_recipe import LOOKAHEAD_DECAY, TRIANGLE, TTA_VIEWS, check_fast_recipe
from core.proxy_config import PRECISIONS
from searchspace import ConvNetGenotype, NasNetGenotype, genotype_from_json, space_of

EVAL_HISTORY = "eval_history.jsonl"  # a model_dir's evaluations, one JSON line each (trainer/train.py)
PROGRESS = "progress.json"  # a model_dir's latest training step, for watchers
SCHEDULES = ("exponential", "piecewise", "cosine", "constant", "triangular")  # trainer/schedules.py implements each
OPTIMIZERS = ("rmsprop", "momentum", "sgd")
GENOTYPE_MODELS = ("genotype", "nasnet_macro", "convnet")  # the models that build a given genotype


@dataclass(frozen=True)
class TrainConfig:
    model: str  # a name of trainer/models.py's MODEL_FAMILIES, "genotype" with `genotype` given
    data: str  # a prepared TFRecord dir (local or gs://)
    model_dir: str
    genotype: NasNetGenotype | ConvNetGenotype | None = None  # for model "genotype", "nasnet_macro" (a MacroGenotype), "convnet"
    train_batch_size: int = 128
    eval_batch_size: int = 128
    train_steps: int = 0
    num_epochs: float = 0.0  # used when train_steps is 0
    steps_per_eval: int = 0  # 0: evaluate once, at the end (or every epochs_per_eval)
    epochs_per_eval: float = 0.0  # used when steps_per_eval is 0
    image_size: int = 224
    num_cells: int = 2  # N: normal cells per stack (the paper's N; 3 stacks)
    filters: int = 256  # F: filters of the first stack
    width_multiplier: float = 1.0  # scales every width of a family that has one (resnet9)
    learning_rate: float = 0.1  # peak
    lr_schedule: str = "exponential"
    lr_decay_value: float = 0.97
    lr_decay_epochs: tuple[float, ...] = (2.4,)
    lr_warmup_epochs: float = 0.0
    lr_start_factor: float = TRIANGLE["lr_start_factor"]  # triangular: the first step's rate, times learning_rate
    lr_peak_at: float = TRIANGLE["lr_peak_at"]  # triangular: the fraction of the steps at which it peaks
    lr_end_factor: float = TRIANGLE["lr_end_factor"]  # triangular: the last step's rate, times learning_rate
    optimizer: str = "rmsprop"
    momentum: float = 0.9
    nesterov: bool = False  # Nesterov momentum (optimizer "momentum")
    weight_decay: float = 0.0  # L2 on weights with more than one dimension (not BN, not biases)
    label_smoothing: float = 0.0
    bn_momentum: float = 0.0  # > 0: every BN layer's moving-average momentum (Keras's convention); 0: the family's
    bn_epsilon: float = 0.0  # > 0: every BN layer's epsilon; 0: the family's own
    ema_decay: float = 0.0  # > 0: a moving average of the weights, evaluated and exported (0: off)
    bn_lr_factor: float = 1.0  # the BN offsets' learning rate, times learning_rate (airbench94: 64)
    bn_weight_decay: float = 0.0  # L2 on the BN offsets (weight_decay skips them)
    lookahead_every: int = 0  # > 0: airbench's lookahead, a sync of the weights' average every this many steps
    lookahead_decay: float = LOOKAHEAD_DECAY  # its decay at the last step (x (step / total)^3 before)
    whiten_bias_epochs: float = 0.0  # > 0: the whitening conv's bias trains this many epochs, then is frozen
    precision: str = "float32"
    iterations_per_loop: int = 100
    save_checkpoints_steps: int = 0  # checkpoint every N steps; 0: by time, below
    save_checkpoints_secs: float = 600.0  # with save_checkpoints_steps 0: at the first loop end after this
    tpu: str | None = None
    dropout: float = 0.0
    drop_path_keep_prob: float = 1.0
    aux_weight: float = 0.0  # > 0 adds the auxiliary head with this loss weight
    label_offset: int | None = None  # None: the prepared data's own (metadata.json)
    augmentation: str = "inception"  # "cifar": pad-crop-flip, whole images evaluated
    cutout: int = 0  # "cifar": the side of the cutout square in pixels (0: none)
    eval_tta: str = "none"  # test-time augmentation: one of TTA_VIEWS
    cache: bool = False
    validation_images: int = 0  # the training split's first images (file order), held out and evaluated apart
    seed: int = 0

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer: unknown {self.optimizer!r}; known: {list(OPTIMIZERS)}")
        if self.lr_schedule not in SCHEDULES:
            raise ValueError(f"lr_schedule: unknown {self.lr_schedule!r}; known: {list(SCHEDULES)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision: unknown {self.precision!r}; known: {list(PRECISIONS)}")
        if self.augmentation not in AUGMENTATIONS:
            raise ValueError(f"augmentation: unknown {self.augmentation!r}; known: {list(AUGMENTATIONS)}")
        if self.cutout and self.augmentation == "inception":
            raise ValueError("cutout: only with augmentation 'cifar' or 'airbench'")
        if self.train_steps <= 0 and self.num_epochs <= 0:
            raise ValueError("give train_steps or num_epochs")
        for name in ("train_batch_size", "eval_batch_size", "iterations_per_loop", "image_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be positive, got {getattr(self, name)}")
        if self.validation_images < 0:
            raise ValueError(f"validation_images: 0 or more, got {self.validation_images}")
        if self.model in GENOTYPE_MODELS and self.genotype is None:
            raise ValueError(f"model {self.model!r} needs a genotype")
        self._check_fast_recipe()

    def _check_fast_recipe(self) -> None:
        """The fast-recipe fields' own checks (Nesterov, averaging, smoothing, BN, lookahead, TTA,
        triangular): core/fast_recipe.py's, shared with the search's proxy."""
        if self.nesterov and self.optimizer != "momentum":
            raise ValueError(f"nesterov: only with optimizer 'momentum', not {self.optimizer!r}")
        check_fast_recipe(self)

    @property
    def center_crop(self) -> bool:
        """Whether evaluation (and serving) crops the centre: not for CIFAR-style models."""
        return self.augmentation == "inception"  # "cifar" and "airbench" evaluate whole images

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["genotype"] = self.genotype.to_json() if self.genotype else None
        data["lr_decay_epochs"] = list(self.lr_decay_epochs)
        return data


def genotype_model(genotype: object) -> str:
    """The model (trainer/models.py's MODEL_FAMILIES name) that builds a network genotype: its
    space's name ("convnet", "nasnet_macro"), "genotype" for NASNet cells."""
    space = space_of(genotype)
    return "genotype" if space == "nasnet" else space


def config_from_saved(saved: dict[str, Any], **changes: Any) -> TrainConfig:
    """The TrainConfig of a model_dir's train_config.json, with `changes`. A file written before the
    flag vocabulary was unified (`reduction_size`, `lr`, `num_cells` counting all normal cells) is
    read in today's terms."""
    saved = dict(saved)
    if "reduction_size" in saved:
        saved["filters"] = saved.pop("reduction_size")
        saved["learning_rate"] = saved.pop("lr")
        saved["num_cells"] = saved["num_cells"] // 3
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    values = {k: v for k, v in saved.items() if k in fields}
    values["genotype"] = genotype_from_json(saved["genotype"]) if saved.get("genotype") else None
    values["lr_decay_epochs"] = tuple(values["lr_decay_epochs"])
    return TrainConfig(**{**values, **changes})


def at_epochs(recipe: dict[str, Any], epochs: float) -> dict[str, Any]:
    """The changes that train `recipe` (TrainConfig fields) for `epochs` instead of its own length,
    everything measured in epochs scaled with it: the learning rate's warm-up and decay epochs, the
    whitening bias's epochs and the evaluations' spacing (triangular and cosine schedules follow the
    run's length themselves). A recipe of train_steps (its length in epochs unknown here): each kept
but never past `epochs`, the decay epochs as they are. A field
    that was on stays on (at least 0.01 epochs)."""
    if not epochs > 0:
        raise ValueError(f"epochs: a positive number of epochs, got {epochs:g}")
    length = 0.0 if recipe.get("train_steps") else float(recipe.get("num_epochs") or 0.0)

    def scaled(value: float) -> float:
        return max(0.01, round(value * epochs / length, 2)) if length else min(value, epochs)

    changes: dict[str, Any] = {"num_epochs": float(epochs), "train_steps": 0}
    for name in ("whiten_bias_epochs", "epochs_per_eval", "lr_warmup_epochs"):
        if recipe.get(name):
            changes[name] = scaled(recipe[name])
    if recipe.get("lr_decay_epochs") and length:  # a schedule's decay points (each keeps its order)
        changes["lr_decay_epochs"] = tuple(scaled(v) for v in recipe["lr_decay_epochs"])
    return changes
