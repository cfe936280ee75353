"""Spark's own account of a query, one JSON line a second, until a stop file exists.

    python3 spark_timeline.py --master-url http://M:8080 --app-name NAME --status FILE \\
        --executors N --out timeline.jsonl --stop-file timeline.stop [--interval-s 1] [--max-s 3600]

Each line (engine/timeline.jsonl, docs/results.md): t_ms (this host's clock); from the master
(GET /json/): the workers alive and the application's state and cores; from the driver's status
file (a line a second, written by the job): whether the query is active, its last committed
batch id, the newest progress report's batch id, duration, rates and end offsets, its executors
per host and how often it was started again; and healthy (the application RUNNING, the query
active, the driver's status fresh and at least N executors). A request that failed is noted in
"error" (and healthy false); sampling goes on. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

STALE_MS = 3000


def master_state(url: str, app_name: str) -> dict[str, Any]:
    with urllib.request.urlopen(url.rstrip("/") + "/json/", timeout=2.0) as answer:
        master = json.load(answer)
    apps = [app for app in master.get("activeapps") or [] if app.get("name") == app_name]
    return {
        "workers_alive": sorted(
            w.get("host") for w in master.get("workers") or [] if w.get("state") == "ALIVE"
        ),
        "app_state": apps[0].get("state") if apps else None,
        "app_cores": apps[0].get("cores") if apps else None,
    }


def last_status(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as status:
            status.seek(0, 2)
            status.seek(max(0, status.tell() - 65536))
            lines = status.read().decode("utf-8", "replace").splitlines()
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError, IndexError):
        return None


def sample(url: str, app_name: str, status_file: Path, wanted: int, now_ms: int) -> dict[str, Any]:
    line: dict[str, Any] = {"t_ms": now_ms}
    try:
        line.update(master_state(url, app_name))
    except (OSError, ValueError, urllib.error.URLError) as error:
        line["error"] = f"{type(error).__name__}: {error}"
    status = last_status(status_file)
    executors = (status or {}).get("executors") or []
    fresh = status is not None and now_ms - int(status.get("t_ms", 0)) <= STALE_MS
    line.update(
        query_active=bool(status and status.get("query_active")) and fresh,
        batch_id=(status or {}).get("batch_id"),
        input_rows_per_s=(status or {}).get("input_rows_per_s"),
        processed_rows_per_s=(status or {}).get("processed_rows_per_s"),
        progress_batch_id=(status or {}).get("progress_batch_id"),
        batch_duration_ms=(status or {}).get("batch_duration_ms"),
        end_offsets=(status or {}).get("end_offsets"),
        executors=dict(sorted(Counter(e.get("host") for e in executors).items())),
        restarts=(status or {}).get("restarts"),
    )
    line["healthy"] = (
        "error" not in line
        and line.get("app_state") == "RUNNING"
        and line["query_active"]
        and len(executors) >= wanted
    )
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master-url", required=True)
    parser.add_argument("--app-name", required=True)
    parser.add_argument("--status", required=True, type=Path)
    parser.add_argument("--executors", required=True, type=int)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--stop-file", required=True, type=Path)
    parser.add_argument("--interval-s", type=float, default=1.0)
    parser.add_argument("--max-s", type=float, default=3600.0)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.max_s
    with open(args.out, "a", encoding="utf-8") as lines:
        while not args.stop_file.exists() and time.monotonic() < deadline:
            started = time.monotonic()
            line = sample(
                args.master_url, args.app_name, args.status, args.executors, int(time.time() * 1000)
            )
            lines.write(json.dumps(line) + "\n")
            lines.flush()
            time.sleep(max(0.0, args.interval_s - (time.monotonic() - started)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
