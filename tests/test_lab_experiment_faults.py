"""experiment.yml with a fault mid-run on the test hosts: nothing acknowledged is lost, the
duplicates are counted after the complete drain, and faults.jsonl and the engine's own timeline
agree with what happened. (A killed TaskManager and a killed Storm worker are the smoke study's
faults: test_lab_study.py checks its runs the same way.)"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from fault_checks import check_delivery_and_fault, read_jsonl

from conftest import LAB_EXPERIMENT_RATE, LAB_INVENTORY, run_playbook

pytestmark = pytest.mark.lab

RATE = LAB_EXPERIMENT_RATE
COUNT = 30 * RATE  # 30 s of messages
# The Ansible steps that start a fault on its target must end before it is due: 5 s of lead plus
# FAULT_AT_S after the instant is fixed. On 2026-11-27 (a Storm topology starting on the 2 shared
# cores) they took longer than 10 s and then 15 s: in the CI run at b62b685 (FAULT_AT_S = 5) the
# spec was written on the target 7.1 s after the instant was fixed and the agent's check and
# start took 4.4 s more (1,487 ms late); alone on fresh hosts with FAULT_AT_S = 10, 11.6 s and
# 4.7 s (1,356 ms late). The kit then marks the run incomplete. 20 s is the kit's default.
FAULT_AT_S = 20
DURATION_S = 5


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


def test_storm_moves_the_workers_of_a_killed_supervisor_and_loses_nothing(converged, tmp_path):
    out = run_with_fault(tmp_path, "storm", "kill_supervisor", storm_message_timeout_s=10)
    _, _, timeline = check_delivery_and_fault(out, "kill_supervisor", FAULT_AT_S, DURATION_S)
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
