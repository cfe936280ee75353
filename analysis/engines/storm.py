"""Storm's own account of a run: the topology statistics the experiment asked Nimbus for
(engine/storm-topology.json, docs/results.md), as summary.json's engine_evidence.storm and the
report's rows. Its timeline is engine/timeline.jsonl, read by analysis.engine for any engine."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from analysis.io import read_optional_json
from analysis.report import count, number

NAME = "storm"
# The setting that bounds what a failure replays, for runs whose run.json does not name it
# (setting_roles); its engine.yml marks the same one replay_bound.
REPLAY_BOUND = "storm_message_timeout_s"


def evidence(engine: Path) -> dict[str, Any] | None:
    topology = read_optional_json(engine / "storm-topology.json")
    if not isinstance(topology, dict):
        return None
    return {
        "acked": topology.get("spout_acked"),
        "emitted": topology.get("spout_emitted"),
        "failed": topology.get("spout_failed"),
        "complete_latency_ms": topology.get("complete_latency_ms"),
    }


def events(engine: Path, run: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Nimbus keeps no event history the kit fetches: none beyond engine/timeline.jsonl."""
    return ()


def report_rows(storm: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    emitted = storm.get("emitted")
    rows.append(
        [
            "Storm spout",
            (f"{count(emitted)} emitted, " if emitted is not None else "")
            + f"{count(storm.get('acked'))} acked, {count(storm.get('failed'))} failed "
            "(sampled estimates)",
        ]
    )
    # Without ackers (at most once) no tuple tree completes: there is no complete latency.
    if storm.get("acked"):
        rows.append(["Storm complete latency", f"{number(storm.get('complete_latency_ms'))} ms"])
    return rows
