"""Flink's own account of a run: what the experiment fetched from its JobManager into engine/
(flink-*.json, docs/results.md), as summary.json's engine_evidence.flink, the engine timeline's
events and the report's rows."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from analysis.engine import ENGINE_DIR, dig, number_or_none, on_driver_clock, role_offset
from analysis.io import read_optional_json
from analysis.report import count, number

MS_PER_S = 1000

NAME = "flink"
# The setting that bounds what a failure replays, for runs whose run.json does not name it
# (setting_roles); its engine.yml marks the same one replay_bound.
REPLAY_BOUND = "checkpoint_interval_s"
# The inventory group of the host whose clock stamps the JobManager's events.
COORDINATOR_GROUP = "flink_jobmanager"
# Root exceptions a JobManager keeps per job when web.exception-history-size is not set.
FLINK_EXCEPTION_HISTORY_DEFAULT = 16


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


def evidence(engine: Path) -> dict[str, Any] | None:
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


def events(engine: Path, run: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Checkpoints, failures and job state changes, on the driver clock."""
    offset = role_offset(run, COORDINATOR_GROUP)
    checkpoints = read_optional_json(engine / "flink-checkpoints.json")
    for entry in dig(checkpoints, "history") or []:
        if not isinstance(entry, dict):
            continue
        at = on_driver_clock(entry.get("trigger_timestamp"), offset)
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
        at = on_driver_clock(entry.get("timestamp"), offset)
        if at is not None:
            where = entry.get("taskName") or entry.get("endpoint") or ""
            yield {
                "t_ms": at,
                "source": "flink-exceptions",
                "event": f"failure {entry.get('exceptionName')} {where}".strip(),
            }
    job = read_optional_json(engine / "flink-job.json")
    for state, stamp in (dig(job, "timestamps") or {}).items():
        at = on_driver_clock(stamp, offset)
        if at is not None:
            yield {"t_ms": at, "source": "flink-job", "event": f"job {state}"}


def _completed_at(entry: dict[str, Any]) -> int | float | None:
    """When a completed checkpoint completed (JobManager clock): its latest acknowledgement,
    else its trigger time plus its end-to-end duration."""
    ack = number_or_none(entry.get("latest_ack_timestamp"))
    if ack is not None and ack > 0:
        return ack
    trigger = number_or_none(entry.get("trigger_timestamp"))
    duration = number_or_none(entry.get("end_to_end_duration"))
    if trigger is not None and trigger > 0 and duration is not None:
        return trigger + duration
    return None


def checkpoint_age(
    run_dir: Path, run: dict[str, Any], start_ms: int
) -> tuple[float | None, str | None]:
    """Seconds from the last checkpoint completed before start_ms to start_ms, and a note when
    it is unknown (None for an exact age); none for a job that ran at most once, without
    checkpoints.

    From engine/flink-checkpoints.json (/jobs/<id>/checkpoints, fetched after the drain): its
    `history` (the newest checkpoints, web.checkpoints.history of them, 10 by default) and
    `latest.completed`. Times are the JobManager's, put on the driver's clock with its clock
    offset. The history is the newest checkpoints by id, so when any completed entry it holds
    completed before the fault, the last of them is the last before the fault. When none did,
    the age is known only if the history holds every checkpoint the job took (no checkpoint
    had completed before the fault); otherwise an older one may have been pushed out.
    """
    if (run.get("settings") or {}).get("checkpointing_mode") == "none":
        return None, "no checkpoints: the job ran at most once"
    document = read_optional_json(run_dir / ENGINE_DIR / "flink-checkpoints.json")
    if not isinstance(document, dict):
        return None, "no engine/flink-checkpoints.json"
    offset = role_offset(run, COORDINATOR_GROUP)
    history = [e for e in document.get("history") or [] if isinstance(e, dict)]
    latest = (document.get("latest") or {}).get("completed")
    completed = [e for e in history if str(e.get("status")).upper() == "COMPLETED"]
    if isinstance(latest, dict):
        completed.append(latest)
    times = [t - offset for e in completed if (t := _completed_at(e)) is not None]
    before = [t for t in times if t <= start_ms]
    if before:
        return round((start_ms - max(before)) / MS_PER_S, 3), None
    counts = document.get("counts") or {}
    total = number_or_none(counts.get("total"))
    ids = [i for e in history if (i := number_or_none(e.get("id"))) is not None]
    if total is not None and len(history) >= total:
        return None, "no checkpoint had completed before the fault"
    if ids and min(ids) <= 1:
        return None, "no checkpoint had completed before the fault"
    return None, (
        "the checkpoint history kept no checkpoint completed before the fault (older "
        "checkpoints were pushed out of it: web.checkpoints.history)"
    )


def report_rows(flink: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    checkpoints = flink.get("checkpoints") or {}
    if checkpoints:
        rows.append(
            [
                "Flink checkpoints",
                f"{count(checkpoints.get('completed'))} completed, "
                f"{count(checkpoints.get('failed'))} failed, "
                f"{count(checkpoints.get('restored'))} restored",
            ]
        )
        duration = checkpoints.get("duration_ms") or {}
        rows.append(
            [
                "Flink checkpoint duration",
                f"p50 {number(duration.get('p50'))} ms, max {number(duration.get('max'))} ms",
            ]
        )
        size = checkpoints.get("size_bytes") or {}
        rows.append(
            [
                "Flink checkpoint size",
                f"last {count(size.get('last'))} B, max {count(size.get('max'))} B",
            ]
        )
    if "checkpoint_interval_ms" in flink:
        interval = number(flink["checkpoint_interval_ms"])
        rows.append(
            ["Flink checkpoint interval", f"{interval} ms ({flink.get('checkpoint_mode')})"]
        )
    if "restarts" in flink:
        more = (
            " (at least: Flink's exception history was full or cut)"
            if flink.get("restarts_truncated")
            else ""
        )
        rows.append(["Flink restarts (failures)", f"{flink['restarts']}{more}"])
    return rows
