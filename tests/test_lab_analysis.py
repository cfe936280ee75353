"""playbooks/analyze.yml on the test hosts: runs are summarised with the lab's Spark cluster,
the reports come back, and the numbers equal those of the same run summarised locally."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from analysis_runs import BASE_MS, RunDir

from conftest import LAB_INVENTORY, REPO, run_playbook

pytestmark = pytest.mark.lab

PLOTS = {"latency_cdf.png", "throughput.png", "latency_over_time.png", "duplicates_over_time.png"}


def make_run(results: Path, run_id: str, seconds: int = 20, rate: int = 500) -> Path:
    """A run with a warm-up, losses, duplicates, a malformed record and a fault at half-time
    that stalls delivery for 4 s."""
    run = RunDir(results, run_id, "flink", parameters={"warmup_s": 5, "checkpoint_interval_s": 5})
    fault = BASE_MS + seconds * 500
    run.fault(fault, fault + 2_000, daemon="flink-taskmanager")
    run.collection_end_ms = BASE_MS + (seconds + 15) * 1000
    for i in range(1, seconds * rate + 1):
        intended = BASE_MS + (i - 1) * 1000 // rate
        run.produce(i, intended, acked=i % 997 != 0)
        if i % 1009 == 0:
            continue  # lost
        recv = intended + 5 + i % 40
        if fault <= recv < fault + 4_000:
            recv = fault + 4_000 + i % 300
        run.receive(i, recv)
        if i % 101 == 0:
            run.receive(i, recv + 700)
    run.receive(None, fault + 5_000)
    return run.write()


def summarize_locally(path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "analysis", "summarize", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads((path / "summary.json").read_text())


def numbers(summary: dict) -> dict:
    """Everything but how the summary was made."""
    return {key: value for key, value in summary.items() if key != "analysis"}


def test_a_cluster_summary_and_comparison_of_the_named_runs_equal_local_ones(converged, tmp_path):
    """One analyze.yml run names two runs: each is summarised with the lab's Spark cluster (the
    first equal to the same run summarised locally), they are compared, and a third run that
    was not named is left alone."""
    results = tmp_path / "results"
    first = make_run(results, f"lab-first-{uuid.uuid4().hex[:8]}")
    second = make_run(results, f"lab-second-{uuid.uuid4().hex[:8]}", seconds=10)
    not_named = make_run(results, f"lab-not-named-{uuid.uuid4().hex[:8]}", seconds=2)
    local_copy = tmp_path / "local" / first.name
    shutil.copytree(first, local_copy)
    local = summarize_locally(local_copy)

    played = run_playbook(
        "analyze.yml",
        LAB_INVENTORY,
        extravars={
            "runs": f"{first.name},{second.name}",
            "analysis_results_dir": str(results),
            "analysis_compare_name": "comparison",
        },
        tmp_path=tmp_path,
    )
    assert played.rc == 0, played.output[-6000:]
    assert not (not_named / "summary.json").exists()
    cluster = json.loads((first / "summary.json").read_text())
    assert numbers(cluster) == numbers(local)
    assert cluster["analysis"]["master"] == f"spark://{converged['node1']}:7077"
    executors = set(cluster["analysis"]["executor_hosts"])
    assert {converged["node2"], converged["node3"]} <= executors, executors
    assert local["lost"] > 0 and local["duplicate_records"] > 0 and local["faults"][0]["stall_s"]
    for run in (first, second):
        assert (run / "summary.json").exists(), run
        assert (run / "report.md").exists() and (run / "report.html").exists(), run
        assert {p.name for p in (run / "plots").iterdir()} == PLOTS, run
    compared = results / "comparison"
    assert {p.name for p in compared.iterdir()} == {"comparison.md", "comparison.csv", "plots"}
    comparison = (compared / "comparison.md").read_text()
    assert f"| {first.name} |" in comparison and f"| {second.name} |" in comparison, comparison
    # The headline numbers are printed, and nothing of the runs is left on the Spark hosts.
    assert f"lost        {local['lost']} (" in played.output, played.output[-3000:]
    for host in ("node1", "node2", "node3"):
        for run in (first, second):
            leftover = Path(f"/srv/lab/{host}/data/analysis/runs/{run.name}")
            assert not leftover.exists(), leftover


def test_with_no_run_named_the_latest_is_analysed_and_bad_input_names_its_file_and_line(
    converged, tmp_path
):
    """No run named: the latest (by run.json's modification time) is analysed, and only it.
    Here it has a malformed line: the analysis fails naming the file and the line, and writes
    no summary."""
    results = tmp_path / "results"
    older = make_run(results, f"lab-older-{uuid.uuid4().hex[:8]}", seconds=2)
    os.utime(older / "run.json", (1, 1))
    run = make_run(results, f"lab-bad-{uuid.uuid4().hex[:8]}", seconds=5)
    lines = (run / "received.jsonl").read_text().splitlines(keepends=True)
    lines.insert(2, "not json\n")
    (run / "received.jsonl").write_text("".join(lines))
    played = run_playbook(
        "analyze.yml",
        LAB_INVENTORY,
        extravars={"analysis_results_dir": str(results)},
        tmp_path=tmp_path,
    )
    assert played.rc != 0
    assert f"{run.name}/received.jsonl:3: not a JSON object" in " ".join(played.output.split())
    assert not (run / "summary.json").exists()
    assert not (older / "summary.json").exists()
    assert older.name not in played.output
    assert not Path(f"/srv/lab/node2/data/analysis/runs/{run.name}").exists()


def test_an_unknown_run_is_refused_before_anything_is_copied(converged, tmp_path):
    results = tmp_path / "results"
    make_run(results, "lab-known", seconds=2)
    played = run_playbook(
        "analyze.yml",
        LAB_INVENTORY,
        extravars={"runs": "lab-unknown", "analysis_results_dir": str(results)},
        tmp_path=tmp_path,
    )
    assert played.rc != 0
    assert "No run lab-unknown in" in " ".join(played.output.split())
