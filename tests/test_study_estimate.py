"""The study's estimate of a run's overhead: from the study's own runs, the phases of earlier
runs in the results directory, or the fixed model (hand-built run directories)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from study_fixtures import TEST_STUDIES, fake_kit

from analysis.study import plan, spec
from analysis.study.estimate import (
    MIN_EARLIER_RUNS,
    earlier_overheads,
    overhead_for,
    phase_overhead_s,
)

T0 = 1_800_000_000_000


@pytest.fixture
def kit(tmp_path):
    return fake_kit(tmp_path / "kit")


def sweep_plan(kit) -> plan.Plan:
    return plan.make_plan(spec.load(TEST_STUDIES / "sweep.yml", kit), kit, 1.0, order_seed=3)


def recorded_run(
    results: Path,
    run_id: str,
    engine: str,
    span_s: float,
    sending_s: float,
    fault: str = "kill_taskmanager",
    status: str = "complete",
    parameters: dict | None = None,
) -> Path:
    """A result directory whose phases span span_s, for a producer meant to send for
    sending_s (count and rate in its parameters)."""
    run_dir = results / run_id
    run_dir.mkdir(parents=True)
    end = T0 + int(span_s * 1000)
    record = {
        "run_id": run_id,
        "engine": engine,
        "fault": fault,
        "status": status,
        "parameters": {
            "count": int(sending_s * 100),
            "rate": 100,
            **(parameters if parameters is not None else {"quiet_s": 10}),
        },
        "phases": [
            {"name": "facts", "start_ms": T0, "end_ms": T0 + 3000},
            {"name": "producing", "start_ms": T0 + 3000, "end_ms": end - 1000},
            {"name": "record_again", "start_ms": end - 1000, "end_ms": end},
        ],
    }
    (run_dir / "run.json").write_text(json.dumps(record))
    # The producer's own summary says it fell behind: the estimate takes the nominal time.
    produced = {"start_ms": T0 + 5000, "end_ms": T0 + 5000 + int(sending_s * 1500)}
    (run_dir / "produced.summary.json").write_text(json.dumps(produced))
    return run_dir


def test_a_runs_phase_overhead_leaves_out_the_nominal_sending_commit_wait_and_quiet(tmp_path):
    flink = recorded_run(
        tmp_path, "f", "flink", 300, 142, parameters={"quiet_s": 10, "checkpoint_interval_s": 2}
    )
    # 300 s of phases - 142 s sending (14,200 at 100/s) - 2 s commit wait - 10 s quiet.
    assert phase_overhead_s(flink) == ("flink", True, pytest.approx(146.0))
    storm = recorded_run(
        tmp_path,
        "s",
        "storm",
        200.5,
        100,
        fault="none",
        parameters={"quiet_s": 5, "storm_offset_commit_period_s": 5},
    )
    assert phase_overhead_s(storm) == ("storm", False, pytest.approx(90.5))
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "run.json").write_text(json.dumps({"engine": "flink", "phases": []}))
    assert phase_overhead_s(bare) is None


def test_earlier_overheads_count_complete_runs_only_per_engine_and_fault(tmp_path):
    recorded_run(tmp_path, "a", "flink", 300, 142)  # 148 s
    recorded_run(tmp_path, "b", "flink", 250, 142)  # 98 s
    recorded_run(tmp_path, "c", "flink", 400, 142, status="incomplete")
    recorded_run(tmp_path, "d", "flink", 200, 100, fault="none")  # 90 s
    recorded_run(tmp_path, "e", "storm", 300, 142)  # 148 s
    found = earlier_overheads(tmp_path)
    assert found == {
        ("flink", True): [pytest.approx(148.0), pytest.approx(98.0)],
        ("flink", False): [pytest.approx(90.0)],
        ("storm", True): [pytest.approx(148.0)],
    }


def test_the_overhead_comes_from_the_best_evidence_there_is(tmp_path, kit):
    the_plan = sweep_plan(kit)
    flink_run = next(r for r in the_plan.runs if r.engine == "flink")
    storm_run = next(r for r in the_plan.runs if r.engine == "storm")
    assert MIN_EARLIER_RUNS == 2

    # Nothing measured: the fixed model.
    nothing = overhead_for(flink_run, the_plan, kit, {}, {})
    assert (nothing.seconds, nothing.source) == (
        plan.RUN_OVERHEAD_S,
        "the kit's fixed model (no earlier run to measure)",
    )
    # One earlier run is not enough (often a first one, with the job's build in it).
    assert overhead_for(flink_run, the_plan, kit, {}, {("flink", True): [150.0]}) == nothing

    # Earlier runs of the same engine and kind: their median.
    earlier = {("flink", True): [100.0, 130.0, 400.0], ("flink", False): [60.0, 70.0]}
    taken = overhead_for(flink_run, the_plan, kit, {}, earlier)
    assert taken.seconds == 130.0
    assert taken.source == "median of 3 earlier fault flink runs' phases in the results directory"
    # Too few of the same kind: the engine's runs of both kinds.
    taken = overhead_for(flink_run, the_plan, kit, {}, {("flink", False): [60.0, 70.0]})
    assert taken.seconds == 65.0
    assert "2 earlier flink runs" in taken.source
    mixed = {("flink", True): [100.0], ("flink", False): [60.0]}
    assert overhead_for(flink_run, the_plan, kit, {}, mixed).seconds == 80.0

    # A finished run of this study: the wall time beyond its estimate without overhead,
    # for its engine; the other engine takes it only without evidence of its own.
    other = next(r for r in the_plan.runs if r.engine == "flink" and r.run_id != flink_run.run_id)
    walls = {other.run_id: plan.estimated_s(other, kit, overhead_s=0) + 80.0}
    taken = overhead_for(flink_run, the_plan, kit, walls, earlier)
    assert (taken.seconds, taken.source) == (
        pytest.approx(80.0),
        "this study's 1 finished flink run(s)",
    )
    assert overhead_for(storm_run, the_plan, kit, walls, {}).source == (
        "this study's 1 finished run(s) of other engines"
    )
    storm_earlier = {("storm", True): [200.0, 220.0]}
    assert overhead_for(storm_run, the_plan, kit, walls, storm_earlier).seconds == 210.0
