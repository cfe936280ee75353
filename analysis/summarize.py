"""summarize: one run directory -> summary.json, report.md, report.html and plots/.

Order matters for "nothing partial": the cheap checks (run.json, faults.jsonl, which files
exist) run before Spark starts; every line is validated before any figure is computed; the
plots and reports are written next, and summary.json last, atomically.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from analysis import (
    engine,
    engines,
    faults,
    histogram,
    io,
    metrics,
    plots,
    recovery,
    report,
    session,
    steady,
    verdict,
)

SUMMARY = "summary.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class RunInputs:
    """What summarize reads, located and checked before Spark starts."""

    run_dir: Path
    run: dict[str, Any]
    faults: list[dict[str, Any]] | None
    produced: io.LinesFile
    received: io.LinesFile
    warmup_s: float

    @property
    def partial_inputs(self) -> list[str]:
        return [f.path.name for f in (self.produced, self.received) if f.partial]


def prepare(run_dir: Path) -> RunInputs:
    """Locate and check the small inputs; raises io.InputError."""
    if not run_dir.is_dir():
        raise io.InputError(run_dir, "not a directory")
    run = io.read_run(run_dir)
    warmup = (run.get("parameters") or {}).get("warmup_s")
    if warmup is None:
        warmup = 0
    if isinstance(warmup, bool) or not isinstance(warmup, int | float) or warmup < 0:
        raise io.InputError(run_dir / io.RUN_JSON, f"parameters.warmup_s={warmup!r} is not >= 0")
    return RunInputs(
        run_dir=run_dir,
        run=run,
        faults=io.read_faults(run_dir),
        produced=io.locate(run_dir, io.PRODUCED),
        received=io.locate(run_dir, io.RECEIVED),
        warmup_s=warmup,
    )


def _collection_end_ms(inputs: RunInputs) -> int | None:
    """When collecting stopped: the collector's end_ms, else the run's end."""
    summary = io.read_optional_json(inputs.run_dir / "received.summary.json")
    for source in (summary, inputs.run):
        value = source.get("end_ms") if isinstance(source, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _with_evidence(
    entry: dict[str, Any],
    timeline: dict[str, Any],
    samples: list[recovery.BacklogSample],
    duplicates: int,
    rate: float | None,
    inputs: RunInputs,
) -> dict[str, Any]:
    """A fault's entry with what the engine's own samples and the duplicates tell about it."""
    start = entry["start_ms"]
    first_output = entry["first_output_s"]
    output_ms = None if first_output is None else start + round(first_output * metrics.MS_PER_S)
    # An engine that checkpoints says how old its last checkpoint was (analysis/engines/).
    age_of = getattr(engines.module_for(str(inputs.run["engine"])), "checkpoint_age", None)
    age, age_note = age_of(inputs.run_dir, inputs.run, start) if age_of else (None, None)
    details = entry.pop("details")
    entry |= recovery.health_times(timeline, start)
    entry |= recovery.caught_up(samples, start, output_ms)
    entry |= {
        "duplicate_records": duplicates,
        "replayed_s": duplicates / rate if rate else None,
        "checkpoint_age_s": age,
        "checkpoint_age_note": age_note,
        "details": details,
        "engine_timeline": timeline,
    }
    return entry


def _steady_state(
    table: DataFrame,
    totals: metrics.Totals,
    origin: int,
    warmup_from: int,
    starts: list[int],
    samples: list[recovery.BacklogSample],
    rate: float | None,
) -> dict[str, Any]:
    """steady_state, detected over the run before its first fault (or to its end)."""
    if totals.last_intended_ms is None:
        end, received_before = origin, None
    elif starts:
        end = received_before = min(starts)
    else:
        end, received_before = totals.last_intended_ms + 1, None
    windows = steady.window_p50s(table, origin, end, received_before)
    return steady.detect(windows, samples, end, warmup_from, rate)


def compute(spark: SparkSession, inputs: RunInputs) -> tuple[dict[str, Any], plots.PlotData]:
    """Every figure of the run (docs/metrics.md) and the data of its plots."""
    started = time.monotonic()
    produced = io.load(spark, inputs.produced, io.PRODUCED_SCHEMA)
    try:
        received = io.load(spark, inputs.received, io.RECEIVED_SCHEMA)
    except BaseException:
        produced.release()
        raise
    table = metrics.messages(produced.frame, received.frame)
    try:
        totals = metrics.totals(table)
        origin = totals.first_intended_ms
        if origin is None:  # nothing was produced: time counts from the first record
            origin = metrics.received_span(received.frame)[0] or 0
        steady_from = origin + round(inputs.warmup_s * metrics.MS_PER_S)
        latency_counts = (
            metrics.latency_histogram(table, intended_from_ms=steady_from)
            if totals.first_intended_ms is not None
            else []
        )
        latency = histogram.describe(latency_counts)
        latency_parts = (
            {
                name: histogram.describe(counts)
                for name, counts in metrics.latency_part_histograms(table, steady_from).items()
            }
            if totals.first_intended_ms is not None
            else {}
        )
        produced_s = metrics.produced_per_second(table, origin, steady_from)
        delivered_s = metrics.delivered_per_second(table, origin, steady_from)
        records_s = metrics.records_per_second(received.frame, origin)
        first_s = metrics.first_deliveries_per_second(table, origin)
        per_second_latency = metrics.latency_per_second(table, origin)
        collection_end = _collection_end_ms(inputs)
        fault_list = inputs.faults or []
        starts = [fault["start_ms"] for fault in fault_list]
        timelines = engine.timelines(inputs.run_dir, inputs.run, starts)
        # Lost messages never reach the result topic: left out of the backlog, or a run that
        # lost any would never be seen to catch up.
        samples = recovery.without_lost(
            recovery.lag_samples(inputs.run_dir), metrics.lost_sent_ms(table)
        )
        rate, rate_source = recovery.input_rate(
            inputs.run, totals.produced, totals.first_intended_ms, totals.last_intended_ms
        )
        duplicates_before, duplicates_per_fault = faults.duplicates_by_fault(received.frame, starts)
        fault_entries = []
        for fault, timeline, duplicates in zip(
            fault_list, timelines, duplicates_per_fault, strict=True
        ):
            entry = faults.fault_figures(
                spark,
                table,
                received.frame,
                fault,
                totals.last_intended_ms,
                collection_end,
                has_partitions=totals.with_partition > 0,
            )
            fault_entries.append(_with_evidence(entry, timeline, samples, duplicates, rate, inputs))
        steady_state = _steady_state(table, totals, origin, steady_from, starts, samples, rate)
        latency_phases = steady.phases(
            table, steady_state["from_ms"], fault_entries, totals.last_intended_ms
        )
    finally:
        table.unpersist()
        produced.release()
        received.release()

    malformed = received.null_msg_ids
    duplicate_records = received.lines - malformed - totals.received_unique
    summary: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "run_id": inputs.run["run_id"],
        "engine": inputs.run["engine"],
        "fault": inputs.run.get("fault"),
        "status": inputs.run.get("status"),
        "parameters": inputs.run.get("parameters") or {},
        "inputs": {
            "produced": inputs.produced.path.name,
            "received": inputs.received.path.name,
            "faults": io.FAULTS if inputs.faults is not None else None,
        },
        "partial_inputs": inputs.partial_inputs,
        "produced_lines": produced.lines,
        "produced": totals.produced,
        "unacked": totals.unacked,
        "repeated_produced_lines": totals.repeated_produced_lines,
        "received_records": received.lines,
        "received_unique": totals.received_unique,
        "malformed_records": malformed,
        "lost": totals.lost,
        "loss_rate": _ratio(totals.lost, totals.produced),
        "lost_where": metrics.lost_where(table),
        "duplicate_records": duplicate_records,
        "duplicate_rate": _ratio(duplicate_records, totals.produced),
        "duplicates_before_faults": duplicates_before if fault_entries else duplicate_records,
        "input_rate_per_s": rate,
        "input_rate_source": rate_source,
        "duplicated_messages": totals.duplicated_messages,
        "duplicated_messages_rate": _ratio(totals.duplicated_messages, totals.produced),
        "unacked_received": totals.unacked_received,
        "received_not_produced": totals.received_not_produced,
        "verdict": verdict.verdict(
            verdict.run_guarantee(inputs.run), totals.produced, totals.lost, duplicate_records
        ),
        "first_intended_ms": totals.first_intended_ms,
        "last_intended_ms": totals.last_intended_ms,
        "warmup_s": inputs.warmup_s,
        "steady_from_ms": steady_from,
        "latency_ms": latency,
        "latency_parts_ms": latency_parts,
        "steady_state": steady_state,
        "latency_phases": latency_phases,
        "throughput": {
            "produced_per_s": produced_s.describe(),
            "received_per_s": delivered_s.describe(),
        },
        "collection_end_ms": collection_end,
        "faults": fault_entries,
        "engine_evidence": engine.evidence(inputs.run_dir),
        "analysis": {
            "master": spark.sparkContext.master,
            "spark_version": spark.version,
            "executor_hosts": session.executor_hosts(spark),
            "elapsed_s": round(time.monotonic() - started, 3),
            "generated_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    }
    plot_data = plots.PlotData(
        latency=latency_counts,
        latency_figures=latency,
        warmup_end_s=(steady_from - origin) / metrics.MS_PER_S,
        produced_per_s=produced_s.all,
        delivered_per_s=first_s,
        records_per_s=records_s,
        duplicates_per_s={s: n - first_s.get(s, 0) for s, n in records_s.items()},
        latency_per_s=per_second_latency,
        steady_from_s=(steady_state["from_ms"] - origin) / metrics.MS_PER_S,
        steady_reached=steady_state["reached"],
        faults=[
            plots.FaultSpan(
                f"{entry.get('fault') or 'fault'} {entry.get('host') or ''}".strip(),
                (entry["start_ms"] - origin) / metrics.MS_PER_S,
                (entry["end_ms"] - origin) / metrics.MS_PER_S if entry.get("end_ms") else None,
            )
            for entry in fault_entries
        ],
    )
    return summary, plot_data


def write_outputs(
    run_dir: Path, summary: dict[str, Any], plot_data: plots.PlotData | None
) -> list[Path]:
    """Plots, then the reports, then summary.json (atomically, last)."""
    drawn = plots.draw_all(plot_data, run_dir / plots.PLOTS_DIR) if plot_data else []
    report.write_reports(summary, drawn, run_dir)
    report.write_json(run_dir / SUMMARY, summary)
    return [
        *(run_dir / plots.PLOTS_DIR / name for name, _ in drawn),
        run_dir / "report.md",
        run_dir / "report.html",
        run_dir / SUMMARY,
    ]


def summarize(spark: SparkSession, run_dir: Path, draw: bool = True) -> dict[str, Any]:
    """Analyse one run directory and write its outputs; returns summary.json's content."""
    inputs = prepare(run_dir)
    summary, plot_data = compute(spark, inputs)
    write_outputs(run_dir, summary, plot_data if draw else None)
    return summary
