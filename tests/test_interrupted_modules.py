"""What an interrupted experiment leaves: streamlab_run_processes (finds and stops exactly the
processes working in a run's directory) and streamlab_interrupted_runs (marks a result directory
that was started and never recorded incomplete, and nothing else)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_module

# A stand-in for the kit's programs: a script named like one, given a path in a run's directory.
PROGRAMS = ["producer.produce", "flink_timeline.py", "StormProbe"]
LAB = ["10.77.0.11", "10.77.0.12"]


def sleeper(tmp_path: Path, name: str, *arguments: str) -> subprocess.Popen:
    script = tmp_path / "bin" / name
    script.parent.mkdir(exist_ok=True)
    script.write_text("import time\ntime.sleep(120)\n")
    return subprocess.Popen([sys.executable, str(script), *arguments])


@pytest.fixture
def processes(tmp_path):
    runs = tmp_path / "data" / "runs"
    started = [
        sleeper(tmp_path, "producer.produce", "--out", str(runs / "inst-a" / "produced.jsonl")),
        sleeper(
            tmp_path,
            "StormProbe",
            f"--stop-file={tmp_path / 'data' / 'timelines' / 'inst-b' / 'timeline.stop'}",
        ),
        # Not the kit's: a path beside the runs directory, the directory itself, and a program
        # that is not the kit's reading a run's file (an operator's tail -f).
        sleeper(tmp_path, "flink_timeline.py", str(tmp_path / "data" / "runs-old" / "x" / "y")),
        sleeper(tmp_path, "producer.produce", str(runs)),
        sleeper(tmp_path, "tail", "-f", str(runs / "inst-a" / "collector.log")),
    ]
    yield runs, started
    for process in started:
        process.kill()
        process.wait()


@pytest.mark.realtime  # a 5 s stop
def test_it_finds_exactly_the_processes_in_a_runs_directory_and_stops_them(processes, tmp_path):
    runs, (producer, timeline, beside, bare, tail) = processes
    args = {"directories": [str(runs), str(tmp_path / "data" / "timelines")], "programs": PROGRAMS}
    rc, listed = run_module("streamlab_run_processes", args)
    assert rc == 0 and listed["changed"] is False, listed
    found = {p["pid"]: p["run"] for p in listed["processes"]}
    assert found == {producer.pid: "inst-a", timeline.pid: "inst-b"}

    rc, stopped = run_module("streamlab_run_processes", {**args, "stop": True, "timeout_s": 5})
    assert rc == 0 and stopped["changed"] is True, stopped
    assert producer.wait(timeout=10) is not None and timeline.wait(timeout=10) is not None
    # Not the kit's: still running.
    assert beside.poll() is None and bare.poll() is None and tail.poll() is None

    rc, again = run_module("streamlab_run_processes", {**args, "stop": True})
    assert rc == 0 and again["changed"] is False and again["processes"] == [], again


def test_a_program_started_through_runuser_is_found_once(tmp_path):
    """The kit starts its programs through runuser (sudo on macOS), whose own process has the
    program's arguments: only the program is the run's process, not the switcher too."""
    runs = tmp_path / "data" / "runs"
    script = tmp_path / "bin" / "flink_timeline.py"
    script.parent.mkdir()
    script.write_text("import time\ntime.sleep(120)\n")
    out = str(runs / "inst-c" / "timeline.jsonl")
    switcher = subprocess.Popen(["runuser", "-u", "root", "--", sys.executable, str(script), out])
    args = {"directories": [str(runs)], "programs": PROGRAMS}
    try:
        deadline = time.monotonic() + 10
        listed: dict = {"processes": []}
        while not listed["processes"] and time.monotonic() < deadline:
            rc, listed = run_module("streamlab_run_processes", args)
            assert rc == 0, listed
        (found,) = listed["processes"]
        assert found["run"] == "inst-c" and found["pid"] != switcher.pid, found
        assert found["command"].startswith(f"{sys.executable} {script}"), found
    finally:
        switcher.kill()
        switcher.wait()
        subprocess.run(["pkill", "-f", str(script)], check=False)


def test_check_mode_stops_nothing(processes):
    runs, (producer, *_rest) = processes
    args = {"directories": [str(runs)], "programs": PROGRAMS, "stop": True}
    rc, result = run_module("streamlab_run_processes", args, "--check")
    assert rc == 0 and result["changed"] is True, result
    assert producer.poll() is None


@pytest.mark.parametrize("directory", ["/", "/tmp", "relative/runs"])
def test_a_directory_that_would_match_too_much_is_refused(directory):
    args = {"directories": [directory], "programs": PROGRAMS}
    rc, result = run_module("streamlab_run_processes", args)
    assert rc != 0 and "is not a directory of the kit's runs" in result.get("msg", ""), result


def started_run(
    results: Path, run_id: str, instance: str, recorded: bool = False, lab: list[str] = LAB
) -> Path:
    run_dir = results / run_id
    (run_dir / "engine" / "logs").mkdir(parents=True)
    started = {
        "run_id": run_id,
        "engine": "flink",
        "fault": "none",
        "instance": instance,
        "lab": lab,
    }
    (run_dir / "run.started.json").write_text(json.dumps(started))
    if recorded:
        (run_dir / "run.json").write_text(json.dumps({**started, "status": "complete"}))
    return run_dir


def test_only_a_started_and_unrecorded_run_is_marked_with_what_of_it_was_stopped(tmp_path):
    results = tmp_path / "results"
    interrupted = started_run(results, "r1", "r1-20261124T100000Z")
    recorded = started_run(results, "r2", "r2-20261124T110000Z", recorded=True)
    recorded_before = (recorded / "run.json").read_text()
    other_lab = started_run(results, "r4", "r4-20261124T120000Z", lab=["127.0.0.1"])
    broken = started_run(results, "r5", "r5-20261124T130000Z")
    (broken / "run.started.json").write_text("{not json")
    (results / "a-study").mkdir()
    args = {
        "results_dir": str(results),
        "lab": list(reversed(LAB)),
        "found_by": "the experiment r3",
        "jobs": ["streamlab-flink-streamlab-r1-20261124T100000Z-in", "streamlab-other-in"],
        "processes": {
            "node1": [
                {"pid": 11, "command": "python -m producer.produce", "run": "r1-20261124T100000Z"},
                {"pid": 12, "command": "python -m producer.collect", "run": "someone-else"},
            ]
        },
    }
    rc, result = run_module("streamlab_interrupted_runs", args)
    assert rc == 0 and result["changed"] is True and result["runs"] == ["r1"], result

    record = json.loads((interrupted / "run.json").read_text())
    assert record["status"] == "incomplete" and record["engine"] == "flink"
    assert record["incomplete_reasons"][0].startswith("interrupted: ")
    assert (
        "found at" in record["incomplete_reasons"][0]
        and "the experiment r3" in record["incomplete_reasons"][0]
    )
    assert record["interrupted"]["stopped"] == [
        "job streamlab-flink-streamlab-r1-20261124T100000Z-in cancelled",
        "process 11 on node1 stopped (python -m producer.produce)",
    ]
    assert (recorded / "run.json").read_text() == recorded_before
    # Another lab's run (it may still be running there) and an unreadable record stay as they are.
    assert not (other_lab / "run.json").exists() and not (broken / "run.json").exists()
    assert sorted(p.name for p in interrupted.iterdir()) == [
        "engine",
        "run.json",
        "run.started.json",
    ]

    rc, again = run_module("streamlab_interrupted_runs", args)
    assert rc == 0 and again["changed"] is False and again["runs"] == [], again


def test_check_mode_writes_nothing_and_a_missing_results_directory_is_no_change(tmp_path):
    results = tmp_path / "results"
    run_dir = started_run(results, "r1", "i1")
    args = {"results_dir": str(results), "found_by": "teardown", "lab": LAB}
    rc, result = run_module("streamlab_interrupted_runs", args, "--check")
    assert rc == 0 and result["runs"] == ["r1"] and not (run_dir / "run.json").exists(), result
    args = {"results_dir": str(tmp_path / "none"), "found_by": "teardown", "lab": LAB}
    rc, result = run_module("streamlab_interrupted_runs", args)
    assert rc == 0 and result["changed"] is False, result
