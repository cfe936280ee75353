"""tests/studies/lab-study.yml on the test hosts (studies/smoke.yml's shape at the lab tests'
rate: 2 engines x 1 setting x 1 fault, once): stopped after its first run, started again, it
runs only what is missing and ends with one report over both runs. Its runs are real
experiments with a fault (the suite's only experiments with a scheduled one), Flink's exactly
once and Storm's at most once (the default, at least once, is the other lab experiments'): each
is checked with tests/fault_checks.py (a killed TaskManager for Flink, a killed worker for
Storm), under its guarantee. A
supervisor killed mid-run is the Storm fault of `make bench-faults`."""

from __future__ import annotations

import contextlib
import csv
import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from fault_checks import (
    check_delivery_and_fault,
    check_flink_restarted,
    check_storm_worker_relaunched,
)
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

from analysis.study import spec
from analysis.study.kit import Kit
from analysis.study.plan import expand
from conftest import LAB_INVENTORY, REPO, lab_kafka_settings, wait_until

# Above the smoke fixture's own waits (180 + 900 + 60 + 2400 s) and a converge before them.
pytestmark = [pytest.mark.lab, pytest.mark.timeout(4800)]

SPEC = REPO / "tests" / "studies" / "lab-study.yml"
STUDY = SPEC.stem
PLOTS = {"latency_percentiles.png", "duplicate_rate.png", "recovery.png", "parameter_sweep.png"}


@dataclass
class SmokeStudy:
    results: Path
    stopped_output: str  # the first start, Ctrl-C'd during its first run
    record_after_stop: dict
    first_run_json: bytes
    resumed: subprocess.CompletedProcess

    @property
    def study_dir(self) -> Path:
        return self.results / STUDY

    def record(self) -> dict:
        return json.loads((self.study_dir / "study.json").read_text())


def study_command(results: Path) -> list[str]:
    return [
        *(sys.executable, "-m", "analysis.study", str(SPEC)),
        *("-i", str(LAB_INVENTORY), "--results", str(results)),
    ]


def occupy_run_id_topics(lab: dict[str, str]) -> None:
    """Topics named from each run id alone, as an earlier attempt of the run would have left
    them before attempts got their own names: the study must not trip over them."""
    kit = Kit.load()
    run_ids = [run.run_id for run in expand(spec.load(SPEC, kit), kit, STUDY)]
    admin = KafkaAdminClient(bootstrap_servers=f"{lab['node1']}:9092", **lab_kafka_settings())
    try:
        for run_id in run_ids:
            for end in ("in", "out"):
                with contextlib.suppress(TopicAlreadyExistsError):  # a reused lab has them
                    admin.create_topics([NewTopic(f"streamlab-{run_id}-{end}", 1, 1)])
    finally:
        admin.close()


@pytest.fixture(scope="module")
def smoke(converged, tmp_path_factory: pytest.TempPathFactory) -> SmokeStudy:
    results = tmp_path_factory.mktemp("study") / "results"
    occupy_run_id_topics(converged)
    first = subprocess.Popen(
        study_command(results),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # Ctrl-C while the first run is under way: the study lets it finish, then stops.
        wait_until(
            lambda: [p for p in results.glob(f"{STUDY}-*") if p.is_dir()],
            bool,
            "the first run's result directory",
            timeout_s=180,
        )
        first.send_signal(signal.SIGINT)
        output, _ = first.communicate(timeout=900)
    finally:
        if first.poll() is None:
            first.terminate()  # SIGTERM: the study cancels its playbook and exits
            first.wait(timeout=60)
    record = json.loads((results / STUDY / "study.json").read_text())
    done = [run["run_id"] for run in record["runs"] if run["status"] == "complete"]
    first_run_json = (results / done[0] / "run.json").read_bytes() if len(done) == 1 else b""
    resumed = subprocess.run(
        study_command(results), cwd=REPO, capture_output=True, text=True, timeout=2400, check=False
    )
    return SmokeStudy(results, output, record, first_run_json, resumed)


def test_the_study_stops_after_the_run_under_way_when_asked(smoke):
    assert "stopped as asked; 1 of 2 runs complete" in smoke.stopped_output, smoke.stopped_output
    runs = smoke.record_after_stop["runs"]
    assert sorted(run["status"] for run in runs) == ["complete", "not run"]
    assert smoke.first_run_json


def test_started_again_it_runs_only_what_is_missing(smoke):
    resumed = smoke.resumed
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "1 of 2 runs to do (1 already complete)" in resumed.stderr, resumed.stderr
    record = smoke.record()
    assert [run["status"] for run in record["runs"]] == ["complete"] * 2
    # Every run ran once: the first was kept as it was, not repeated.
    assert [len(run["attempts"]) for run in record["runs"]] == [1] * 2
    first = next(r for r in smoke.record_after_stop["runs"] if r["status"] == "complete")
    assert (smoke.results / first["run_id"] / "run.json").read_bytes() == smoke.first_run_json
    # The order was shuffled once, with the seed recorded at the first start.
    assert record["order_seed"] == smoke.record_after_stop["order_seed"]
    assert [r["run_id"] for r in record["runs"]] == [
        r["run_id"] for r in smoke.record_after_stop["runs"]
    ]


def test_each_run_ran_its_settings_and_its_fault(smoke):
    spec = yaml.safe_load(SPEC.read_text())
    for run in smoke.record()["runs"]:
        out = smoke.results / run["run_id"]
        recorded = json.loads((out / "run.json").read_text())
        assert (recorded["engine"], recorded["fault"]) == (run["engine"], run["fault"])
        for name, value in run["parameters"].items():
            assert recorded["parameters"][name] == value, name
        (schedule,) = [f for f in spec["faults"] if run["engine"] in f["engines"]]
        fault_at_s, duration_s = schedule["fault_at_s"], schedule["duration_s"]
        _, summary, timeline = check_delivery_and_fault(out, run["fault"], fault_at_s, duration_s)
        if run["engine"] == "flink":
            check_flink_restarted(out, summary, timeline)
        else:
            check_storm_worker_relaunched(out)


def test_it_ends_with_one_report_over_every_run(smoke):
    record = smoke.record()
    with (smoke.study_dir / "comparison.csv").open() as handle:
        rows = [row for row in csv.DictReader(handle) if row["kind"] == "run"]
    assert sorted(row["run_id"] for row in rows) == sorted(r["run_id"] for r in record["runs"])
    assert {row["engine"] for row in rows} == {"flink", "storm"}
    # Storm ran at most once: loss is its finding to count, not to forbid.
    guarantees = {r["run_id"]: r["parameters"]["guarantee"] for r in record["runs"]}
    assert set(guarantees.values()) == {"exactly_once", "at_most_once"}
    assert all(
        float(row["loss_rate"]) == 0 for row in rows if guarantees[row["run_id"]] != "at_most_once"
    ), rows
    report = (smoke.study_dir / "report.md").read_text()
    drawn = {path.name for path in (smoke.study_dir / "plots").iterdir()}
    if any(row["overloaded"] != "true" for row in rows):
        assert drawn >= PLOTS
    else:  # both runs fell behind on this machine: plots of a queue are not drawn, and it says so
        assert drawn == set()
        assert "(2 of 2 runs flagged overloaded and left out): latency_percentiles.png" in report
    assert all(f"(plots/{name})" in report for name in drawn)
    assert all(run["run_id"] in report for run in record["runs"])
    assert str(record["order_seed"]) in report
