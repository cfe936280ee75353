"""Where a run's steady state starts, and its latency by phase (docs/metrics.md).

A fixed warm-up is not evidence of a steady state: a run whose latency and backlog still fall
after it would report a start-up transient as the engine's steady latency. The start is found
from the run itself: 5 s windows of intended time, each window's exact p50 latency, and the
backlog's trend from engine/lag.jsonl; the warm-up is used only when the run shows it was
enough.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis import histogram
from analysis.linefit import fit_line
from analysis.metrics import MS_PER_S, delivered_acked, latency, latency_histogram
from analysis.recovery import BacklogSample

WINDOW_MS = 5_000
# A window starts the steady state when no later window's p50 is below this share of its own.
P50_FLOOR = 0.8
# ... and at least this many windows (its own included) lie before the end of the detection.
MIN_WINDOWS = 2
# The backlog slope is fitted over at least this many lag samples (as the collector's overload
# flag); it is falling beyond noise when its 95 % interval lies below -threshold, the
# threshold being 1 % of the input rate and never less than 10 msg/s (as the overload flag's).
MIN_SAMPLES = 5
RATE_SHARE = 0.01
MIN_PER_S = 10.0
# After the last recovery message M, the phase starts this much later (recovery_s's hold).
AFTER_RECOVERY_MS = 5_000


@dataclass(frozen=True)
class Window:
    """A 5 s window of intended time and the nearest-rank p50 latency of its messages."""

    from_ms: int
    p50_ms: int
    messages: int


def window_p50s(
    table: DataFrame, origin_ms: int, end_ms: int, received_before_ms: int | None
) -> list[Window]:
    """The 5 s windows [origin + 5 s k, origin + 5 s (k + 1)) cut at end_ms (the last one kept
    when at least half of it lies before end_ms), each with the nearest-rank p50 latency of
    its acknowledged, delivered messages due in it before end_ms (first delivered before
    received_before_ms when given); windows without a message are left out."""
    span = end_ms - origin_ms
    if span < WINDOW_MS // 2:
        return []
    whole, rest = divmod(span, WINDOW_MS)
    kept_until = origin_ms + (whole + (rest >= WINDOW_MS // 2)) * WINDOW_MS
    chosen = table.filter(
        delivered_acked()
        & (F.col("intended_ms") >= origin_ms)
        & (F.col("intended_ms") < min(end_ms, kept_until))
    )
    if received_before_ms is not None:
        chosen = chosen.filter(F.col("first_recv_ms") < received_before_ms)
    index = F.floor((F.col("intended_ms") - origin_ms) / WINDOW_MS).cast("long")
    rows = (
        chosen.select(index.alias("window"), latency().alias("latency"))
        .groupBy("window")
        .agg(
            F.count(F.lit(1)).alias("messages"),
            # percentile_disc is the smallest value whose cumulative share reaches 0.5: the
            # nearest-rank p50, exact.
            F.expr("percentile_disc(0.5) WITHIN GROUP (ORDER BY latency)").alias("p50"),
        )
        .orderBy("window")
        .collect()
    )
    return [
        Window(origin_ms + row["window"] * WINDOW_MS, int(row["p50"]), row["messages"])
        for row in rows
    ]


def backlog_falling(
    samples: Sequence[BacklogSample], from_ms: int, end_ms: int, rate: float | None
) -> bool | None:
    """Whether the backlog falls beyond noise over [from_ms, end_ms): the least-squares slope's
    95 % interval lies below -max(1 % of the rate, 10) msg/s. None with fewer than 5 samples."""
    inside = [s for s in samples if from_ms <= s.t_ms < end_ms]
    if len(inside) < MIN_SAMPLES:
        return None
    fit = fit_line([((s.t_ms - from_ms) / MS_PER_S, s.backlog) for s in inside])
    if fit is None:
        return None
    threshold = max(RATE_SHARE * (rate or 0.0), MIN_PER_S)
    return fit.interval()[1] < -threshold


def detect(
    windows: Sequence[Window],
    samples: Sequence[BacklogSample],
    end_ms: int,
    warmup_from_ms: int,
    rate: float | None,
) -> dict[str, Any]:
    """steady_state: the first window from which no later window's p50 is below 0.8 times its
    own, with at least one later window, and over which (from its start to end_ms) the backlog
    does not fall beyond noise (when there are lag samples). from_ms is that window's start, or
    the warm-up's end when the window starts at or before it; the warm-up's end, with reached
    false, when no window qualifies."""
    detected = None
    backlog_used = False
    for k, window in enumerate(windows):
        later = windows[k + 1 :]
        if len(windows) - k < MIN_WINDOWS:
            break
        if any(other.p50_ms < P50_FLOOR * window.p50_ms for other in later):
            continue
        falling = backlog_falling(samples, window.from_ms, end_ms, rate)
        backlog_used = backlog_used or falling is not None
        if falling:
            continue
        detected = window.from_ms
        break
    backlog = (
        "and the backlog's slope over engine/lag.jsonl"
        if backlog_used
        else "(too few lag samples for the backlog's slope)"
    )
    method = (
        f"{WINDOW_MS // MS_PER_S} s windows of intended time, nearest-rank p50 latency: first "
        f"window no later window is below {P50_FLOOR:g} x of, with a later one, {backlog}; "
        "the warm-up when that window starts at or before its end"
    )
    return {
        "from_ms": max(detected, warmup_from_ms) if detected is not None else warmup_from_ms,
        "detected_from_ms": detected,
        "warmup_from_ms": warmup_from_ms,
        "reached": detected is not None,
        "windows": len(windows),
        "method": method,
    }


def _phase(counts: histogram.Histogram, from_ms: int, to_ms: int) -> dict[str, Any]:
    return {**histogram.describe(counts), "from_ms": from_ms, "to_ms": to_ms}


def phases(
    table: DataFrame,
    steady_from_ms: int,
    fault_entries: Sequence[dict[str, Any]],
    last_intended_ms: int | None,
) -> dict[str, Any]:
    """latency_phases: before_fault (due in [steady start, first fault's start_ms), first
    delivered before it; with no fault, due from the steady start to the end of producing) and
    after_recovery (due from the last fault's recovery message M's intended_ms + 5 s to the end
    of producing; None, with a reason, when that recovery is censored or there is no fault)."""
    if last_intended_ms is None:
        return {
            "before_fault": None,
            "after_recovery": None,
            "after_recovery_reason": "nothing was produced",
        }
    if not fault_entries:
        counts = latency_histogram(table, intended_from_ms=steady_from_ms)
        return {
            "before_fault": _phase(counts, steady_from_ms, last_intended_ms),
            "after_recovery": None,
            "after_recovery_reason": "no fault",
        }
    first = min(entry["start_ms"] for entry in fault_entries)
    counts = latency_histogram(
        table,
        intended_from_ms=steady_from_ms,
        intended_before_ms=first,
        received_before_ms=first,
    )
    before = _phase(counts, steady_from_ms, first)
    last = max(enumerate(fault_entries), key=lambda pair: (pair[1]["start_ms"], pair[0]))[1]
    if last.get("recovery_intended_ms") is None:
        return {
            "before_fault": before,
            "after_recovery": None,
            "after_recovery_reason": (
                "the last fault's recovery is censored: it does not show within the run"
            ),
        }
    after_from = last["recovery_intended_ms"] + AFTER_RECOVERY_MS
    counts = latency_histogram(
        table, intended_from_ms=after_from, intended_before_ms=last_intended_ms + 1
    )
    return {
        "before_fault": before,
        "after_recovery": _phase(counts, after_from, last_intended_ms),
        "after_recovery_reason": None,
    }
