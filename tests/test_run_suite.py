"""tests/run_suite.py: where the low-weight cgroup of the tests beside the lab's goes, and how the
three runs start and stop (how the machine's CPU time went: tests/test_cpu_time.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from run_suite import beside_command, own_cpu_cgroup

CGROUP_V1 = """\
9:name=systemd:/
4:memory:/process_api/2b4b
2:cpuacct:/
1:cpu:/ci/job-7
0::/
"""


def test_the_cpu_hierarchys_line_names_the_cgroup():
    assert own_cpu_cgroup(CGROUP_V1) == "/ci/job-7"


def test_cpu_and_cpuacct_mounted_together_count_as_the_cpu_hierarchy():
    assert own_cpu_cgroup("3:cpu,cpuacct:/build\n0::/\n") == "/build"


def test_a_machine_whose_cgroups_name_no_cpu_hierarchy_gives_the_root():
    assert own_cpu_cgroup("0::/user.slice/session-1.scope\n") == "/"


def test_without_a_first_command_the_run_beside_is_the_tests_alone():
    assert beside_command(["pytest"], None) == ["pytest", "-m", "not lab and not realtime"]


@pytest.mark.parametrize(
    ("first", "tests", "status"),
    [
        ("true", "exit 0", 0),
        ("exit 3", "exit 0", 3),
        ("true", "exit 5", 5),
        ("exit 3", "exit 5", 3),
    ],
)
def test_the_tests_run_after_the_first_command_and_the_first_failure_decides(
    tmp_path, first, tests, status
):
    ran = tmp_path / "tests-ran"
    # A stand-in for pytest: notes that it ran, then exits as told (its -m arguments ignored).
    stand_in = ["sh", "-c", f"touch {ran}; {tests}", "pytest"]
    done = subprocess.run(beside_command(stand_in, first), check=False)
    assert done.returncode == status
    assert ran.exists()


def test_a_failed_first_command_is_named_in_the_output(tmp_path):
    stand_in = ["sh", "-c", "exit 0", "pytest"]
    done = subprocess.run(
        beside_command(stand_in, "exit 4"), capture_output=True, text=True, check=False
    )
    assert done.returncode == 4
    assert "run_suite: before the tests beside the lab, `exit 4` failed: exit 4" in done.stdout


def test_on_sigint_it_waits_for_the_tests_to_clean_up_and_starts_nothing_more(tmp_path):
    started, cleaned = tmp_path / "started", tmp_path / "cleaned"
    # A stand-in for pytest that cleans up for 0.5 s on SIGINT, as pytest's fixtures do.
    script = (
        f"trap 'sleep 0.5; touch {cleaned}; exit 2' INT; touch {started}; "
        "while :; do sleep 0.05; done"
    )
    stand_in = ["sh", "-c", script, "pytest"]
    run = subprocess.Popen(beside_command(stand_in, "true"), process_group=0)
    deadline = time.monotonic() + 10
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert started.exists()
    os.killpg(run.pid, signal.SIGINT)  # what run_suite.stop() sends
    assert run.wait(timeout=10) == 130
    assert cleaned.exists(), "the shell ended before the tests had cleaned up"
