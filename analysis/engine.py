"""The engine's own account of a run (engine/ in docs/results.md), used when present.

Nothing here is required: a run directory without engine/ (or with other files in it) gets
an empty evidence section. Engine timestamps come from the engine hosts' clocks and are put on
the driver's clock with run.json's clock offsets (driver_ms = host_ms - clock_offset_ms).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from analysis.io import read_optional_json, read_optional_jsonl

ENGINE_DIR = "engine"
# The timeline around a fault: from shortly before it to the end of the stall window.
TIMELINE_BEFORE_MS = 10_000
TIMELINE_AFTER_MS = 120_000
TIMELINE_LIMIT = 60
TIME_KEYS = ("t_ms", "time_ms", "ts_ms", "timestamp_ms", "at_ms", "timestamp")
# Root exceptions a JobManager keeps per job when web.exception-history-size is not set.
FLINK_EXCEPTION_HISTORY_DEFAULT = 16


def _number(value: Any) -> int | float | None:
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
            offset = _number(host.get("clock_offset_ms"))
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


def _on_driver_clock(host_ms: Any, offset: float) -> int | None:
    value = _number(host_ms)
    if value is None or value <= 0:
        return None
    return round(value - offset)


def exception_history_size(jobmanager_config: Any) -> int | None:
    """web.exception-history-size as the JobManager reported it (/jobmanager/config, a list of
    {"key", "value"}): Flink's default when it is not set, None without that document."""
    if not isinstance(jobmanager_config, list):
        return None
    for entry in jobmanager_config:
        if isinstance(entry, dict) and entry.get("key") == "web.exception-history-size":
            try:
                return int(entry.get("value"))
            except (TypeError, ValueError):
                return None
    return FLINK_EXCEPTION_HISTORY_DEFAULT


def flink_evidence(engine: Path) -> dict[str, Any] | None:
    checkpoints = read_optional_json(engine / "flink-checkpoints.json")
    config = read_optional_json(engine / "flink-checkpoint-config.json")
    exceptions = read_optional_json(engine / "flink-exceptions.json")
    job = read_optional_json(engine / "flink-job.json")
    if not any(isinstance(d, dict) for d in (checkpoints, config, exceptions, job)):
        return None
    evidence: dict[str, Any] = {}
    if isinstance(checkpoints, dict):
        counts = checkpoints.get("counts") or {}
        summary = checkpoints.get("summary") or {}
        evidence["checkpoints"] = {
            "completed": counts.get("completed"),
            "failed": counts.get("failed"),
            "in_progress": counts.get("in_progress"),
            "restored": counts.get("restored"),
            "duration_ms": {
                "p50": dig(summary, "end_to_end_duration", "p50"),
                "max": dig(summary, "end_to_end_duration", "max"),
            },
            "size_bytes": {
                "last": dig(checkpoints, "latest", "completed", "checkpointed_size"),
                "avg": dig(summary, "checkpointed_size", "avg"),
                "max": dig(summary, "checkpointed_size", "max"),
            },
        }
    if isinstance(config, dict):
        evidence["checkpoint_interval_ms"] = config.get("interval")
        evidence["checkpoint_mode"] = config.get("mode")
    if isinstance(exceptions, dict):
        entries = dig(exceptions, "exceptionHistory", "entries")
        if isinstance(entries, list):
            # A lower bound when the REST handler cut the list (Flink's own flag) or when the
            # JobManager's history was full: it drops the oldest entries beyond its size.
            size = exception_history_size(
                read_optional_json(engine / "flink-jobmanager-config.json")
            )
            cut = bool(dig(exceptions, "exceptionHistory", "truncated"))
            evidence["restarts"] = len(entries)
            evidence["exception_history_size"] = size
            evidence["restarts_truncated"] = cut or (size is not None and len(entries) >= size)
    if isinstance(job, dict):
        evidence["job_state"] = job.get("state")
    return evidence


def storm_evidence(engine: Path) -> dict[str, Any] | None:
    topology = read_optional_json(engine / "storm-topology.json")
    if not isinstance(topology, dict):
        return None
    return {
        "acked": topology.get("spout_acked"),
        "emitted": topology.get("spout_emitted"),
        "failed": topology.get("spout_failed"),
        "complete_latency_ms": topology.get("complete_latency_ms"),
    }


def evidence(run_dir: Path) -> dict[str, Any]:
    """What the engine reported, by engine; {} when engine/ holds nothing known."""
    engine = run_dir / ENGINE_DIR
    found: dict[str, Any] = {}
    for name, read in (("flink", flink_evidence), ("storm", storm_evidence)):
        result = read(engine)
        if result is not None:
            found[name] = result
    return found


def _flink_events(engine: Path, offset: float) -> Iterable[dict[str, Any]]:
    checkpoints = read_optional_json(engine / "flink-checkpoints.json")
    for entry in dig(checkpoints, "history") or []:
        if not isinstance(entry, dict):
            continue
        at = _on_driver_clock(entry.get("trigger_timestamp"), offset)
        if at is not None:
            duration = entry.get("end_to_end_duration")
            yield {
                "t_ms": at,
                "source": "flink-checkpoints",
                "event": f"checkpoint {entry.get('id')} {entry.get('status')} ({duration} ms)",
            }
    exceptions = read_optional_json(engine / "flink-exceptions.json")
    for entry in dig(exceptions, "exceptionHistory", "entries") or []:
        if not isinstance(entry, dict):
            continue
        at = _on_driver_clock(entry.get("timestamp"), offset)
        if at is not None:
            where = entry.get("taskName") or entry.get("endpoint") or ""
            yield {
                "t_ms": at,
                "source": "flink-exceptions",
                "event": f"failure {entry.get('exceptionName')} {where}".strip(),
            }
    job = read_optional_json(engine / "flink-job.json")
    for state, stamp in (dig(job, "timestamps") or {}).items():
        at = _on_driver_clock(stamp, offset)
        if at is not None:
            yield {"t_ms": at, "source": "flink-job", "event": f"job {state}"}


def _row_time(row: dict[str, Any]) -> Any:
    for key in TIME_KEYS:
        if _number(row.get(key)) is not None:
            return row[key]
    return None


def _timeline_events(engine: Path, offsets: dict[str, float]) -> Iterable[dict[str, Any]]:
    """engine/timeline.jsonl: any objects with a time (t_ms, time_ms, ...) and maybe a host."""
    for row in read_optional_jsonl(engine / "timeline.jsonl") or []:
        at = _on_driver_clock(_row_time(row), offsets.get(str(row.get("host")), 0.0))
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
    before = [r for r in rows if _number(r.get("t_ms")) is not None and r["t_ms"] < start_ms]
    inside = [
        r
        for r in rows
        if _number(r.get("t_ms")) is not None
        and start_ms <= r["t_ms"] <= start_ms + TIMELINE_AFTER_MS
    ]
    lags = [r["lag"] for r in inside if _number(r.get("lag")) is not None]
    backlogs = [r["backlog"] for r in inside if _number(r.get("backlog")) is not None]
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
        at = _on_driver_clock(_row_time(row), offsets.get(str(row.get("host")), 0.0))
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
        *_flink_events(engine, role_offset(run, "flink_jobmanager")),
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
