"""Multi-fidelity: the rungs a trial trains through, and the rule that decides at each rung whether
it goes on: asynchronous successive halving (ASHA, Li et al. 2020) that knows what a rung costs.

At each rung a trial reports its result and the rule answers CONTINUE (train on to the next rung,
from the trial's weights and optimizer state) or STOP. Two conditions, both needed:
- Rank. ASHA continues the top 1/eta of the results reported at a rung so far. A rung that is
  more than one halving above the last (12 -> 200 epochs is 2.6 halvings of eta 3, and its extra
  epochs cost 16 of the lower rung's evaluations) continues only the top (1/eta)^m, with m the
  extra epochs over the (eta - 1) x epochs a geometric ladder adds: 1 for 1, 3, 9; 7.8 for
  12 -> 200, where only the rung's leader goes on, the one trial that can change the pick.
- Cost. The compute spent at a rung stays within 1/eta of what the rung below it has received,
  counted in the cost of each trial's own epochs. A costly top rung thus waits until the search
  has evaluated enough new candidates to pay for it.
Plain ASHA on NAS-Bench-201 with rungs at 12 and 200 epochs spends most of a budget at the top
rung and ends 2 points below plain evolution; this rule stays within noise of it at the NATS-Bench
budget and passes it at four times that budget (benchmarks/README.md, tabular_rungs.py).

Every input of a decision (rung, value, cost) is in the journal with the decision, so a replay
makes the same ones. Pure Python: this module must not import TensorFlow or Ray.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

CONTINUE, STOP = "continue", "stop"


@dataclass(frozen=True)
class Rungs:
    """Epochs at which a trial reports (increasing), and ASHA's reduction factor eta."""

    epochs: tuple[int, ...]
    reduction_factor: float = 3.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epochs", tuple(int(e) for e in self.epochs))
        if not self.epochs or any(e < 1 for e in self.epochs):
            raise ValueError(f"rungs: need positive epochs, got {list(self.epochs)}")
        if any(b <= a for a, b in zip(self.epochs, self.epochs[1:])):
            raise ValueError(f"rungs: epochs must increase, got {list(self.epochs)}")
        if not self.reduction_factor > 1:
            raise ValueError(f"reduction_factor: must be greater than 1, got {self.reduction_factor}")

    def to_config(self) -> dict[str, Any]:
        return {"epochs": list(self.epochs), "reduction_factor": self.reduction_factor}

    @classmethod
    def from_config(cls, config: dict[str, Any] | None) -> "Rungs | None":
        return None if config is None else cls(tuple(config["epochs"]), config["reduction_factor"])

    @property
    def top(self) -> int:
        return len(self.epochs) - 1

    def extra_epochs(self, rung: int) -> int:
        """Epochs from rung `rung` to the next one."""
        return self.epochs[rung + 1] - self.epochs[rung]


def in_top_fraction(sorted_values: list[float], value: float, fraction: float) -> bool:
    """Whether `value` (one of `sorted_values`, ascending, larger is better) is in the top
    `fraction` of them; the best one always is."""
    better = len(sorted_values) - bisect.bisect_right(sorted_values, value)
    return better < max(1, int(len(sorted_values) * fraction))


class Promotions:
    """The decisions at each rung, and what each rung has cost (in the caller's unit: seconds in the
    simulator, epochs x measured seconds per epoch in a search)."""

    def __init__(self, rungs: Rungs) -> None:
        self.rungs = rungs
        self.results: list[list[float]] = [[] for _ in rungs.epochs]  # signed values, ascending
        self.spent = [0.0] * len(rungs.epochs)  # what training up to each rung has cost

    def fraction(self, rung: int) -> float:
        """The share of a rung's results that may go on: 1/eta per halving the next rung is worth."""
        eta = self.rungs.reduction_factor
        halvings = self.rungs.extra_epochs(rung) / ((eta - 1) * self.rungs.epochs[rung])
        return (1 / eta) ** max(1.0, halvings)

    def decide(self, rung: int, value: float, cost_per_epoch: float) -> str:
        """A trial's result `value` (larger is better) at `rung`, whose epochs cost `cost_per_epoch`
        each: CONTINUE or STOP. Records the result and, when it continues, the cost of the next rung."""
        bisect.insort(self.results[rung], value)
        if rung == 0:
            self.spent[0] += self.rungs.epochs[0] * cost_per_epoch
        if rung == self.rungs.top:
            return STOP
        extra = self.rungs.extra_epochs(rung) * cost_per_epoch
        if not in_top_fraction(self.results[rung], value, self.fraction(rung)):
            return STOP
        if self.spent[rung + 1] + extra > self.spent[rung] / self.rungs.reduction_factor:
            return STOP
        self.spent[rung + 1] += extra
        return CONTINUE
