"""Hand-made run directories (docs/results.md) for the analysis tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BASE_MS = 1_700_000_000_000


def line(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":")) + "\n"


class RunDir:
    """Collects produced/received/faults rows, then writes them as a run directory."""

    def __init__(
        self,
        root: Path,
        run_id: str = "run-1",
        engine: str = "flink",
        parameters: dict[str, Any] | None = None,
        **run: Any,
    ) -> None:
        self.path = root / run_id
        self.run: dict[str, Any] = {"run_id": run_id, "engine": engine, **run}
        if parameters is not None:
            self.run["parameters"] = parameters
        self.produced_lines: list[str] = []
        self.received_lines: list[str] = []
        self.fault_lines: list[str] = []
        self.collection_end_ms: int | None = None
        # engine/ files: name -> a JSON value, or a list of objects for a .jsonl file.
        self.engine_files: dict[str, Any] = {}

    def produce(
        self,
        msg_id: int,
        intended_ms: int,
        acked: bool = True,
        sent_ms: int | None = None,
        partition: int | None = None,
    ) -> RunDir:
        row: dict[str, Any] = {
            "msg_id": msg_id,
            "intended_ms": intended_ms,
            "sent_ms": intended_ms if sent_ms is None else sent_ms,
            "acked": acked,
        }
        if partition is not None:
            row["partition"] = partition
        if not acked:
            row["error"] = "KafkaTimeoutError: test"
        self.produced_lines.append(line(row))
        return self

    def receive(
        self,
        msg_id: int | None,
        recv_ms: int,
        processed_ms: int | None = None,
        broker_ms: int | None = None,
    ) -> RunDir:
        row: dict[str, Any] = {
            "msg_id": msg_id,
            "recv_ms": recv_ms,
            "partition": 0,
            "offset": len(self.received_lines),
            "processed_ms": recv_ms - 1 if processed_ms is None else processed_ms,
            "broker_ms": recv_ms - 1 if broker_ms is None else broker_ms,
        }
        if msg_id is None:
            row["processed_ms"] = None
            row["raw"] = "not a result"
        self.received_lines.append(line(row))
        return self

    def fault(self, start_ms: int, end_ms: int | None, **details: Any) -> RunDir:
        record = {"fault": "kill", "host": "node2", "start_ms": start_ms, "end_ms": end_ms}
        self.fault_lines.append(line(record | details))
        return self

    def write(
        self, produced_name: str = "produced.jsonl", received_name: str = "received.jsonl"
    ) -> Path:
        self.path.mkdir(parents=True)
        (self.path / "run.json").write_text(json.dumps(self.run, indent=2) + "\n")
        (self.path / produced_name).write_text("".join(self.produced_lines))
        (self.path / received_name).write_text("".join(self.received_lines))
        (self.path / "faults.jsonl").write_text("".join(self.fault_lines))
        for name, data in self.engine_files.items():
            (self.path / "engine").mkdir(exist_ok=True)
            text = (
                "".join(line(row) for row in data)
                if name.endswith(".jsonl")
                else json.dumps(data) + "\n"
            )
            (self.path / "engine" / name).write_text(text)
        if self.collection_end_ms is not None:
            summary = {"end_ms": self.collection_end_ms}
            (self.path / "received.summary.json").write_text(json.dumps(summary) + "\n")
        return self.path
