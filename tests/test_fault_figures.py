"""bench/fault_figures.py's per-setting figures, on hand-built runs: which runs they count."""

from __future__ import annotations

import json
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


def test_an_engines_faults_get_rows_of_their_own_and_name_themselves_beside_the_reference():
    runs = [
        fault_run("f1", 10.0, fault="stop_taskmanager"),
        fault_run("f2", 30.0),
        fault_run("f3", 50.0, setting=30),
        fault_run("s1", 20.0, engine="storm", fault="kill_supervisor"),
    ]
    table = fault_figures.grouped(runs)
    assert [(engine, fault, setting, [r.run_id for r in chosen])
            for engine, fault, _, setting, chosen in table] == [
        ("flink", "kill_taskmanager", 5, ["f2"]),
        ("flink", "kill_taskmanager", 30, ["f3"]),
        ("flink", "stop_taskmanager", 5, ["f1"]),
        ("storm", "kill_supervisor", 5, ["s1"]),
    ]  # fmt: skip
    rows = {row[0]: row for row in fault_figures.reference_part(table)["rows"]}
    assert rows["recovery s"][2] == (
        "kill_taskmanager 5 s: 30.0 (30.0-30.0); kill_taskmanager 30 s: 50.0 (50.0-50.0); "
        "stop_taskmanager 5 s: 10.0 (10.0-10.0)"
    )
    assert rows["recovery s"][4] == "5 s: 20.0 (20.0-20.0)"  # one fault: not named
    assert rows["loss"][4] == "5 s: 0 in 1 run"


def test_a_studys_parts_give_its_intervals_what_they_show_and_its_time(tmp_path):
    from test_compare_verdicts import fault, summary  # noqa: PLC0415

    dirs = []
    for n, recovery in enumerate((10.0, 12.0, 14.0, 40.0, 42.0, 44.0)):
        run_dir = summary(tmp_path, f"s-run-{n}", [fault(recovery, 0.5)])
        if n >= 3:  # the second group: another checkpoint interval
            data = json.loads((run_dir / "summary.json").read_text())
            data["parameters"]["checkpoint_interval_s"] = 30
            (run_dir / "summary.json").write_text(json.dumps(data))
        sent = {"start_ms": 0, "end_ms": 100_000}  # 100 s of producing each
        (run_dir / "produced.summary.json").write_text(json.dumps(sent))
        dirs.append(run_dir)
    attempts = [
        {"run_id": d.name, "attempts": [{"status": "complete", "wall_s": 150.0 + 10 * n}]}
        for n, d in enumerate(dirs)
    ]
    capacity = {"flink": {"trials": [{"wall_s": 60.0}, {"wall_s": 90.0}]}}
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "study.json").write_text(json.dumps({"runs": attempts, "capacity": capacity}))
    intervals, spent = fault_figures.study_parts(dirs, tmp_path, "s")
    rows = {row[0]: row for row in intervals["rows"]}
    assert [row[1] for row in rows.values()] == ["3", "3"]
    # Recoveries 10, 12, 14: mean 12, sd 2, t(2) = 4.303: 12 ± 4.97; 40, 42, 44 likewise.
    assert rows["flink checkpoint_interval_s=5"][2] == "12.0 [7.0, 17.0]"
    assert rows["flink checkpoint_interval_s=30"][2] == "42.0 [37.0, 47.0]"
    # The notes: the findings, each from the intervals.
    assert intervals["notes"][:2] == [
        "Verdicts: 6 of 6 runs with a verdict held their guarantee.",
        "Loss: no run with a verdict lost an acknowledged message.",
    ]
    assert "checkpoint_interval_s=5 had a lower recovery s" in intervals["notes"][2]
    assert "No difference shown in loss, replayed s/fault" in intervals["notes"][2]
    assert intervals["notes"][-1].startswith("Overlapping intervals say only")
    assert spent["rows"] == [[6, 17.5, 6, 10.0, 57, "50 / 75 / 100", 2, 2.5]]


def test_a_studys_capacity_search_is_tabulated_trial_by_trial(tmp_path):
    def trial(run_id, rate, p99, overloaded=False, status="complete"):
        return {"run_id": run_id, "rate": rate, "status": status, "overloaded": overloaded,
                "p50_ms": p99 / 4, "p99_ms": p99, "send_lag_p99_ms": 5.0,
                "output_per_s": rate, "wall_s": 90.0}  # fmt: skip

    spec = {"p99_bound_ms": 1000.0, "from_rate": 500.0, "runs": 5, "steady_s": 30, "warmup_s": 10}
    record = {
        "capacity": {
            "storm": {
                "rate": 200.0, "lowest_failing": 300.0, "lower_bound": False,
                "trials": [trial("s1", 500.0, 1299), trial("s2", 200.0, 619),
                           trial("s3", 300.0, 400, overloaded=True)],
                "capacity_spec": spec, "settings": {"storm_message_timeout_s": 5},
                "measured_utc": "2026-12-07T17:00:25Z",
            },
            "flink": {
                "rate": 8000.0, "lowest_failing": None, "lower_bound": True,
                "trials": [trial("f1", 8000.0, 500)], "capacity_spec": spec, "settings": {},
            },
        }
    }  # fmt: skip
    runs = []
    for engine in ("storm", "flink"):
        run_dir = tmp_path / engine
        run_dir.mkdir()
        (run_dir / "run.json").write_text(
            json.dumps({"engine": engine, "parameters": {"rate": 100}})
        )
        runs.append(run_dir)
    part = fault_figures.capacity_part(record, runs)
    assert part is not None
    assert [row[-1] for row in part["rows"]] == [
        "no: steady p99 1299 ms is not under 1000 ms",
        "yes",
        "no: the collector flagged it overloaded",
        "yes",
    ]
    assert part["notes"] == [
        "storm: capacity 200/s (lowest failing 300/s), measured with storm_message_timeout_s 5 "
        "at 2026-12-07T17:00:25Z; the study's runs sent at 100/s, 0.50 of 200/s.",
        "flink: capacity at least 8,000/s (no rate failed), measured with no settings at an "
        "unrecorded time; the study's runs sent at 100/s, ≤ 0.01 of ≥ 8,000/s.",
    ]
    assert fault_figures.capacity_part({"capacity": {}}, runs) is None


def timed(run_id: str, setting: int, detected, whole, recovery, **changed) -> FaultRun:
    timeline = {"detected_s": detected, "engine_whole_s": whole, "first_output_s": whole,
                "caught_up_s": recovery, "recovery_s": recovery}  # fmt: skip
    return fault_run(run_id, 0.0, setting=setting, timeline=timeline, **changed)


def test_recovery_against_the_setting_is_split_into_its_runs_own_stages():
    runs = [
        timed("a1", 5, 10.0, 30.0, 40.0, replayed_s=1.0, checkpoint_age_s=2.0),
        timed("a2", 5, 12.0, 32.0, 44.0, replayed_s=1.0, checkpoint_age_s=3.0),
        timed("a3", 5, 11.0, 31.0, 42.0, replayed_s=1.0, checkpoint_age_s=2.5),
        timed("b1", 60, 10.0, 31.0, 70.0, replayed_s=20.0, checkpoint_age_s=30.0),
        timed("b2", 60, 11.0, 33.0, 76.0, replayed_s=22.0, checkpoint_age_s=32.0),
        timed("b3", 60, 10.5, 32.0, 73.0, replayed_s=21.0, checkpoint_age_s=31.0),
    ]
    part = fault_figures.recovery_part(fault_figures.grouped(runs))
    rows = {row[2]: row for row in part["rows"]}
    # recovery, detection, return, after whole, replayed, checkpoint age: means by hand.
    assert rows["checkpoint_interval_s=5"][3:] == ["3 of 3", 42.0, 11.0, 20.0, 11.0, 1.0, 2.5]
    assert rows["checkpoint_interval_s=60"][3:] == ["3 of 3", 73.0, 10.5, 21.5, 41.0, 21.0, 31.0]
    # 42 [37.0, 47.0] against 73 [65.5, 80.5] (t(2) = 4.303): the intervals separate.
    (note,) = part["notes"]
    assert note == (
        "flink, kill_taskmanager, checkpoint_interval_s 5 to 60 (mean recovery s, runs split: "
        "5: 42.0, 60: 73.0). 5 to 60: the 95 % intervals separate. By stage: detection 11.0 "
        "to 10.5 s, the engine's return 20.0 to 21.5 s, after the engine was whole 11.0 to "
        "41.0 s; the largest move is after the engine was whole (+30.0 s); replayed input per "
        "fault went from 1.0 to 21.0 s; the checkpoint's age at the fault from 2.5 to 31.0 s."
    )
    # A censored run: counted in the row, and the move is not split.
    censored = timed("b4", 60, 10.0, 31.0, 90.0, censored={n: n == "recovery_s" for n in TIMELINE})
    part = fault_figures.recovery_part(fault_figures.grouped([*runs, censored]))
    assert part["rows"][1][3] == "3 of 4"
    assert part["notes"][0].endswith(
        ". Not split: at 60 1 of 4 runs did not show a recovery (>= 90.0 s). 5 to 60: not split."
    )


def test_each_step_between_neighbouring_settings_is_judged_on_its_own():
    # As the user's study ran Storm: one counted run at the lowest setting, three each at the
    # others; the lowest to the highest is judged as well.
    runs = [
        timed("a1", 5, 5.0, 20.0, 30.0),
        *(timed(f"b{n}", 30, 10.0, 30.0, value) for n, value in enumerate((55.0, 57.0, 59.0))),
        *(timed(f"c{n}", 60, 10.0, 30.0, value) for n, value in enumerate((78.0, 80.0, 82.0))),
    ]
    (note,) = fault_figures.recovery_part(fault_figures.grouped(runs))["notes"]
    # 57 [52.0, 62.0] against 80 [75.0, 85.0] (t(2) = 4.303, sd 2): they separate.
    assert note == (
        "flink, kill_taskmanager, checkpoint_interval_s 5 to 60 (mean recovery s, runs split: "
        "5: 30.0, 30: 57.0, 60: 80.0). 5 to 30: not judged: a group of one run has no "
        "interval. 30 to 60: the 95 % intervals separate. By stage: "
        "detection 10.0 to 10.0 s, the engine's return 20.0 to 20.0 s, after the engine was "
        "whole 27.0 to 50.0 s; the largest move is after the engine was whole (+23.0 s); "
        "replayed input per fault went from 0.5 to 0.5 s; the checkpoint's age at the fault "
        "from 1.0 to 1.0 s. Lowest to highest, 5 to 60: not judged: a group of one run has no "
        "interval."
    )
    # A middle setting that does not split: its reason is said once, and each step with it is
    # not split; the lowest and highest are still judged against each other.
    early = timed("b3", 30, 10.0, 30.0, 25.0)
    (note,) = fault_figures.recovery_part(
        fault_figures.grouped([*runs[1:], early, *(timed(f"a{n}", 5, 10.0, 20.0, v)
                                                   for n, v in enumerate((29.0, 30.0, 31.0)))])
    )["notes"]  # fmt: skip
    assert note.count("does not give detection") == 1
    assert ". 5 to 30: not split. 30 to 60: not split. Lowest to highest, 5 to 60: the 95 % " in (
        note
    )


def test_a_move_the_intervals_do_not_show_or_the_timelines_do_not_split_is_said_so():
    overlapping = [
        *(timed(f"a{n}", 5, 10.0, 30.0, value) for n, value in enumerate((40.0, 50.0, 45.0))),
        *(timed(f"b{n}", 30, 10.0, 30.0, value) for n, value in enumerate((48.0, 58.0, 53.0))),
    ]
    (note,) = fault_figures.recovery_part(fault_figures.grouped(overlapping))["notes"]
    assert note.endswith(". 5 to 30: the 95 % intervals overlap: no difference shown.")
    alone = [timed("a", 5, 10.0, 30.0, 40.0), timed("b", 30, 10.0, 30.0, 90.0)]
    (note,) = fault_figures.recovery_part(fault_figures.grouped(alone))["notes"]
    assert note.endswith(". 5 to 30: not judged: a group of one run has no interval.")
    # Recovery before the engine said it was whole: the stages are not in order.
    early = [timed("a", 5, 10.0, 30.0, 25.0), timed("b", 30, 10.0, 30.0, 60.0)]
    (note,) = fault_figures.recovery_part(fault_figures.grouped(early))["notes"]
    assert note.endswith(
        ". Not split: at 5 a run's timeline does not give detection, return and recovery in "
        "order. 5 to 30: not split."
    )
    overloaded = [timed("a", 5, 10.0, 30.0, 40.0, overloaded=True), timed("b", 30, 1, 2, 3)]
    (note,) = fault_figures.recovery_part(fault_figures.grouped(overloaded))["notes"]
    assert ": at 5 no run is counted (overloaded or the clock moved)" in note
