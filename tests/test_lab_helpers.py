"""The lab tests' helpers that need no test host: a daemon taken down is always brought back; a
killed control node leaves no process of its playbook behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import conftest
from conftest import processes


@pytest.fixture
def switches(monkeypatch) -> list[tuple[str, str, str]]:
    """Record set_daemon calls instead of running playbooks/service.yml on the test hosts."""
    calls: list[tuple[str, str, str]] = []

    def record(daemon, state, host, tmp_path):
        calls.append((daemon, state, host))
        return state

    monkeypatch.setattr(conftest, "set_daemon", record)
    return calls


def test_daemon_down_yields_the_switch_and_starts_the_daemon_after_the_block(switches):
    with conftest.daemon_down("kafka", "killed", "node3", Path("/tmp")) as down:
        assert down == "killed"
        assert switches == [("kafka", "killed", "node3")]
    assert switches == [("kafka", "killed", "node3"), ("kafka", "started", "node3")]


def test_a_failing_block_still_starts_the_daemon_and_keeps_its_failure(switches):
    with (
        pytest.raises(AssertionError, match="broker 3 never left"),
        conftest.daemon_down("kafka", "stopped", "node3", Path("/tmp")),
    ):
        raise AssertionError("broker 3 never left")
    assert switches[-1] == ("kafka", "started", "node3")


# A stand-in for ansible-playbook: a parent whose child leaves its process group with setsid, as
# ansible-core's workers do, and prints its PID.
SETSID_CHILD = """
import subprocess, sys, time
sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
child = subprocess.Popen(sleeper, start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def test_a_killed_control_node_leaves_no_process_even_outside_its_group():
    parent = subprocess.Popen(
        [sys.executable, "-c", SETSID_CHILD], stdout=subprocess.PIPE, start_new_session=True
    )
    child_pid = int(parent.stdout.readline())
    assert os.getpgid(child_pid) != os.getpgid(parent.pid)  # what a killpg alone would miss
    conftest.kill_control_node(parent)
    assert parent.returncode == -9
    assert not processes.alive(child_pid)
