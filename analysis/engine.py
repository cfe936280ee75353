"""The engine's own account of a run (engine/ in docs/results.md), used when present.

Nothing here is required: a run directory without engine/ (or with other files in it) gets
an empty evidence section. Engine timestamps come from the engine hosts' clocks and are put on
the driver's clock with run.json's clock offsets (driver_ms = host_ms - clock_offset_ms).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from analysis import engines
from analysis.io import read_optional_jsonl

ENGINE_DIR = "engine"
# The timeline around a fault: from shortly before it to the end of the stall window.
TIMELINE_BEFORE_MS = 10_000
TIMELINE_AFTER_MS = 120_000
TIMELINE_LIMIT = 60
TIME_KEYS = ("t_ms", "time_ms", "ts_ms", "timestamp_ms", "at_ms", "timestamp")


def number_or_none(value: Any) -> int | float | None:
    """The value when it is an int or a float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def clock_offsets(run: dict[str, Any]) -> dict[str, float]:
    """Host name -> clock offset from the driver (ms), from run.json's hosts."""
    offsets: dict[str, float] = {}
    for host in run.get("hosts") or []:
        if isinstance(host, dict) and isinstance(host.get("name"), str):
            offset = number_or_none(host.get("clock_offset_ms"))
            if offset is not None:
                offsets[host["name"]] = offset
    return offsets


def role_offset(run: dict[str, Any], role: str) -> float:
    """The clock offset of the (first) host in an inventory group, 0 when unknown."""
    offsets = clock_offsets(run)
    for host in run.get("hosts") or []:
        if isinstance(host, dict) and role in (host.get("roles") or []):
            return offsets.get(host.get("name"), 0.0)
    return 0.0


def on_driver_clock(host_ms: Any, offset: float) -> int | None:
    value = number_or_none(host_ms)
    if value is None or value <= 0:
        return None
    return round(value - offset)


def evidence(run_dir: Path) -> dict[str, Any]:
    """What the engine reported, by engine (analysis/engines/); {} when engine/ holds nothing
    an engine module knows."""
    engine = run_dir / ENGINE_DIR
    found: dict[str, Any] = {}
    for module in engines.modules():
        result = module.evidence(engine)
        if result is not None:
            found[module.NAME] = result
    return found


def _row_time(row: dict[str, Any]) -> Any:
    for key in TIME_KEYS:
        if number_or_none(row.get(key)) is not None:
            return row[key]
    return None


def _timeline_events(engine: Path, offsets: dict[str, float]) -> Iterable[dict[str, Any]]:
    """engine/timeline.jsonl: any objects with a time (t_ms, time_ms, ...) and maybe a host."""
    for row in read_optional_jsonl(engine / "timeline.jsonl") or []:
        at = on_driver_clock(_row_time(row), offsets.get(str(row.get("host")), 0.0))
        if at is not None:
            rest = {k: v for k, v in row.items() if k not in TIME_KEYS}
            yield {"t_ms": at, "source": "timeline", "event": rest}


def _lag_around(engine: Path, start_ms: int) -> dict[str, Any] | None:
    """The consumer-group lag samples (driver clock) from the fault to the window's end."""
    rows = read_optional_jsonl(engine / "lag.jsonl")
    if rows is None:  # the collector was killed: its samples so far
        rows = read_optional_jsonl(engine / "lag.jsonl.part")
    if not rows:
        return None
    before = [r for r in rows if number_or_none(r.get("t_ms")) is not None and r["t_ms"] < start_ms]
    inside = [
        r
        for r in rows
        if number_or_none(r.get("t_ms")) is not None
        and start_ms <= r["t_ms"] <= start_ms + TIMELINE_AFTER_MS
    ]
    lags = [r["lag"] for r in inside if number_or_none(r.get("lag")) is not None]
    backlogs = [r["backlog"] for r in inside if number_or_none(r.get("backlog")) is not None]
    return {
        "samples": len(inside),
        "lag_before": before[-1].get("lag") if before else None,
        "max_lag": max(lags) if lags else None,
        "max_backlog": max(backlogs) if backlogs else None,
    }


def engine_health(
    rows: list[dict[str, Any]], offsets: dict[str, float], start_ms: int
) -> dict[str, Any] | None:
    """When the engine itself said it was unwell after a fault, and when it said it ran again.

    From the `healthy` flag of engine/timeline.jsonl (docs/results.md): the first sample at or
    after start_ms that is not healthy, then the first healthy one after it. None without a
    timeline that has the flag.
    """
    samples = []
    for row in rows:
        at = on_driver_clock(_row_time(row), offsets.get(str(row.get("host")), 0.0))
        if at is not None and isinstance(row.get("healthy"), bool):
            samples.append((at, row["healthy"]))
    if not samples:
        return None
    samples.sort()
    after = [(at, ok) for at, ok in samples if at >= start_ms]
    unwell = next((at for at, ok in after if not ok), None)
    back = next((at for at, ok in after if ok and unwell is not None and at > unwell), None)
    return {
        "unhealthy_from_ms": unwell,
        "healthy_again_ms": back,
        "engine_recovery_s": None if back is None else (back - start_ms) / 1000,
        "last_sample_ms": samples[-1][0],
    }


def timelines(run_dir: Path, run: dict[str, Any], starts: list[int]) -> list[dict[str, Any]]:
    """For each fault start: the engine's events from 10 s before to 120 s after it, and the
    consumer-group lag in that window (when engine/lag.jsonl is there)."""
    engine = run_dir / ENGINE_DIR
    if not engine.is_dir():
        return [{} for _ in starts]
    events = [
        *(event for module in engines.modules() for event in module.events(engine, run)),
        *_timeline_events(engine, clock_offsets(run)),
    ]
    events.sort(key=lambda e: e["t_ms"])
    timeline_rows = read_optional_jsonl(engine / "timeline.jsonl") or []
    found = []
    for start in starts:
        near = [
            {**e, "offset_s": (e["t_ms"] - start) / 1000}
            for e in events
            if start - TIMELINE_BEFORE_MS <= e["t_ms"] <= start + TIMELINE_AFTER_MS
        ]
        entry: dict[str, Any] = {}
        if near:
            entry["events"] = near[:TIMELINE_LIMIT]
            entry["events_truncated"] = len(near) > TIMELINE_LIMIT
        lag = _lag_around(engine, start)
        if lag is not None:
            entry["lag"] = lag
        health = engine_health(timeline_rows, clock_offsets(run), start)
        if health is not None:
            entry["health"] = health
        found.append(entry)
    return found
