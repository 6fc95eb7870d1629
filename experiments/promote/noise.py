"""How far an accuracy measured on a finite evaluation set can be trusted: Wilson's 95% interval for
a top-1 over n images, and the verdict between two such figures.

Two models scored on the SAME images (a promote's, each with its per-image correctness:
core/correct_images.py) are judged by McNemar's exact test (`paired`): only the images one got
right and the other wrong tell them apart, and under "neither is better" each such image is a fair
coin's toss (a two-sided binomial test of b of b + c at 0.5); "within noise" when p >= 0.05. This
is far sharper than overlapping intervals, which ignore that most images are right (or wrong) for
both. Without per-image correctness (a comparison made before it was kept), the fallback is
Wilson's intervals ("within noise" when they overlap). Pure arithmetic: this module must not read
files, train or import TensorFlow.
"""

from __future__ import annotations

import math

import numpy as np

ALPHA = 0.05  # a paired test's p under this picks a winner
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


def paired(a_correct: np.ndarray, b_correct: np.ndarray) -> tuple[float, int, int]:
    """McNemar's exact test of two models' right (True) and wrong on the same images, in the same
    order: (its two-sided p-value, b: the images only `a` got right, c: those only `b` did). p is
    1.0 where no image tells them apart."""
    a, b = np.asarray(a_correct, dtype=bool), np.asarray(b_correct, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"a paired test needs the same images, got {a.size} and {b.size}")
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    if only_a + only_b == 0:
        return 1.0, 0, 0
    from scipy.stats import binomtest

    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue), only_a, only_b


def compared_paired(a_correct: np.ndarray, b_correct: np.ndarray) -> tuple[str, str]:
    """How `a` stands to `b` on the same images, as `compared` words it ("beats", "does not beat",
    or "is within noise of" when McNemar's test gives p >= ALPHA), and the test in words:
    `McNemar's paired test on the same 10,000 images: p 0.039, 10 against 2 images`."""
    p, only_a, only_b = paired(a_correct, b_correct)
    word = "is within noise of" if p >= ALPHA else ("beats" if only_a > only_b else "does not beat")
    return word, (f"McNemar's paired test on the same {len(a_correct):,} images: p {p:.2g}, "
                  f"{only_a:,} against {only_b:,} images")


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
