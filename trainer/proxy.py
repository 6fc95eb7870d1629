"""The proxy task a search candidate is trained on: a plain value object.

Importing this module must stay cheap for the search driver: no TensorFlow here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# Built-in datasets (loaders in trainer/data.py).
BUILTIN_DATASETS = ("digits",)

@dataclass(frozen=True)
class ProxyConfig:
    """The proxy task a candidate is trained on during search."""

    dataset: str = "digits"
    epochs: int = 4
    num_cells: int = 1
    filters: int = 8
    batch_size: int = 64
    learning_rate: float = 0.1
    momentum: float = 0.9
    seed: int = 0
    timeout_s: float = 900.0  # a candidate still training after this fails; 0: no limit
    threads: int = 0  # TensorFlow intra/inter-op threads; 0: TensorFlow's default

    def __post_init__(self) -> None:
        positive = {"epochs": self.epochs, "num_cells": self.num_cells, "filters": self.filters,
                    "batch_size": self.batch_size, "learning_rate": self.learning_rate}
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"proxy {name}: must be positive, got {value}")
        if self.dataset not in BUILTIN_DATASETS:
            raise ValueError(f"proxy dataset: unknown {self.dataset!r}; built-in: {list(BUILTIN_DATASETS)}")
        if self.timeout_s < 0 or self.threads < 0:
            raise ValueError("proxy timeout_s and threads must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
