"""tests/run_suite.py: where the low-weight cgroup of the tests beside the lab's goes, and how the
machine's CPU time went while they ran."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from run_suite import beside_command, cpu_shares, cpu_ticks, cpu_use, own_cpu_cgroup

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


PROC_STAT = "cpu  5720718 0 1930892 1920382 33129 0 47073 178175 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"


def test_the_machines_cpu_line_is_read_by_kind():
    ticks = cpu_ticks(PROC_STAT)
    assert ticks["user"] == 5720718 and ticks["idle"] == 1920382 and ticks["steal"] == 178175
    assert cpu_ticks("intr 1 2 3\n") == {}


def test_cpu_use_splits_the_time_between_two_readings_into_busy_idle_and_stolen():
    before = cpu_ticks(PROC_STAT)
    # 1,000 ticks later: 500 user, 100 system, 150 idle, 50 iowait, 200 steal.
    after = dict(before)
    spent = {"user": 500, "system": 100, "idle": 150, "iowait": 50, "steal": 200}
    for kind, ticks in spent.items():
        after[kind] += ticks
    assert cpu_shares(before, after) == pytest.approx({"busy": 0.6, "idle": 0.2, "stolen": 0.2})
    assert cpu_use(before, after) == (
        "the machine's CPU time: 60% busy, 20% idle, 20% stolen by the hypervisor"
    )


def test_cpu_use_without_readings_says_it_was_not_measured():
    assert "not measured" in cpu_use({}, {})
    assert "not measured" in cpu_use(cpu_ticks(PROC_STAT), cpu_ticks(PROC_STAT))
    assert cpu_shares(cpu_ticks(PROC_STAT), cpu_ticks(PROC_STAT)) is None


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
