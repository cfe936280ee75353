"""Flink on the test hosts: health, and a TaskManager leaving and coming back."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from conftest import LAB_INVENTORY, run_playbook

pytestmark = pytest.mark.lab


def overview(lab: dict[str, str]) -> dict:
    with urllib.request.urlopen(f"http://{lab['node1']}:8081/overview", timeout=5) as response:
        return json.load(response)


def wait_for_taskmanagers(lab: dict[str, str], count: int, timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    seen: dict = {}
    while time.monotonic() < deadline:
        try:
            seen = overview(lab)
        except OSError:
            seen = {}
        if seen.get("taskmanagers") == count:
            return seen
        time.sleep(1)
    pytest.fail(f"expected {count} TaskManagers within {timeout_s}s, last saw {seen}")


def test_jobmanager_reports_both_taskmanagers_and_their_slots(converged):
    seen = overview(converged)
    assert seen["flink-version"] == "2.2.1"
    assert seen["taskmanagers"] == 2
    assert seen["slots-total"] == 4


def test_a_killed_taskmanager_leaves_and_a_started_one_returns(converged, tmp_path):
    killed = run_playbook(
        "service.yml",
        LAB_INVENTORY,
        limit="node3",
        tmp_path=tmp_path,
        extravars={"daemon": "flink-taskmanager", "daemon_state": "killed"},
    )
    assert killed.rc == 0, killed.output[-4000:]
    assert wait_for_taskmanagers(converged, 1)["slots-total"] == 2
    started = run_playbook(
        "service.yml",
        LAB_INVENTORY,
        limit="node3",
        tmp_path=tmp_path,
        extravars={"daemon": "flink-taskmanager", "daemon_state": "started"},
    )
    assert started.rc == 0, started.output[-4000:]
    assert wait_for_taskmanagers(converged, 2)["slots-total"] == 4
