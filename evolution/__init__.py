"""Search algorithms (ask/tell, journal, resume, multi-fidelity rungs). Pure Python: no TensorFlow;
Ray only in `evolution.tune_searcher`; of our packages, only searchspace.

records (Trial, Outcome) -> params (each algorithm's own parameters) -> proposal (tournament, top-1
by a ranking, mutate) -> base + fidelity (bookkeeping, rungs, the pick) -> algorithms (the classes,
ALGORITHMS) -> replay (resume). rungs: Rungs and RUNG_RULES; objectives: measures, goals, reward,
limits; journal: the file and its lock."""

from evolution.algorithms import (
    ALGORITHMS,
    Outcome,
    ParetoEvolution,
    RandomSearch,
    RegularizedEvolution,
    SearchAlgorithm,
    Trial,
    make_algorithm,
)
from evolution.replay import resume
from evolution.journal import JournalError, JournalLock, JournalLocked
from evolution.objectives import MEASURES, Goal, Limits, MnasReward, parse_goals
from evolution.rungs import CONTINUE, PAUSE, RUNG_RULES, STOP, Rungs

__all__ = [
    "ALGORITHMS",
    "CONTINUE",
    "PAUSE",
    "RUNG_RULES",
    "Goal",
    "Limits",
    "MEASURES",
    "MnasReward",
    "ParetoEvolution",
    "parse_goals",
    "JournalError",
    "JournalLock",
    "JournalLocked",
    "Outcome",
    "RandomSearch",
    "RegularizedEvolution",
    "Rungs",
    "STOP",
    "SearchAlgorithm",
    "Trial",
    "make_algorithm",
    "resume",
]
