"""tests/lab/cpu_time.py: how the machine's CPU time went between two readings of /proc/stat."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "lab"))
from cpu_time import cpu_shares, cpu_ticks, cpu_use  # noqa: E402

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
