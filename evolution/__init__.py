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
from evolution.journal import JournalError

__all__ = [
    "ALGORITHMS",
    "JournalError",
    "Outcome",
    "RandomSearch",
    "RegularizedEvolution",
    "SearchAlgorithm",
    "Trial",
    "make_algorithm",
    "resume",
]
