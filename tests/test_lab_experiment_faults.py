"""experiment.yml with a fault mid-run on the test hosts: nothing acknowledged is lost, the
duplicates are counted after the complete drain, and faults.jsonl and the engine's own timeline
agree with what happened."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from conftest import LAB_INVENTORY, run_playbook

pytestmark = pytest.mark.lab

COUNT = 30_000  # 15 s at 2,000/s
RATE = 2_000
FAULT_AT_S = 5
DURATION_S = 5


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_with_fault(
    tmp_path: Path,
    engine: str,
    fault: str,
    count: int = COUNT,
    duration_s: int = DURATION_S,
    **extra: object,
) -> Path:
    results = tmp_path / "results"
    run_id = f"test-{engine}-{fault}-{uuid.uuid4().hex[:6]}"
    run = run_playbook(
        "experiment.yml",
        LAB_INVENTORY,
        extravars={
            "engine": engine,
            "count": count,
            "rate": RATE,
            "warmup_s": 3,
            "fault": fault,
            "fault_at_s": FAULT_AT_S,
            "duration_s": duration_s,
            "run_id": run_id,
            "experiment_results_dir": str(results),
            **extra,
        },
        tmp_path=tmp_path,
    )
    assert run.rc == 0, run.output[-6000:]
    return results / run_id


def check_delivery_and_fault(
    out: Path, fault: str, duration_s: int = DURATION_S
) -> tuple[dict, dict, list[dict]]:
    """What every faulty run must show; returns run.json, summary.json and the timeline."""
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "complete", record["incomplete_reasons"]
    assert record["drain"]["stop_reason"] == "complete"
    produced = read_jsonl(out / "produced.jsonl")
    acked = {p["msg_id"] for p in produced if p["acked"]}
    received = read_jsonl(out / "received.jsonl")
    ids = [r["msg_id"] for r in received]
    assert acked <= set(ids), f"lost: {sorted(acked - set(ids))[:10]}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["lost"] == 0
    assert summary["duplicate_records"] == len(ids) - len(set(ids))

    (injected,) = read_jsonl(out / "faults.jsonl")
    assert injected["fault"] == fault
    # Never the driver / JobManager / Nimbus host (node1) unless asked; a host of the job.
    assert injected["host"] in ("node2", "node3")
    assert record["parameters"]["target"] == injected["host"]
    # Due FAULT_AT_S after the producer's first message; started then, on the driver clock.
    assert injected["scheduled_ms"] == record["produce_start_ms"] + FAULT_AT_S * 1000
    assert 0 <= injected["start_ms"] - injected["scheduled_ms"] < 1000
    if fault == "kill_storm_worker":  # ends when the supervisor relaunched the workers
        assert injected["end_ms"] - injected["start_ms"] <= duration_s * 1000 + 1000
    else:
        assert injected["end_ms"] - injected["start_ms"] >= duration_s * 1000
    # The recovery step found nothing left to repair on any host.
    assert record["recovery"] == {"node1": [], "node2": [], "node3": []}
    timeline = read_jsonl(out / "engine" / "timeline.jsonl")
    assert timeline[0]["t_ms"] < injected["start_ms"] < timeline[-1]["t_ms"]
    return record, summary, timeline


def test_flink_restarts_after_a_killed_taskmanager_and_loses_nothing(converged, tmp_path):
    out = run_with_fault(tmp_path, "flink", "kill_taskmanager")
    _, summary, timeline = check_delivery_and_fault(out, "kill_taskmanager")
    (injected,) = read_jsonl(out / "faults.jsonl")
    before = [t for t in timeline if t["t_ms"] < injected["start_ms"] and "error" not in t]
    after = [t for t in timeline if t["t_ms"] >= injected["start_ms"] and "error" not in t]
    # Flink itself said so: the job left RUNNING, restarted, and ran again with every subtask.
    assert before[-1]["healthy"] and before[-1]["restarts"] == 0
    assert any(not t["healthy"] for t in after)
    first_unhealthy = next(i for i, t in enumerate(after) if not t["healthy"])
    assert any(t["healthy"] for t in after[first_unhealthy:])
    assert after[-1]["restarts"] >= 1
    # The replay from the last checkpoint wrote some results twice, and they were counted.
    assert summary["duplicate_records"] > 0


def test_storm_moves_the_workers_of_a_killed_supervisor_and_loses_nothing(converged, tmp_path):
    out = run_with_fault(tmp_path, "storm", "kill_supervisor", storm_message_timeout_s=10)
    _, _, timeline = check_delivery_and_fault(out, "kill_supervisor")
    (injected,) = read_jsonl(out / "faults.jsonl")
    killed = injected["applied"]["pids"]["storm-supervisor"]
    assert len(killed) >= 2, "the supervisor's group holds its workers too"
    samples = [t for t in timeline if "error" not in t]
    before = [t for t in samples if t["t_ms"] < injected["start_ms"]]
    after = [t for t in samples if t["t_ms"] >= injected["start_ms"]]
    # Storm itself said so: the killed host's workers were restarted somewhere.
    assert before[-1]["healthy"]
    assert after[-1]["worker_restarts"] > before[-1]["worker_restarts"]
    assert after[-1]["healthy"]


def test_a_killed_storm_worker_is_relaunched_by_its_supervisor(converged, tmp_path):
    # The supervisor looks at its workers every few seconds: give it up to 12 s to relaunch them.
    out = run_with_fault(
        tmp_path,
        "storm",
        "kill_storm_worker",
        count=40_000,
        duration_s=12,
        storm_message_timeout_s=10,
    )
    check_delivery_and_fault(out, "kill_storm_worker", duration_s=12)
    (injected,) = read_jsonl(out / "faults.jsonl")
    assert injected["applied"]["pids"], "no worker of the topology was found to kill"
    assert injected["reverted"]["restarted"]
    assert not set(injected["reverted"]["new_pids"]) & set(injected["applied"]["pids"])
