"""How far an accuracy measured on a finite evaluation set can be trusted: Wilson's 95% interval for
a top-1 over n images, and the verdict between two such figures ("within noise" when the intervals
overlap). Pure arithmetic: this module must not read files, train or import TensorFlow.
"""

from __future__ import annotations

import math

Z_95 = 1.959964  # the standard normal's 97.5th percentile: a two-sided 95% interval


def wilson_interval(accuracy: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson's score interval for a proportion `accuracy` of `n` trials (Wilson 1927): unlike
    accuracy +- z*SE it stays inside [0, 1] and is honest at small n and near 0 or 1."""
    if n <= 0:
        raise ValueError(f"an interval needs one or more images, got {n}")
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"accuracy: a fraction in [0, 1], got {accuracy}")
    denominator = 1 + z * z / n
    center = (accuracy + z * z / (2 * n)) / denominator
    half = z * math.sqrt(accuracy * (1 - accuracy) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


def shown(accuracy: float, n: int | None) -> str:
    """`0.7420 [0.7334, 0.7504] on 10,000 images`, or the figure alone when n is unknown."""
    if not n:
        return f"{accuracy:.4f}"
    low, high = wilson_interval(accuracy, n)
    return f"{accuracy:.4f} [{low:.4f}, {high:.4f}] on {n:,} images"


def compared(a: float, n_a: int | None, b: float, n_b: int | None) -> str:
    """How `a` stands to `b`: "beats", "does not beat", "ties", or "is within noise of" when both
    sizes are known and the two 95% intervals overlap."""
    if n_a and n_b:
        (low_a, high_a), (low_b, high_b) = wilson_interval(a, n_a), wilson_interval(b, n_b)
        if low_a <= high_b and low_b <= high_a:
            return "is within noise of"
    return "beats" if a > b else ("ties" if a == b else "does not beat")


# A lead in time (or in a cost that is time x a price) smaller than this fraction is within noise:
# airbench94, seed 0, took 1,922 and 2,082 s in two races on one machine, and one net's epochs 245 to
# 285 s in one run (benchmarks/README.md)
TIME_NOISE = 0.10


def time_compared(a: float, b: float) -> str:
    """How a time (or cost) `a` stands to `b`, lower being better: "beats", "does not beat", "ties",
    or "is within noise of" when they differ by under TIME_NOISE of the larger."""
    if a != b and abs(a - b) < TIME_NOISE * max(a, b):
        return "is within noise of"
    return "beats" if a < b else ("ties" if a == b else "does not beat")
