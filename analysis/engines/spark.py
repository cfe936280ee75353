"""Spark's own account of a run: the query's progress reports the driver kept
(engine/spark-progress.jsonl) and its settings (engine/spark-job.json), docs/results.md, as
summary.json's engine_evidence.spark and the report's rows. Its timeline is engine/timeline.jsonl,
read by analysis.engine for any engine."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from analysis.engine import on_driver_clock, role_offset
from analysis.io import read_optional_json, read_optional_jsonl
from analysis.report import count, number

NAME = "spark"
# The setting that bounds what a failure replays, for runs whose run.json does not name it
# (setting_roles); its engine.yml marks the same one replay_bound.
REPLAY_BOUND = "spark_trigger_interval_ms"
# The driver runs on the master host: its clock stamps the progress reports.
COORDINATOR_GROUP = "spark_master"


def _lines(engine: Path) -> list[dict[str, Any]]:
    return read_optional_jsonl(engine / "spark-progress.jsonl") or []


def _durations(lines: list[dict[str, Any]]) -> list[float]:
    """Each progress report's batch duration (triggerExecution), sorted."""
    return sorted(
        float(line["progress"]["durationMs"]["triggerExecution"])
        for line in lines
        if line.get("event") == "progress"
        and isinstance(line.get("progress"), dict)
        and isinstance(line["progress"].get("durationMs"), dict)
        and line["progress"]["durationMs"].get("triggerExecution") is not None
    )


def _progress(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        line["progress"]
        for line in lines
        if line.get("event") == "progress" and isinstance(line.get("progress"), dict)
    ]


def evidence(engine: Path) -> dict[str, Any] | None:
    lines = _lines(engine)
    if not lines and read_optional_json(engine / "spark-job.json") is None:
        return None
    reports = _progress(lines)
    durations = _durations(lines)
    rows = [int(p.get("numInputRows") or 0) for p in reports]
    batches = {p.get("batchId") for p in reports if p.get("batchId") is not None}
    return {
        "batches": len(batches),
        "input_rows": sum(rows),
        "batch_ms_median": durations[len(durations) // 2] if durations else None,
        "batch_ms_max": max(durations) if durations else None,
        "commits": sum(1 for line in lines if line.get("event") == "committed"),
        "commit_errors": sum(1 for line in lines if line.get("event") == "commit_error"),
        "restarts": sum(1 for line in lines if line.get("event") == "restart"),
        "terminated_with": next(
            (line.get("exception") for line in lines if line.get("event") == "terminated"), None
        ),
    }


def events(engine: Path, run: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Batches that took longer than twice the median, and the query's start and end, on the
    driver clock."""
    offset = role_offset(run, COORDINATOR_GROUP)
    lines = _lines(engine)
    durations = _durations(lines)
    median = durations[len(durations) // 2] if durations else 0.0
    for line in lines:
        at = on_driver_clock(line.get("t_ms"), offset)
        if at is None:
            continue
        event = line.get("event")
        if event == "progress":
            progress = line.get("progress") or {}
            took = float((progress.get("durationMs") or {}).get("triggerExecution") or 0)
            if median and took > 2 * median:
                yield {
                    "t_ms": at,
                    "source": "spark-progress",
                    "event": f"batch {progress.get('batchId')} took {took:.0f} ms "
                    f"({progress.get('numInputRows')} rows)",
                }
        elif event in ("started", "terminated"):
            yield {"t_ms": at, "source": "spark-progress", "event": f"query {event}"}
        elif event == "restart":
            yield {"t_ms": at, "source": "spark-progress", "event": "query failed, started again"}


def report_rows(spark: dict[str, Any]) -> list[list[str]]:
    rows = [
        [
            "Spark batches",
            f"{count(spark.get('batches'))} batches, {count(spark.get('input_rows'))} input rows "
            "(a batch a restarted query runs again counts again)",
        ],
        [
            "Spark batch duration",
            f"median {number(spark.get('batch_ms_median'))} ms, "
            f"max {number(spark.get('batch_ms_max'))} ms",
        ],
    ]
    if spark.get("restarts"):
        rows.append(["Spark query restarts", count(spark.get("restarts"))])
    if spark.get("commit_errors"):
        rows.append(["Spark offset commits failed", count(spark.get("commit_errors"))])
    if spark.get("terminated_with"):
        rows.append(["Spark query ended with", str(spark.get("terminated_with"))[:200]])
    return rows
