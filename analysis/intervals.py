"""Confidence intervals over a group's repetitions, a survival estimate for censored recoveries,
whether two groups' intervals separate, and how many repetitions would separate them.

The method (docs/metrics.md, "Intervals over repetitions"): a two-sided 95 % Student t interval
for the mean over the counted runs, clipped at 0 for figures that cannot be negative. A group
with a censored recovery gets no interval for its mean recovery (an unseen value may be
arbitrarily large); it gets the Kaplan-Meier median instead, itself a lower bound when the
estimated share still unrecovered never falls to one half. A figure some run did not observe
gets no interval at all: a mean over the others would lean towards the runs that showed it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

LEVEL = 0.95
# Two-sided 95 % quantiles of Student's t, t(0.975; df), for df = 1..30.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
# Past the table, a Cornish-Fisher expansion around the normal quantile (error under 0.001).
_Z975 = statistics.NormalDist().inv_cdf(0.975)
# The largest number of repetitions a suggestion searches; beyond it the difference is too small
# for the spread to be worth repeating for.
MAX_REPETITIONS = 100


def t_critical(df: int) -> float:
    """t(0.975; df): the half-width of a 95 % interval in standard errors."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, not {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class Interval:
    """A group's estimate of one figure: the mean and its 95 % interval (low and high None with
    fewer than two values), or, for a censored recovery, the Kaplan-Meier median."""

    estimate: float
    low: float | None
    high: float | None
    n: int
    # Runs whose value is a lower bound (a recovery the run did not show).
    censored: int = 0
    # The estimate itself is a lower bound (a Kaplan-Meier median not reached in the runs).
    at_least: bool = False
    # Runs that did not observe the figure at all (no estimate is given then).
    unobserved: int = 0

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def text(self, digits: int = 1, scale: float = 1.0, unit: str = "") -> str:
        """`12.3 [10.1, 14.5]`; `12.3 (n=1, no interval)`; for a censored recovery
        `median 92.0 (Kaplan-Meier, 1 of 3 censored, no interval)`. `unit` follows each number
        (` %`)."""
        if self.unobserved:
            return f"no interval: {self.unobserved} of {self.n} runs did not observe it"
        value = f"{self.estimate * scale:.{digits}f}{unit}"
        if self.censored:
            bound = ">= " if self.at_least else ""
            return (
                f"median {bound}{value} (Kaplan-Meier, {self.censored} of {self.n} censored, "
                "no interval)"
            )
        if not self.has_interval:
            return f"{value} (n={self.n}, no interval)"
        assert self.low is not None and self.high is not None
        low, high = self.low * scale, self.high * scale
        return f"{value} [{low:.{digits}f}{unit}, {high:.{digits}f}{unit}]"


def mean_interval(values: Sequence[float], floor: float | None = 0.0) -> Interval | None:
    """The mean and its two-sided 95 % t interval; None without values; no interval for one.
    The low end is raised to `floor` (None: not clipped) for a figure that cannot be lower."""
    if not values:
        return None
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return Interval(mean, None, None, n)
    half = t_critical(n - 1) * statistics.stdev(values) / math.sqrt(n)
    low = mean - half
    if floor is not None:
        low = max(low, floor)
    return Interval(mean, low, mean + half, n)


def kaplan_meier_median(points: Sequence[tuple[float, bool]]) -> tuple[float, bool] | None:
    """The Kaplan-Meier median of (time, censored) points: the first event time at which the
    estimated share still unrecovered falls to one half or below, and False; when it never
    does, the largest time of the points and True (the median is at least that). An event and
    a censoring at the same time: the event first, as usual. None without points."""
    if not points:
        return None
    ordered = sorted(points, key=lambda point: (point[0], point[1]))
    at_risk, surviving = len(ordered), 1.0
    for time, censored in ordered:
        if not censored:
            surviving *= (at_risk - 1) / at_risk
            if surviving <= 0.5:
                return time, False
        at_risk -= 1
    return ordered[-1][0], True


def unobserved_interval(n: int, unobserved: int) -> Interval:
    """No estimate for a group in which `unobserved` of its n runs did not observe the figure."""
    return Interval(math.nan, None, None, n, unobserved=unobserved)


def recovery_interval(points: Sequence[tuple[float, bool]]) -> Interval | None:
    """A group's recovery from its runs' (value or lower bound, censored) points: the mean and
    its t interval when no run was censored, else the Kaplan-Meier median."""
    if not points:
        return None
    censored = sum(1 for _, c in points if c)
    if not censored:
        return mean_interval([value for value, _ in points])
    median = kaplan_meier_median(points)
    assert median is not None
    value, at_least = median
    return Interval(value, None, None, len(points), censored=censored, at_least=at_least)


def separation(first: Interval | None, second: Interval | None) -> str:
    """Whether two groups' intervals separate: `separate`, `overlap`, or why it cannot be said
    (a group without an interval, or a censored recovery)."""
    if first is None or second is None:
        return "not comparable: a group has no value"
    if first.censored or second.censored:
        return "not judged: a censored recovery has no interval"
    if first.unobserved or second.unobserved:
        return "not judged: a run did not observe it"
    if not (first.has_interval and second.has_interval):
        return "not judged: a group of one run has no interval"
    assert first.low is not None and first.high is not None
    assert second.low is not None and second.high is not None
    if first.high < second.low or second.high < first.low:
        return "separate"
    return "overlap"


def repetitions_to_separate(first: Sequence[float], second: Sequence[float]) -> int | None:
    """The smallest number of repetitions per group at which two intervals with the groups'
    observed means and standard deviations would no longer overlap (half-widths
    t(n-1) * s1 / sqrt(n) and t(n-1) * s2 / sqrt(n), so t(n-1) * (s1 + s2) / sqrt(n) < the
    difference of the means). None when it cannot be projected (a group of fewer than two,
    equal means) or needs more than MAX_REPETITIONS."""
    if len(first) < 2 or len(second) < 2:
        return None
    difference = abs(statistics.fmean(first) - statistics.fmean(second))
    if difference == 0:
        return None
    spread = statistics.stdev(first) + statistics.stdev(second)
    for n in range(2, MAX_REPETITIONS + 1):
        if t_critical(n - 1) * spread / math.sqrt(n) < difference:
            return n
    return None
