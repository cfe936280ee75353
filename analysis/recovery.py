"""Per-fault recovery figures from the run's small files (docs/metrics.md): when the engine said
it was unwell and well again, when the backlog was back to its level before the fault, the
checkpoint age at the fault, and the input rate that turns duplicates into replayed seconds.

Nothing here reads a record file: these are the engine's samples (engine/timeline.jsonl,
engine/lag.jsonl) and run.json, read in Python.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.engine import ENGINE_DIR
from analysis.io import read_optional_jsonl

MS_PER_S = 1000
# The backlog's level before a fault: the largest backlog sampled in this window before it.
BACKLOG_BEFORE_MS = 30_000


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _seconds_from(start_ms: int, at_ms: int | None) -> float | None:
    return None if at_ms is None else (at_ms - start_ms) / MS_PER_S


# ---------------------------------------------------------------- the engine's own word


def health_times(timeline: dict[str, Any], start_ms: int) -> dict[str, float | None]:
    """detected_s and engine_whole_s from a fault's engine_timeline.health (analysis/engine.py):
    seconds from start_ms to the first unhealthy sample at or after it, and to the first
    healthy sample after that; None when not observed."""
    health = timeline.get("health") or {}
    return {
        "detected_s": _seconds_from(start_ms, health.get("unhealthy_from_ms")),
        "engine_whole_s": _seconds_from(start_ms, health.get("healthy_again_ms")),
    }


# ---------------------------------------------------------------- backlog


@dataclass(frozen=True)
class BacklogSample:
    t_ms: int
    backlog: int


def lag_samples(run_dir: Path) -> list[BacklogSample]:
    """engine/lag.jsonl's samples that have a time and a backlog (failed samples left out), in
    time order; engine/lag.jsonl.part when the collector was killed; [] without either."""
    engine = run_dir / ENGINE_DIR
    rows = read_optional_jsonl(engine / "lag.jsonl")
    if rows is None:
        rows = read_optional_jsonl(engine / "lag.jsonl.part")
    samples = [
        BacklogSample(int(row["t_ms"]), int(row["backlog"]))
        for row in rows or []
        if _number(row.get("t_ms")) is not None and _number(row.get("backlog")) is not None
    ]
    return sorted(samples, key=lambda sample: sample.t_ms)


def without_lost(samples: list[BacklogSample], lost_sent_ms: list[int]) -> list[BacklogSample]:
    """The samples' backlog less the lost messages sent by then: a lost message is in the input
    topic's end but never reaches the result topic's, so it would keep the backlog up for the
    rest of the run (lost_sent_ms: the send times of the acknowledged ids never received)."""
    lost = sorted(lost_sent_ms)
    return [BacklogSample(s.t_ms, s.backlog - bisect.bisect_right(lost, s.t_ms)) for s in samples]


def caught_up(samples: list[BacklogSample], start_ms: int, from_ms: int | None) -> dict[str, Any]:
    """When the backlog (input end - result end) was back to its level before the fault.

    The level is the largest backlog among the samples in the 30 s before start_ms. Caught up
    is the first sample at or after from_ms (the first output after the outage; start_ms when
    unknown) whose backlog is at or below that level, after the backlog first rose above it
    (at or after start_ms). Censored when it rose and never came back while sampled. All
    None without samples before the fault; caught_up_s None, not censored, when the backlog
    never rose above its level.
    """
    figures: dict[str, Any] = {
        "backlog_before": None,
        "caught_up_s": None,
        "caught_up_at_ms": None,
        "caught_up_censored": None,
    }
    before = [s.backlog for s in samples if start_ms - BACKLOG_BEFORE_MS <= s.t_ms < start_ms]
    if not before:
        return figures
    level = max(before)
    figures["backlog_before"] = level
    rose = next((s for s in samples if s.t_ms >= start_ms and s.backlog > level), None)
    if rose is None:
        figures["caught_up_censored"] = False
        return figures
    since = max(start_ms if from_ms is None else from_ms, start_ms)
    back = next(
        (s for s in samples if s.t_ms > rose.t_ms and s.t_ms >= since and s.backlog <= level),
        None,
    )
    figures["caught_up_censored"] = back is None
    if back is not None:
        figures["caught_up_s"] = (back.t_ms - start_ms) / MS_PER_S
        figures["caught_up_at_ms"] = back.t_ms
    return figures


# ---------------------------------------------------------------- checkpoints


# ---------------------------------------------------------------- input rate


def input_rate(
    run: dict[str, Any], produced: int, first_intended_ms: int | None, last_intended_ms: int | None
) -> tuple[float | None, str | None]:
    """Messages per second of input: run.json parameters.rate when it is a positive number,
    else the acknowledged messages over the producing span (last - first intended_ms), and
    where it came from; (None, None) when neither is known."""
    rate = _number((run.get("parameters") or {}).get("rate"))
    if rate is not None and rate > 0:
        return float(rate), "parameters.rate"
    if first_intended_ms is None or last_intended_ms is None:
        return None, None
    span_s = (last_intended_ms - first_intended_ms) / MS_PER_S
    if span_s <= 0 or produced <= 0:
        return None, None
    return produced / span_s, "produced / producing span"
