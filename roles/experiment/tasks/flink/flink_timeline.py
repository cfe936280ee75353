"""Flink's own account of a job, one JSON line a second, until a stop file exists.

    python3 flink_timeline.py --rest-url http://JM:8081 --job-id ID --out timeline.jsonl \\
        --stop-file timeline.stop [--interval-s 1] [--max-s 3600] [--ca-file ca.pem]

With an https REST URL, --ca-file is the CA the JobManager's certificate is verified with (its
address too).

Each line (engine/timeline.jsonl, docs/results.md): t_ms (this host's clock), the job's state,
its subtasks by status (summed over the vertices), numRestarts, the checkpoint counts and the
latest completed checkpoint, the TaskManagers registered and the free slots, and healthy (the
job RUNNING with every subtask RUNNING). A request that failed is a line with "error" (and
healthy false); sampling goes on.
Standard library only: it runs with whatever Python the driver host has.
"""

from __future__ import annotations

import argparse
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

Fetch = Callable[[str], Any]


def http_json(base: str, timeout_s: float = 2.0, ca_file: str | None = None) -> Fetch:
    context = ssl.create_default_context(cafile=ca_file) if ca_file else None

    def fetch(path: str) -> Any:
        url = base.rstrip("/") + path
        with urllib.request.urlopen(url, timeout=timeout_s, context=context) as answer:
            return json.load(answer)

    return fetch


def sample(fetch: Fetch, job_id: str, now_ms: int) -> dict[str, Any]:
    """One line of the timeline from the REST API."""
    line: dict[str, Any] = {"t_ms": now_ms}
    try:
        job = fetch(f"/jobs/{job_id}")
        tasks: dict[str, int] = {}
        for vertex in job.get("vertices") or []:
            for status, count in (vertex.get("tasks") or {}).items():
                if count:
                    tasks[status] = tasks.get(status, 0) + count
        total = sum(vertex.get("parallelism", 0) for vertex in job.get("vertices") or [])
        restarts = fetch(f"/jobs/{job_id}/metrics?get=numRestarts")
        checkpoints = fetch(f"/jobs/{job_id}/checkpoints")
        overview = fetch("/overview")
    except (OSError, ValueError, urllib.error.URLError) as error:
        line.update(error=f"{type(error).__name__}: {error}", healthy=False)
        return line
    latest = (checkpoints.get("latest") or {}).get("completed") or {}
    line.update(
        state=job.get("state"),
        tasks=tasks,
        restarts=int(restarts[0]["value"]) if restarts else None,
        checkpoints=checkpoints.get("counts") or {},
        last_checkpoint={
            "id": latest.get("id"),
            "trigger_ms": latest.get("trigger_timestamp"),
            "ack_ms": latest.get("latest_ack_timestamp"),
            "duration_ms": latest.get("end_to_end_duration"),
        }
        if latest
        else None,
        taskmanagers=overview.get("taskmanagers"),
        slots_available=overview.get("slots-available"),
        healthy=job.get("state") == "RUNNING" and total > 0 and tasks.get("RUNNING", 0) == total,
    )
    return line


def watch(
    fetch: Fetch, job_id: str, out: Path, stop_file: Path, interval_s: float, max_s: float
) -> int:
    deadline = time.monotonic() + max_s
    with open(out, "a", encoding="utf-8") as lines:
        while not stop_file.exists() and time.monotonic() < deadline:
            started = time.monotonic()
            lines.write(json.dumps(sample(fetch, job_id, int(time.time() * 1000))) + "\n")
            lines.flush()
            time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rest-url", required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--stop-file", required=True, type=Path)
    parser.add_argument("--interval-s", type=float, default=1.0)
    parser.add_argument("--max-s", type=float, default=3600.0)
    parser.add_argument("--ca-file", help="CA certificate for an https REST URL")
    args = parser.parse_args(argv)
    fetch = http_json(args.rest_url, ca_file=args.ca_file)
    return watch(fetch, args.job_id, args.out, args.stop_file, args.interval_s, args.max_s)


if __name__ == "__main__":
    raise SystemExit(main())
