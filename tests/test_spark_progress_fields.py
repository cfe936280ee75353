"""The Spark job's status line carries the newest progress report's batch, duration, rates and
end offsets, and the timeline sampler passes them through (docs/results.md)."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

SPARK = Path(__file__).resolve().parents[1] / "roles" / "experiment" / "tasks" / "spark"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SPARK / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# A micro-batch progress report as Spark's StreamingQueryProgress.json gives it (trimmed).
REPORT = {
    "batchId": 41,
    "durationMs": {"addBatch": 1210, "getBatch": 0, "triggerExecution": 1530},
    "inputRowsPerSecond": 1998.4,
    "processedRowsPerSecond": 1307.2,
    "sources": [
        {
            "description": "KafkaV2[Subscribe[in-run]]",
            "startOffset": {"in-run": {"0": 100, "1": 90}},
            "endOffset": {"in-run": {"0": 1100, "1": 1080}},
        }
    ],
}


def test_progress_fields_from_a_report() -> None:
    job = pytest.importorskip("pyspark") and load("streamlab_spark_job")
    fields = job.progress_fields(REPORT)
    assert fields == {
        "progress_batch_id": 41,
        "batch_duration_ms": 1530,
        "input_rows_per_s": 1998.4,
        "processed_rows_per_s": 1307.2,
        "end_offsets": {"in-run": {"0": 1100, "1": 1080}},
    }
    # Offsets given as JSON text, as some Spark versions' sources report them, read the same.
    as_text = dict(
        REPORT,
        sources=[
            dict(REPORT["sources"][0], endOffset=json.dumps(REPORT["sources"][0]["endOffset"]))
        ],
    )
    assert job.progress_fields(as_text)["end_offsets"] == {"in-run": {"0": 1100, "1": 1080}}


def test_no_report_gives_nulls() -> None:
    job = pytest.importorskip("pyspark") and load("streamlab_spark_job")
    assert set(job.progress_fields(None).values()) == {None}


def test_timeline_passes_the_fields_through(tmp_path: Path) -> None:
    timeline = load("spark_timeline")
    now = int(time.time() * 1000)
    status = tmp_path / "status.jsonl"
    status.write_text(
        json.dumps(
            {
                "t_ms": now,
                "query_active": True,
                "batch_id": 40,
                "restarts": 0,
                "executors": [{"host": "10.0.0.2"}],
                "progress_batch_id": 41,
                "batch_duration_ms": 1530,
                "input_rows_per_s": 1998.4,
                "processed_rows_per_s": 1307.2,
                "end_offsets": {"in-run": {"0": 1100}},
            }
        )
        + "\n"
    )
    # No master answers here: the line says so and is not healthy, the driver's fields remain.
    line = timeline.sample("http://127.0.0.1:9", "app", status, 1, now)
    assert "error" in line and line["healthy"] is False
    assert line["progress_batch_id"] == 41
    assert line["batch_duration_ms"] == 1530
    assert line["end_offsets"] == {"in-run": {"0": 1100}}
    assert line["batch_id"] == 40 and line["executors"] == {"10.0.0.2": 1}
