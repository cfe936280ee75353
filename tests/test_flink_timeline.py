"""roles/experiment/tasks/flink/flink_timeline.py's sample: a job without checkpoints (an
at-most-once one, which the JobManager answers with zero counts) is sampled like any other; a
failed request marks the line."""

from __future__ import annotations

import importlib.util
import urllib.error

from conftest import REPO

SOURCE = REPO / "roles/experiment/tasks/flink/flink_timeline.py"
_spec = importlib.util.spec_from_file_location("flink_timeline", SOURCE)
assert _spec is not None and _spec.loader is not None
timeline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(timeline)

JOB = {"state": "RUNNING", "vertices": [{"parallelism": 2, "tasks": {"RUNNING": 2}}]}


ZERO = {"restored": 0, "total": 0, "in_progress": 0, "completed": 0, "failed": 0}


def fake_fetch(checkpoints_status: int | None, counts: dict | None = None):
    def fetch(path: str):
        if path.endswith("/checkpoints"):
            if checkpoints_status is not None:
                raise urllib.error.HTTPError(path, checkpoints_status, "no", {}, None)
            return {"counts": counts if counts is not None else {"completed": 3}, "latest": {}}
        if "numRestarts" in path:
            return [{"id": "numRestarts", "value": "0"}]
        if path == "/overview":
            return {"taskmanagers": 2, "slots-available": 0}
        return JOB

    return fetch


def test_a_job_without_checkpoints_is_healthy_with_zero_counts():
    line = timeline.sample(fake_fetch(None, ZERO), "j", 1)
    assert line["healthy"] is True and line["checkpoints"] == ZERO and "error" not in line
    assert line["last_checkpoint"] is None


def test_a_job_with_checkpoints_keeps_their_counts():
    line = timeline.sample(fake_fetch(None), "j", 1)
    assert line["healthy"] is True and line["checkpoints"] == {"completed": 3}


def test_a_failed_request_marks_the_line():
    line = timeline.sample(fake_fetch(500), "j", 1)
    assert line["healthy"] is False and "HTTPError" in line["error"]
