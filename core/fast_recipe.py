"""The fast-recipe fields that full training (`TrainConfig`) and the search's proxy (`ProxyConfig`)
share, with one name and one meaning in both: their choice lists, defaults and checks. Each config
checks the fields it has with `check_fast_recipe`.

No TensorFlow here, and no import of either config (both import this). This module must not
define a config of its own.
"""

from __future__ import annotations

from typing import Any

TTA_VIEWS = ("none", "flip", "flip_translate")  # trainer/evaluation.py: the views evaluation averages
LOOKAHEAD_DECAY = 0.95 ** 5  # airbench's: 0.95 a step, over the 5 steps between syncs
TRIANGLE = {"lr_start_factor": 0.2, "lr_peak_at": 0.23, "lr_end_factor": 0.07}  # airbench's triangle


def check_fast_recipe(config: Any, where: str = "") -> None:
    """ValueError naming the field (after `where`, e.g. "proxy ") for a fast-recipe value out of range
    in `config`; a field the config lacks is not checked. An SGD-only field (bn_lr_factor: its
    gradients scaled are a scaled rate for SGD only) is refused with another optimizer."""
    def has(name: str) -> bool:
        return hasattr(config, name)

    for name in ("ema_decay", "label_smoothing", "bn_momentum"):
        if has(name) and not 0 <= getattr(config, name) < 1:
            raise ValueError(f"{where}{name}: in [0, 1), got {getattr(config, name)}")
    for name in ("bn_epsilon", "bn_weight_decay", "lookahead_every", "whiten_bias_epochs"):
        if has(name) and getattr(config, name) < 0:
            raise ValueError(f"{where}{name}: 0 or more, got {getattr(config, name)}")
    if has("bn_lr_factor"):
        if config.bn_lr_factor <= 0:
            raise ValueError(f"{where}bn_lr_factor: must be positive, got {config.bn_lr_factor}")
        if config.bn_lr_factor != 1 and getattr(config, "optimizer", "momentum") == "rmsprop":
            raise ValueError(f"{where}bn_lr_factor: only with optimizer 'momentum' or 'sgd', not 'rmsprop'")
    if has("lookahead_decay") and not 0 <= config.lookahead_decay <= 1:
        raise ValueError(f"{where}lookahead_decay: in [0, 1], got {config.lookahead_decay}")
    if has("eval_tta") and config.eval_tta not in TTA_VIEWS:
        raise ValueError(f"{where}eval_tta: unknown {config.eval_tta!r}; known: {list(TTA_VIEWS)}")
    if getattr(config, "lr_schedule", "") == "triangular":
        if not 0 <= config.lr_peak_at <= 1:
            raise ValueError(f"{where}lr_peak_at: in [0, 1], got {config.lr_peak_at}")
        for name in ("lr_start_factor", "lr_end_factor"):
            if getattr(config, name) < 0:
                raise ValueError(f"{where}{name}: 0 or more, got {getattr(config, name)}")
        if config.lr_warmup_epochs > 0:
            raise ValueError(f"{where}lr_schedule triangular: its own warm-up (lr_start_factor, lr_peak_at); "
                             "give no lr_warmup_epochs")
