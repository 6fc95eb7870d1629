"""Search algorithms (ask/tell, journal, resume). Pure Python: no TensorFlow; Ray only in
`evolution.tune_searcher`."""

from evolution.algorithms import (
    ALGORITHMS,
    Outcome,
    RandomSearch,
    RegularizedEvolution,
    SearchAlgorithm,
    Trial,
    make_algorithm,
    resume,
)
from evolution.journal import JournalError, JournalLock, JournalLocked

__all__ = [
    "ALGORITHMS",
    "JournalError",
    "JournalLock",
    "JournalLocked",
    "Outcome",
    "RandomSearch",
    "RegularizedEvolution",
    "SearchAlgorithm",
    "Trial",
    "make_algorithm",
    "resume",
]
