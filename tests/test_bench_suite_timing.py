"""bench/suite_timing.py without running the suite: a `.ci/run` log read back into its parts,
and the logs it must refuse (not its own, a suite that did not pass, a run that did not end)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import suite_timing  # noqa: E402

HEADER = {
    "commit": "0123abcd" * 5,
    "dirty": False,
    "started_utc": "2026-12-07T22:00:00Z",
    "machine": "2 cores, 24 GiB, Debian GNU/Linux 12 (bookworm)",
}
# The lines of a real .ci/run log the bench reads, with some of what lies between them.
LOG = """\
make lab LAB_FLAGS=--fresh
run_suite: beside the lab's tests, those that need no test host and no wall-clock deadline run \
in the cgroup /sys/fs/cgroup/cpu/streamlab-tests-1 (256 CPU shares); their output: logs/x.log
node1 10.77.0.11: (re)creating (network namespace)
node3 10.77.0.13: (re)creating (Debian 13 booted with systemd)
============================= test session starts ==============================
tests/test_lab_analysis.py ...                                           [  4%]
============================= slowest 40 durations =============================
574.12s setup    tests/test_lab_study.py::test_the_study_stops
373.41s call     tests/test_lab_teardown.py::test_teardown
=============== 74 passed, 1056 deselected, 3 warnings in 3127.11s (0:52:07) ===============

run_suite: the lab's tests ended after 52 min 7 s (exit 0); the machine's CPU time: 82% busy, \
18% idle, 0% stolen by the hypervisor
run_suite: the tests beside them have ended (exit 0); their output follows
All checks passed!
============================= slowest 40 durations =============================
79.00s call     tests/test_analysis_parts.py::test_several_runs
============== 1019 passed, 111 deselected in 1837.16s (0:30:37) ===============

run_suite: last, alone, the realtime tests that need no test host

===================== 35 passed, 1095 deselected in 49.32s =====================

==== run_suite: every run passed (lab, beside the lab, realtime); 52 min 58 s in all ====
run_suite: over the whole suite, the machine's CPU time: 81% busy, 19% idle, 0% stolen by the \
hypervisor
make test took 53 min 41 s (budget: 60 min)
"""
BENCH = "bench/suite_timing.py"
END = 'suite_timing: end {"exit": 0, "wall_s": 3300.4}\n'


def log_of(body: str = LOG, end: str = END) -> str:
    return suite_timing.HEADER + json.dumps(HEADER) + "\n" + body + end


def test_each_part_is_read_from_the_suites_own_lines():
    measured = suite_timing.parse(log_of())
    assert measured["commit"] == HEADER["commit"]
    assert (measured["make_test_s"], measured["suite_s"]) == (53 * 60 + 41, 52 * 60 + 58)
    assert (measured["lab_wall_s"], measured["lab_busy_percent"]) == (52 * 60 + 7, 82)
    assert measured["suite_busy_percent"] == 81
    assert measured["lab"]["counts"] == {"passed": 74, "deselected": 1056, "warnings": 3}
    assert measured["lab"]["seconds"] == 3127
    assert measured["beside_weight"] == "at 256 CPU shares"
    assert measured["beside"]["counts"]["passed"] == 1019
    assert measured["realtime"] == {"counts": {"passed": 35, "deselected": 1095}, "seconds": 49}
    # The slowest items are the lab's, not those of the tests beside it.
    assert [d["seconds"] for d in measured["slowest"]] == [574.12, 373.41]
    assert measured["hosts"] == [
        "node1 (network namespace)",
        "node3 (Debian 13 booted with systemd)",
    ]


def test_the_result_file_says_what_ran_and_has_a_cell_per_column():
    data = suite_timing.result({**suite_timing.parse(log_of()), **suite_timing.bench_end(log_of())})
    assert (data["bench"], data["date"], data["commit"]) == (BENCH, "2026-12-07", "0123abc")
    for table in data["tables"]:
        assert all(len(row) == len(table["columns"]) for row in table["rows"])
    parts = {row[0]: row[1] for row in data["tables"][0]["rows"]}
    assert parts["make test"] == 3221 and parts["before the suite"] == 3221 - 3178
    after = "after the lab's tests: the end of those beside them, then the realtime tests"
    assert parts[after] == 3178 - 3127
    tests = {row[0]: row[2] for row in data["tables"][0]["rows"]}
    assert tests["the lab's tests"] == "74 passed"  # neither deselected nor warnings
    assert data["machine"].startswith(HEADER["machine"])
    assert not any("dirty" in note for note in data["tables"][0]["notes"])


def test_nice_and_an_unmeasured_cpu_are_read_too():
    lab_end = "the machine's CPU time: 82% busy, 18% idle, 0% stolen by the hypervisor"
    unmeasured = "the machine's CPU time: not measured (no /proc/stat)"
    cgroup = "in the cgroup /sys/fs/cgroup/cpu/streamlab-tests-1 (256 CPU shares)"
    body = LOG.replace(lab_end, unmeasured).replace(cgroup, "at nice 10 (no cgroup v1 cpu)")
    assert unmeasured in body and "at nice 10" in body
    measured = suite_timing.parse(log_of(body))
    assert measured["beside_weight"] == "at nice 10"
    assert measured["lab_busy_percent"] is None
    rows = suite_timing.result({**measured, "wall_s": 1})["tables"][0]["rows"]
    lab_row = next(row for row in rows if row[0] == "the lab's tests")
    assert "(not measured)" in lab_row[3]


def test_a_log_without_the_benchs_header_is_refused():
    with pytest.raises(ValueError, match="header"):
        suite_timing.parse(LOG)


def test_a_suite_that_did_not_pass_is_not_measured():
    failed = LOG.replace(
        "every run passed (lab, beside the lab, realtime)", "the lab's tests failed"
    )
    with pytest.raises(ValueError, match="did not pass"):
        suite_timing.parse(log_of(failed))


def test_a_run_that_did_not_end_is_not_measured(tmp_path, capsys):
    log = tmp_path / "suite.log"
    log.write_text(log_of(end=""))
    assert suite_timing.main(["--from-log", str(log), "--out", str(tmp_path / "out.json")]) == 1
    assert "did not finish" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def test_an_existing_clone_directory_is_refused_before_anything_runs(tmp_path, capsys):
    with pytest.raises(SystemExit):
        suite_timing.main(["--clone", str(tmp_path)])
    assert "exists" in capsys.readouterr().err
