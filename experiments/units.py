"""Durations shown in a unit of their size (`42 s`, `3.0 min`, `1.5 h`): for the promote's verdict
and the report's figures alike. Pure Python: must not import TensorFlow, Ray or another module of ours.
"""

from __future__ import annotations

TIME_UNITS = (("s", 1.0), ("min", 60.0), ("h", 3600.0))  # a duration is shown in the largest unit it fills


def time_unit(seconds: float) -> tuple[str, float]:
    """(unit, seconds in it) for showing `seconds`: s under a minute, min under an hour, else h."""
    fits = [unit for unit in TIME_UNITS if seconds >= unit[1]]
    return fits[-1] if fits else TIME_UNITS[0]


def duration(seconds: float) -> str:
    """`42 s`, `3.0 min` or `1.5 h`: not 0.05 hours."""
    unit, size = time_unit(seconds)
    return f"{seconds:.0f} s" if unit == "s" else f"{seconds / size:.1f} {unit}"
