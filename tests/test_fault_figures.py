"""bench/fault_figures.py's per-setting figures, on hand-built runs: which runs they count."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import fault_figures  # noqa: E402
from fault_figures import TIMELINE, FaultRun  # noqa: E402


def fault_run(run_id: str, recovery_s: float, **changed) -> FaultRun:
    fields = {
        "engine": "flink",
        "fault": "kill_taskmanager",
        "setting": 5,
        "target": "node2",
        "status": "complete",
        "holds": True,
        "lost": 0,
        "produced": 1000,
        "duplicate_records": 10,
        "timeline": {name: recovery_s for name in TIMELINE},
        "censored": {name: False for name in TIMELINE},
        "failure_cost_ms": recovery_s * 1000,
        "fault_duplicates": 10,
        "replayed_s": 0.5,
        "checkpoint_age_s": 1.0,
        "before_p50": 10,
        "before_p99": 20,
        "after_p50": 10,
        "after_p99": 20,
        "steady_reached": True,
        "overloaded": False,
        "wall_s": None,
        **changed,
    }
    return FaultRun(run_id=run_id, **fields)


def test_overloaded_and_clock_moved_runs_are_left_out_of_the_means_but_not_the_verdicts():
    runs = [
        fault_run("a", 10.0, clock_moved=False),
        fault_run("b", 20.0),  # run.json could not say: counted
        fault_run("c", 90.0, clock_moved=True, holds=False, lost=3),
        fault_run("d", 70.0, overloaded=True),
    ]
    row = dict(
        zip(
            fault_figures.GROUP_COLUMNS,
            fault_figures.group_row("flink", "kill_taskmanager", "checkpoint_interval_s", 5, runs),
            strict=True,
        )
    )
    assert row["runs (counted)"] == "4 (2)"
    assert row["verdicts held"] == "3 of 4" and row["lost"] == 3
    assert row["recovery s"] == "15.0 (10.0-20.0)"
    assert row["failure cost ms"] == "15000.0 (10000.0-20000.0)"
    every = [
        dict(zip(fault_figures.RUN_COLUMNS, fault_figures.run_row(r, "k"), strict=True))
        for r in runs
    ]
    assert [r["wall clock moved"] for r in every] == ["no", "unknown", "yes", "unknown"]


def test_guarantee_figures_group_by_engine_and_guarantee(monkeypatch, tmp_path):
    import guarantee_figures  # noqa: PLC0415  (bench/, put on the path above)

    made = {
        "f-eo": ("exactly_once", fault_run("f-eo", 80.0, duplicate_records=0)),
        "f-amo": ("at_most_once", fault_run("f-amo", 40.0, lost=900, duplicate_records=0)),
        "f-alo": ("at_least_once", fault_run("f-alo", 50.0)),
        "s-amo": (
            "at_most_once",
            fault_run("s-amo", 25.0, engine="storm", fault="kill_storm_worker", lost=30),
        ),
    }
    monkeypatch.setattr(guarantee_figures, "figures_of", lambda out: made[out.name][1])
    monkeypatch.setattr(guarantee_figures, "guarantee_of", lambda out: made[out.name][0])
    table = guarantee_figures.load([tmp_path / name for name in made])
    assert [(engine, guarantee) for engine, _, _, guarantee, _ in table] == [
        ("flink", "at_most_once"),
        ("flink", "at_least_once"),
        ("flink", "exactly_once"),
        ("storm", "at_most_once"),
    ]
    rows = [fault_figures.group_row(*row) for row in table]  # type: ignore[arg-type]
    assert rows[0][2] == "guarantee=at_most_once" and rows[0][5] == 900
    assert rows[3][1] == "kill_storm_worker" and rows[3][5] == 30
