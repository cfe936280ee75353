"""bench/study_estimate.py without a test host: the dry run's output read back, and the result
file from hand-built measurements (its error against the measured time)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import study_estimate  # noqa: E402

from analysis.study.progress import duration_text  # noqa: E402

DRY_RUN = """study smoke (studies/smoke.yml): 2 runs
  1  smoke-flink-kill_taskmanager-r1  to run, ~3m 40s
each run's estimate: producing, the commit wait and the quiet period, plus its
overhead taken from flink: median of 3 earlier flink runs' phases in the results directory
to run: 2 of 2, estimated 8m 05s with the analysis after the last run (~1m 00s; at most 3 failures)
"""


@pytest.mark.parametrize("seconds", [0, 45, 60, 485, 3599])
def test_every_duration_the_dry_run_writes_reads_back(seconds):
    assert study_estimate.duration_s(duration_text(seconds)) == seconds


def test_an_hour_long_estimate_reads_back_to_the_minute():
    assert study_estimate.duration_s(duration_text(2 * 3600 + 25 * 60 + 40)) == 2 * 3600 + 25 * 60


def test_the_dry_runs_estimate_and_its_source_are_read():
    assert study_estimate.read_dry_run(DRY_RUN) == (
        2,
        485,
        "flink: median of 3 earlier flink runs' phases in the results directory",
    )


def test_a_dry_run_without_an_estimate_is_an_error():
    with pytest.raises(ValueError, match="no estimate"):
        study_estimate.read_dry_run("study smoke: 2 runs\n")


def test_the_result_gives_the_error_against_the_measured_time(tmp_path):
    run_dir = tmp_path / "smoke-flink-r1"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(
        json.dumps({"kit_commit": "0123abcd" * 5, "kit_dirty": False, "hosts": {}})
    )
    measured = {
        "spec": "studies/smoke.yml",
        "runs": 2,
        "attempts": 2,
        "complete": 2,
        "producing_s": 284.0,
        "estimate_s": 485,
        "wall_s": 440.0,
        "source": "flink: the kit's fixed model",
        "run_dirs": [str(run_dir)],
    }
    data = study_estimate.result([measured], tmp_path)
    assert data["bench"] == "bench/study_estimate.py"
    assert data["commit"] == "0123abc"
    (table,) = data["tables"]
    # (485 - 440) / 440 = 10.2 % high.
    assert table["rows"] == [
        ["studies/smoke.yml", 2, 2, 284, 485, 440, 10.2, "flink: the kit's fixed model"]
    ]
    assert len(table["columns"]) == len(table["rows"][0])


def test_producing_is_summed_over_the_recorded_runs():
    record = {
        "runs": [
            {"parameters": {"count": 15000, "rate": 500}},
            {"parameters": {"count": 71000, "rate": 500}},
            {"parameters": {"count": 1000, "rate": 250}},
        ]
    }
    assert study_estimate.producing_s(record) == 30 + 142 + 4
