"""Multi-fidelity: the rungs a trial trains through, and the rules that decide at each rung whether
it goes on: asynchronous successive halving (ASHA, Li et al. 2020) that knows what a rung costs.
`RUNG_RULES` is the table of rules by name (the journal's start event names the one a search uses):

- "stopping" (`Promotions`): at each rung a trial reports its result and the rule answers at once,
  CONTINUE (train on to the next rung, from the trial's weights and optimizer state) or STOP.
- "payoff" (`PayoffPromotions`): the stopping rule that also learns whether the next rung pays. A
  promotion costs k = (extra epochs) / (this rung's epochs) evaluations at this rung. It is bought
  only when the next rung's record of changing the lead, p = (c + 1) / (n + 2) (c of its n results
  after its first left the lead, among the trials that reached both rungs, on a different cell than
  this rung would), times the number of results this rung needed to produce its latest lead change
  (the lead changes per result it buys now) is at least k: where this rung still finds a new
  leader every few results, its results are worth more than a promotion; where the next rung
  keeps agreeing with it, p falls and promotions become rare. No constant is tuned: the prior is
  1 change in 2 results.
- "promotion" (`PausingPromotions`, Syne Tune's ASHA type="promotion"): a trial PAUSEs at each rung
  below the top; when a worker asks for work, the best paused trial goes on (a continuation, same
  trial id, from its rung) as soon as the rung's share allows, else a new trial starts. A rung
  leader that arrives just after a promotion spent the share waits instead of being stopped.

Both promote under the same two conditions, both needed:
- Rank. ASHA continues the top 1/eta of the results reported at a rung so far. A rung that is
  more than one halving above the last (12 -> 200 epochs is 2.6 halvings of eta 3, and its extra
  epochs cost 16 of the lower rung's evaluations) continues only the top (1/eta)^m, with m the
  extra epochs over the (eta - 1) x epochs a geometric ladder adds: 1 for 1, 3, 9; 7.8 for
  12 -> 200, where only the rung's leader goes on, the one trial that can change the pick.
- Cost. The compute spent at a rung stays within 1/eta of what the rung below it has received,
  counted in the cost of each trial's own epochs. A costly top rung thus waits until the search
  has evaluated enough new candidates to pay for it.
Plain ASHA on NAS-Bench-201 with rungs at 12 and 200 epochs spends most of a budget at the top
rung and ends 2 points below plain evolution; the stopping rule stays within noise of it at the
NATS-Bench budget and passes it at four times that budget, but on a table where the top rung never
changes the pick it falls up to 3 standard errors below plain evolution, the payoff rule at most
1.8 (benchmarks/README.md, tabular_rungs.py).

Every input of a decision (rung, value, cost) is in the journal with the decision, so a replay
makes the same ones. Pure Python: this module must not import TensorFlow or Ray.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

CONTINUE, STOP, PAUSE = "continue", "stop", "pause"


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
    """The stopping rule: the decisions at each rung, taken when a trial reports, and what each rung
    has cost (in the caller's unit: seconds in the simulator, epochs x measured seconds per epoch in
    a search)."""

    name = "stopping"
    pauses = False  # whether `decide` may answer PAUSE (the driver must then continue trials)

    def __init__(self, rungs: Rungs) -> None:
        self.rungs = rungs
        self.results: list[list[float]] = [[] for _ in rungs.epochs]  # signed values, ascending
        self.spent = [0.0] * len(rungs.epochs)  # what training up to each rung has cost

    def fraction(self, rung: int) -> float:
        """The share of a rung's results that may go on: 1/eta per halving the next rung is worth."""
        eta = self.rungs.reduction_factor
        halvings = self.rungs.extra_epochs(rung) / ((eta - 1) * self.rungs.epochs[rung])
        return (1 / eta) ** max(1.0, halvings)

    def record(self, rung: int, value: float, cost_per_epoch: float) -> None:
        """Enter a result at `rung` (and, at the first rung, what its epochs cost)."""
        bisect.insort(self.results[rung], value)
        if rung == 0:
            self.spent[0] += self.rungs.epochs[0] * cost_per_epoch

    def may_go_on(self, rung: int, value: float, cost_per_epoch: float) -> bool:
        """Whether a result `value` at `rung` (below the top) is in the rung's share and the next
        rung's cost fits within 1/eta of this rung's spend."""
        extra = self.rungs.extra_epochs(rung) * cost_per_epoch
        return (in_top_fraction(self.results[rung], value, self.fraction(rung))
                and self.spent[rung + 1] + extra <= self.spent[rung] / self.rungs.reduction_factor)

    def spend(self, rung: int, cost_per_epoch: float) -> None:
        """A trial goes on from `rung`: charge the next rung its extra epochs."""
        self.spent[rung + 1] += self.rungs.extra_epochs(rung) * cost_per_epoch

    def decide(self, rung: int, value: float, cost_per_epoch: float, trial_id: int | None = None) -> str:
        """A trial's result `value` (larger is better) at `rung`, whose epochs cost `cost_per_epoch`
        each: CONTINUE or STOP. Records the result and, when it continues, the cost of the next rung."""
        self.record(rung, value, cost_per_epoch)
        if rung == self.rungs.top or not self.may_go_on(rung, value, cost_per_epoch):
            return STOP
        self.spend(rung, cost_per_epoch)
        return CONTINUE

    def promotion(self) -> tuple[int, int] | None:
        """A paused trial to go on now, as (trial id, rung): never, for this rule."""
        return None

    def promote(self, trial_id: int, rung: int) -> None:
        raise ValueError(f"the {self.name} rule pauses no trial; trial {trial_id} cannot go on from rung {rung}")

    def forget(self, trial_id: int) -> None:
        """A trial that will not go on: nothing to forget for this rule."""


class PausingPromotions(Promotions):
    """The promotion rule: a trial pauses at each rung below the top; `promotion()` names the paused
    trial to go on next (the highest rung first, its best result, the earliest trial among equals)
    when that result is in the rung's share and the next rung's cost fits; `promote` charges it."""

    name = "promotion"
    pauses = True

    def __init__(self, rungs: Rungs) -> None:
        super().__init__(rungs)
        self.paused: list[dict[int, tuple[float, float]]] = [{} for _ in rungs.epochs]  # id -> (value, cost)

    def decide(self, rung: int, value: float, cost_per_epoch: float, trial_id: int | None = None) -> str:
        """Records the result; PAUSE below the top rung (the trial waits to be promoted), STOP at it."""
        if trial_id is None:
            raise ValueError("the promotion rule needs the trial's id")
        self.record(rung, value, cost_per_epoch)
        if rung == self.rungs.top:
            return STOP
        self.paused[rung][trial_id] = (value, cost_per_epoch)
        return PAUSE

    def promotion(self) -> tuple[int, int] | None:
        for rung in reversed(range(self.rungs.top)):
            if not self.paused[rung]:
                continue
            trial_id, (value, cost) = max(self.paused[rung].items(), key=lambda item: (item[1][0], -item[0]))
            if self.may_go_on(rung, value, cost):
                return trial_id, rung
        return None

    def promote(self, trial_id: int, rung: int) -> None:
        if trial_id not in self.paused[rung]:
            raise ValueError(f"trial {trial_id} is not paused at rung {rung}")
        _, cost = self.paused[rung].pop(trial_id)
        self.spend(rung, cost)

    def forget(self, trial_id: int) -> None:
        """A paused trial that will not go on (told, failed): no longer a candidate."""
        for waiting in self.paused:
            waiting.pop(trial_id, None)


class PayoffPromotions(Promotions):
    """The payoff rule: the stopping rule's conditions, and a promotion only while the next rung's
    record of changing the lead, per result it costs, is at least this rung's own (module doc)."""

    name = "payoff"

    def __init__(self, rungs: Rungs) -> None:
        super().__init__(rungs)
        self.values: dict[int, list[float]] = {}  # a trial's value at each rung it reached
        self.best = [-math.inf] * len(rungs.epochs)
        self.count = [0] * len(rungs.epochs)  # results at each rung
        self.last_lead = [-1] * len(rungs.epochs)  # the index of each rung's latest lead change
        self.needed = [0] * len(rungs.epochs)  # results the latest result needed to take or share the lead
        self.disagreed = [0] * len(rungs.epochs)  # c: results after which rung r and r - 1 name different leaders
        self.compared = [0] * len(rungs.epochs)  # n: results at rung r with another trial there to compare

    def record(self, rung: int, value: float, cost_per_epoch: float) -> None:
        super().record(rung, value, cost_per_epoch)
        self.needed[rung] = self.count[rung] - self.last_lead[rung]
        if value > self.best[rung]:
            self.best[rung], self.last_lead[rung] = value, self.count[rung]
        self.count[rung] += 1

    def pays(self, rung: int) -> bool:
        """Whether a promotion from `rung` buys at least as many expected lead changes per result as
        the rung's own results do now."""
        changes = (self.disagreed[rung + 1] + 1) / (self.compared[rung + 1] + 2)
        return self.needed[rung] * changes >= self.rungs.extra_epochs(rung) / self.rungs.epochs[rung]

    def may_go_on(self, rung: int, value: float, cost_per_epoch: float) -> bool:
        return super().may_go_on(rung, value, cost_per_epoch) and self.pays(rung)

    def decide(self, rung: int, value: float, cost_per_epoch: float, trial_id: int | None = None) -> str:
        if trial_id is None:
            raise ValueError("the payoff rule needs the trial's id")
        self.values.setdefault(trial_id, []).append(value)
        if rung > 0:
            both = [t for t, v in self.values.items() if len(v) > rung]
            if len(both) > 1:
                lower = max(both, key=lambda t: (self.values[t][rung - 1], -t))
                upper = max(both, key=lambda t: (self.values[t][rung], -t))
                self.compared[rung] += 1
                self.disagreed[rung] += lower != upper
        return super().decide(rung, value, cost_per_epoch, trial_id)


RUNG_RULES: dict[str, type[Promotions]] = {Promotions.name: Promotions, PayoffPromotions.name: PayoffPromotions,
                                           PausingPromotions.name: PausingPromotions}


def rung_rule(name: str | None, rungs: Rungs) -> Promotions:
    """The rule `name` from `RUNG_RULES` for `rungs` (None: the stopping rule, as journals before
    rules had names)."""
    name = name or Promotions.name
    if name not in RUNG_RULES:
        raise ValueError(f"rung_rule: unknown {name!r}; known: {sorted(RUNG_RULES)}")
    return RUNG_RULES[name](rungs)
