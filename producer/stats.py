"""Latency percentiles from a microsecond histogram: constant memory for any number of messages."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

NS_PER_US = 1_000


class MicrosecondHistogram:
    """Counts of durations rounded down to whole microseconds."""

    def __init__(self) -> None:
        self._counts: Counter[int] = Counter()
        self.total = 0

    def add_ns(self, duration_ns: int) -> None:
        self._counts[duration_ns // NS_PER_US] += 1
        self.total += 1

    def percentile_us(self, fraction: float) -> int:
        """Nearest-rank percentile (fraction 0.99 -> p99) in microseconds."""
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        if self.total == 0:
            raise ValueError("percentile of an empty histogram")
        rank = math.ceil(fraction * self.total)
        seen = 0
        for value in sorted(self._counts):
            seen += self._counts[value]
            if seen >= rank:
                return value
        raise AssertionError("unreachable: rank <= total")


def lag_summary_ms(lags_ns: Iterable[int]) -> dict[str, float | None]:
    """p50, p99 and max of lags in milliseconds, to the microsecond (None when there are none)."""
    histogram = MicrosecondHistogram()
    for lag in lags_ns:
        histogram.add_ns(lag)
    if histogram.total == 0:
        return {"p50": None, "p99": None, "max": None}
    return {
        name: histogram.percentile_us(fraction) / 1000
        for name, fraction in (("p50", 0.5), ("p99", 0.99), ("max", 1.0))
    }
