"""A least-squares line and its slope's 95 % interval, with the Student's t table it needs.

Standard library only, and no import of the kit's packages: the same file is the analysis
package's analysis/linefit.py (a symbolic link), and each package is shipped to its hosts alone
(the producer to the driver host, the analysis to the Spark hosts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["LineFit", "fit_line", "t_quantile_975"]


@dataclass(frozen=True)
class LineFit:
    """The least-squares line through n (x, y) points: its slope and the slope's standard
    error (from the residuals, n - 2 degrees of freedom; 0 when the points lie on the line)."""

    slope: float
    standard_error: float
    points: int

    def interval(self) -> tuple[float, float]:
        """The slope's 95 % confidence interval (two-sided, Student's t with n - 2 degrees of
        freedom). It assumes independent scatter around the line. Lag samples only approximate
        that: where the backlog's scatter is positively autocorrelated (a saw-tooth slower than
        the sampling) the true interval is wider, so a verdict is less certain than 95 %."""
        margin = t_quantile_975(self.points - 2) * self.standard_error
        return self.slope - margin, self.slope + margin


def fit_line(points: Sequence[tuple[float, float]]) -> LineFit | None:
    """Least-squares line through (x, y) points; None with fewer than 3 points (no scatter
    to estimate) or if x does not vary."""
    n = len(points)
    if n < 3:
        return None
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    intercept = mean_y - slope * mean_x
    residuals = sum((y - intercept - slope * x) ** 2 for x, y in points)
    return LineFit(slope, math.sqrt(residuals / (n - 2) / spread), n)


# Student's t, 97.5th percentile, by degrees of freedom (any table of the t distribution).
# Between rows the next smaller tabulated degrees of freedom is used: a wider interval.
_T_975 = {
    **dict(
        enumerate(
            (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
            + (2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086)
            + (2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042),
            start=1,
        )
    ),
    40: 2.021,
    60: 2.000,
    120: 1.980,
}


def t_quantile_975(degrees_of_freedom: int) -> float:
    """Beyond 120 degrees of freedom the 120 row (1.980 against the normal's 1.960): still
    never narrower than the true interval."""
    if degrees_of_freedom < 1:
        raise ValueError(f"Student's t needs 1 degree of freedom or more, not {degrees_of_freedom}")
    return _T_975[max(df for df in _T_975 if df <= degrees_of_freedom)]
