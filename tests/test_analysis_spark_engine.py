"""analysis/engines/spark.py on hand-made driver files: the evidence, the events on the driver
clock and the report rows."""

from __future__ import annotations

import json

from analysis.engines import spark


def progress(batch: int, rows: int, took_ms: int, t_ms: int) -> dict:
    return {
        "t_ms": t_ms,
        "event": "progress",
        "progress": {
            "batchId": batch,
            "numInputRows": rows,
            "durationMs": {"triggerExecution": took_ms, "addBatch": took_ms - 10},
        },
    }


def write(engine, lines):
    engine.mkdir(parents=True, exist_ok=True)
    text = "\n".join(json.dumps(line) for line in lines) + "\n{cut short"
    (engine / "spark-progress.jsonl").write_text(text)


RUN = {
    "hosts": [
        {"name": "node1", "roles": ["spark_master"], "clock_offset_ms": 250.0},
        {"name": "node2", "roles": ["spark_worker"], "clock_offset_ms": -40.0},
    ]
}


def test_the_evidence_counts_batches_rows_and_failed_commits(tmp_path):
    engine = tmp_path / "engine"
    write(
        engine,
        [
            {"t_ms": 1000, "event": "started", "id": "q"},
            progress(0, 0, 400, 2000),
            progress(1, 500, 1000, 3000),
            # The same batch run again after a failure: its rows count again.
            {"t_ms": 3100, "event": "committed", "batch": 1},
            progress(1, 500, 3000, 6000),
            {"t_ms": 6100, "event": "commit_error", "batch": 1, "error": "TimeoutException: x"},
            {"t_ms": 7100, "event": "committed", "batch": 2},
            progress(2, 700, 800, 7000),
            {"t_ms": 8000, "event": "terminated", "exception": None},
        ],
    )
    evidence = spark.evidence(engine)
    assert evidence == {
        "batches": 3,
        "input_rows": 1700,
        "batch_ms_median": 1000.0,  # of 400, 800, 1000, 3000: the upper middle
        "batch_ms_max": 3000.0,
        "commits": 2,
        "commit_errors": 1,
        "restarts": 0,
        "terminated_with": None,
    }
    rows = dict(spark.report_rows(evidence))
    assert rows["Spark batches"].startswith("3 batches, 1")
    assert rows["Spark offset commits failed"] == "1"


def test_no_driver_files_is_no_evidence(tmp_path):
    assert spark.evidence(tmp_path / "engine") is None


def test_slow_batches_and_the_query_start_are_events_on_the_driver_clock(tmp_path):
    engine = tmp_path / "engine"
    write(
        engine,
        [
            {"t_ms": 1000, "event": "started", "id": "q"},
            progress(0, 100, 400, 2000),
            progress(1, 100, 500, 3000),
            progress(2, 100, 2500, 6000),  # more than twice the median (500)
        ],
    )
    events = list(spark.events(engine, RUN))
    # node1 (the master, where the driver runs) is 250 ms ahead of the driver host.
    assert [(e["t_ms"], e["event"]) for e in events] == [
        (750, "query started"),
        (5750, "batch 2 took 2500 ms (100 rows)"),
    ]
