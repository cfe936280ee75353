"""Exact statistics from a value histogram: sorted (value, count) pairs, as Spark returns them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

# The latency percentiles summary.json reports, by name (percent as text, so ranks are exact).
PERCENTILES = (("p50", "50"), ("p90", "90"), ("p99", "99"), ("p99.9", "99.9"))

Histogram = Sequence[tuple[int, int]]


def total(histogram: Histogram) -> int:
    return sum(count for _, count in histogram)


def nearest_rank(histogram: Histogram, percent: str) -> int | None:
    """The smallest value V such that at least percent % of the entries are <= V.

    histogram holds (value, count) pairs in ascending value order; None when it is empty.
    """
    fraction = Fraction(percent) / 100
    if not 0 < fraction <= 1:
        raise ValueError(f"percent must be in (0, 100], got {percent}")
    size = total(histogram)
    if size == 0:
        return None
    rank = math.ceil(fraction * size)
    seen = 0
    for value, count in histogram:
        seen += count
        if seen >= rank:
            return value
    raise AssertionError("unreachable: rank <= size")


def describe(histogram: Histogram) -> dict[str, int | float | None]:
    """count, p50, p90, p99, p99.9, max and mean of the entries (None when there are none)."""
    size = total(histogram)
    result: dict[str, int | float | None] = {"count": size}
    for name, percent in PERCENTILES:
        result[name] = nearest_rank(histogram, percent)
    result["max"] = histogram[-1][0] if size else None
    result["mean"] = sum(value * count for value, count in histogram) / size if size else None
    return result


def cdf(histogram: Histogram) -> list[tuple[int, float]]:
    """(value, fraction of entries <= value) for each distinct value."""
    size = total(histogram)
    points: list[tuple[int, float]] = []
    seen = 0
    for value, count in histogram:
        seen += count
        points.append((value, seen / size))
    return points
