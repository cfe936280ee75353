"""An engine's sustainable rate on the lab's hosts, measured before a study's runs (docs/studies.md,
"Load from capacity"), and the search `bench/engine_figures.py` shares.

A rate is sustainable when a fault-free run of it is complete, cleared by the collector's
overload check, and its steady-state p99 (after the warm-up) is under the stated bound. The
search doubles the rate from its start until a rate fails, then bisects between the highest
rate that passed and the lowest that failed, to a step of 100/s, in at most `runs` runs. With
no rate failed, the highest one that passed is a lower bound of the capacity.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# The collector's own summary of a run (the experiment writes it whatever analyze_on says).
FIRST_SUMMARY = "first-summary.json"
# Defaults of a spec's capacity: mapping (docs/studies.md).
DEFAULT_P99_BOUND_MS = 5000.0
DEFAULT_FROM_RATE = 1000.0
DEFAULT_RUNS = 6
DEFAULT_STEADY_S = 30
DEFAULT_WARMUP_S = 10
STEP = 100.0  # the search's resolution in messages/s
FAILED = "failed"  # the status of a trial whose run left no collector summary


@dataclass(frozen=True)
class CapacitySpec:
    """How a study measures each engine's capacity."""

    p99_bound_ms: float = DEFAULT_P99_BOUND_MS
    from_rate: float = DEFAULT_FROM_RATE
    runs: int = DEFAULT_RUNS
    steady_s: int = DEFAULT_STEADY_S
    warmup_s: int = DEFAULT_WARMUP_S

    def count(self, rate: float) -> int:
        """Messages of a search run: the warm-up plus steady_s of steady state at the rate."""
        return math.ceil(rate * (self.warmup_s + self.steady_s))


@dataclass(frozen=True)
class Trial:
    """One run of the search, as the collector summarised it."""

    run_id: str
    rate: float
    status: str
    overloaded: bool | None
    p50_ms: float | None
    p99_ms: float | None
    send_lag_p99_ms: float | None
    output_per_s: float | None
    wall_s: float

    def sustainable(self, p99_bound_ms: float) -> bool:
        return (
            self.status == "complete"
            and self.overloaded is False
            and self.p99_ms is not None
            and self.p99_ms < p99_bound_ms
        )

    def why_not(self, p99_bound_ms: float) -> str:
        """Why the rate failed the criterion ('' when it passed)."""
        if self.status != "complete":
            return f"the run is {self.status}"
        if self.overloaded is not False:
            return "the collector flagged it overloaded" if self.overloaded else "overload unknown"
        if self.p99_ms is None or self.p99_ms >= p99_bound_ms:
            return f"steady p99 {self.p99_ms} ms is not under {p99_bound_ms:g} ms"
        return ""


@dataclass
class Capacity:
    """The search's answer: the highest rate that passed (None: none did), the lowest that
    failed (None: none did, so `rate` is a lower bound) and every trial."""

    rate: float | None
    lowest_failing: float | None
    trials: list[Trial] = field(default_factory=list)

    @property
    def lower_bound(self) -> bool:
        return self.rate is not None and self.lowest_failing is None

    def as_json(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "lowest_failing": self.lowest_failing,
            "lower_bound": self.lower_bound,
            "trials": [asdict(trial) for trial in self.trials],
        }


def search(measure: Callable[[float], Trial], spec: CapacitySpec) -> Capacity:
    """Double from spec.from_rate until a rate fails, then bisect; at most spec.runs runs."""
    good: float | None = None
    bad: float | None = None
    rate = spec.from_rate
    trials: list[Trial] = []
    for _ in range(spec.runs):
        trial = measure(rate)
        trials.append(trial)
        if trial.sustainable(spec.p99_bound_ms):
            good = rate if good is None else max(good, rate)
        else:
            bad = rate if bad is None else min(bad, rate)
        if bad is None:
            rate *= 2
        elif good is None:
            rate = bad / 2
        else:
            rate = (good + bad) / 2
        rate = max(float(round(rate / STEP) * STEP), STEP)
        if rate in {t.rate for t in trials}:
            break  # the bisection has closed to the search's step
    return Capacity(good, bad, trials)


def trial_from_summary(run_id: str, rate: float, run_dir: Path, wall_s: float) -> Trial:
    """The trial a run left: its collector summary, or a failed trial when it left none."""
    try:
        summary = json.loads((run_dir / FIRST_SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Trial(run_id, rate, FAILED, None, None, None, None, None, round(wall_s, 1))
    latency = summary.get("latency_ms") or {}
    return Trial(
        run_id=run_id,
        rate=rate,
        status=str(summary.get("status")),
        overloaded=(summary.get("overload") or {}).get("overloaded"),
        p50_ms=latency.get("p50"),
        p99_ms=latency.get("p99"),
        send_lag_p99_ms=(summary.get("send_lag_ms") or {}).get("p99"),
        output_per_s=(summary.get("output_rate") or {}).get("messages_per_s"),
        wall_s=round(wall_s, 1),
    )


def rate_at(load: float, capacity: float) -> float:
    """The rate a run at `load` of `capacity` sends at, in whole messages/s (rounded down, so the
    fraction is never above the one asked for)."""
    return float(max(1, math.floor(load * capacity)))


def capacity_text(capacity: Mapping[str, Any]) -> str:
    """'200/s', 'at least 8,000/s' (no rate failed) or 'no rate passed', from a capacity as
    study.json records it."""
    rate = capacity.get("rate")
    if not rate:
        return "no rate passed"
    return f"{'at least ' if capacity.get('lower_bound') else ''}{rate:,.0f}/s"


def fraction_text(rate: float, capacity: dict[str, Any] | None) -> str:
    """'0.50 of 4,000/s', '≤ 0.50 of ≥ 4,000/s' (a lower-bound capacity) or why there is none."""
    if not capacity:
        return "capacity not measured"
    measured = capacity.get("rate")
    if not measured:
        failing = capacity.get("lowest_failing")
        return f"no rate passed (lowest failing {failing:,.0f}/s)" if failing else "no rate passed"
    if capacity.get("lower_bound"):
        return f"≤ {rate / measured:.2f} of ≥ {measured:,.0f}/s"
    return f"{rate / measured:.2f} of {measured:,.0f}/s"
