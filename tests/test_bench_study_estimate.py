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


def test_the_dry_runs_study_estimate_and_source_are_read():
    assert study_estimate.read_dry_run(DRY_RUN) == (
        "smoke",
        485,
        "flink: median of 3 earlier flink runs' phases in the results directory",
    )


def test_a_dry_run_without_an_estimate_is_an_error():
    with pytest.raises(ValueError, match="no estimate"):
        study_estimate.read_dry_run("study smoke (studies/smoke.yml): 2 runs\n")


def test_the_error_is_against_the_measured_time():
    # (1060 - 720) / 720 = 47.2 % high; (430 - 465) / 465 = 7.5 % low.
    assert study_estimate.error_percent(1060, 720) == 47.2
    assert study_estimate.error_percent(430, 465) == -7.5


def test_the_result_file_has_a_cell_per_column_and_the_runs_commit(tmp_path):
    run_dir = tmp_path / "smoke-flink-r1"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(
        json.dumps({"kit_commit": "0123abcd" * 5, "kit_dirty": False, "hosts": {}})
    )
    row = ["studies/smoke.yml", 2, 2, 284, 465, 492, 5.8, "flink: ...", 594, 27.7]
    data = study_estimate.result([row], [run_dir])
    assert (data["bench"], data["commit"]) == ("bench/study_estimate.py", "0123abc")
    (table,) = data["tables"]
    assert table["rows"] == [row] and len(table["columns"]) == len(row)
    assert not any("dirty" in note for note in table["notes"])


def test_producing_is_counted_as_the_estimate_counts_it():
    record = {
        "runs": [
            {"parameters": {"count": 15000, "rate": 500}},
            {"parameters": {"count": 1001, "rate": 500}},  # ceil: 3 s
            {"parameters": {"rate": 250}},  # the kit's default count
        ],
        "capacity": {
            "flink": {"capacity_spec": {"warmup_s": 3, "steady_s": 10}, "trials": [{}, {}]},
        },
    }
    assert study_estimate.nominal_producing_s(record, {"count": 2500, "rate": 100}) == (
        30 + 3 + 10 + 2 * 13
    )
