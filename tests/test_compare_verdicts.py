"""compare and the study report: verdicts per run and group, replayed seconds per fault,
censored recoveries as lower bounds, steady latency before and after, and loss over every
attempt of a study (runs moved aside included)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from rich.console import Console
from study_fixtures import TEST_STUDIES, FakeExperiment, fake_kit

from analysis import compare
from analysis.study import plan, spec
from analysis.study.progress import RichProgress
from analysis.study.report import attempt_directories, attempt_loss, write_report
from analysis.study.runner import StudyRunner, load_record


def fault(recovery, replayed, bound=None):
    entry = {"stall_s": 1.0, "recovery_s": recovery, "replayed_s": replayed}
    if recovery is None:
        entry |= {"recovery_censored": True, "recovery_at_least_s": bound}
    else:
        entry |= {"recovery_censored": False, "recovery_at_least_s": None}
    return entry


def summary(root, run_id, faults, lost=0, before=(100, 200), after=(110, 220), reached=True):
    directory = root / run_id
    directory.mkdir()
    held = lost == 0
    reason = f"at-least-once {'held' if held else 'violated'}: {lost} of 1,000 ... lost"
    data = {
        "run_id": run_id,
        "engine": "flink",
        "fault": "kill-taskmanager",
        "parameters": {"checkpoint_interval_s": 5, "seed": len(run_id)},
        "produced": 1000,
        "lost": lost,
        "loss_rate": lost / 1000,
        "duplicate_rate": 0.01,
        "latency_ms": {"p50": 50, "p99": 5000, "p99.9": 9000, "max": 9500},
        "faults": faults,
        "steady_state": {"reached": reached},
        "latency_phases": {
            "before_fault": {"p50": before[0], "p99": before[1]},
            "after_recovery": {"p50": after[0], "p99": after[1]},
        },
        "verdict": {
            "guarantee": "at_least_once",
            "holds": held,
            "lost": lost,
            "duplicate_records": 10,
            "reason": reason,
        },
    }
    (directory / "summary.json").write_text(json.dumps(data))
    return directory


def test_compare_shows_verdicts_replayed_seconds_bounds_and_phases(tmp_path):
    runs = [
        # Replayed 1 s and 3 s at its two faults: 2 s per fault; worst recovery 6 s.
        summary(tmp_path, "a", [fault(4.0, 1.0), fault(6.0, 3.0)]),
        # Lost 123 acknowledged messages; its recovery did not show in 41 s of producing; it
        # never reached a steady state before the fault.
        summary(tmp_path, "b", [fault(None, 0.5, bound=41.0)], lost=123, after=(120, 240)),
        summary(tmp_path, "c", [fault(10.0, 1.5)], before=(300, 400), after=(130, 260)),
    ]
    first = json.loads((runs[1] / "summary.json").read_text())
    first["steady_state"]["reached"] = False
    (runs[1] / "summary.json").write_text(json.dumps(first))
    out = tmp_path / "cmp"
    (group,) = compare.compare(runs, out)
    assert [r.verdict_text() for r in group.runs] == ["held", "VIOLATED (123 lost)", "held"]
    assert group.held_text() == "2 of 3 held"
    # Replayed seconds per fault: the mean over each run's faults, then over the runs.
    assert group.mean(compare._metric("replayed_s")) == pytest.approx((2.0 + 0.5 + 1.5) / 3)
    # The bound counts as a value; the mean over 6, 41 and 10 is itself a lower bound.
    assert group.recovery_points() == [(6.0, False), (41.0, True), (10.0, False)]
    table = (out / "comparison.md").read_text()
    assert "| a | unknown | held | 0 % | 2 | 1 % |" in table
    assert "| b | unknown | VIOLATED (123 lost) | 12.3 % | 0.5 | 1 % |" in table
    # Run b: recovery >= 41, no steady before (never reached), after 120 / 240.
    assert "| >= 41 | – | 120 / 240 |" in table
    assert "| 6 | 100 / 200 | 110 / 220 |" in table
    # The group: 2 of 3 held; recovery >= mean(6, 41, 10) = 19 with 1 censored; before over
    # the runs that reached a steady state (a, c), after over all three.
    assert "| 2 of 3 held |" in table
    assert "| >= 19 (1 censored) | 200 / 300 | 120 / 240 |" in table
    rows = list(csv.DictReader((out / "comparison.csv").open()))
    assert [r["verdict"] for r in rows] == ["held", "violated", "held", "2 of 3 held", "", "", ""]
    mean = next(r for r in rows if r["kind"] == "mean")
    assert float(mean["recovery_bound_s"]) == 19.0 and float(mean["recovery_censored"]) == 1.0
    # recovery_s keeps its meaning: observed recoveries only (b has none).
    assert float(mean["recovery_s"]) == 8.0 and mean["lost"] == "41.0"
    assert (out / "plots" / "replayed.png").is_file() and (out / "plots" / "recovery.png").is_file()


def test_an_older_summary_without_bounds_is_named_not_dropped(tmp_path):
    older = summary(tmp_path, "old", [{"stall_s": 2.0, "recovery_s": None}])
    newer = summary(tmp_path, "new", [fault(5.0, 1.0)])
    (group,) = compare.group_runs(compare.load_runs([older, newer]))
    assert compare._group_recovery_cell(group) == "5 (1 not in run)"
    assert compare._recovery_cell(group.runs[0]) == "not in run"


def run_plan(tmp_path):
    kit = fake_kit(tmp_path / "kit")
    the_plan = plan.make_plan(spec.load(TEST_STUDIES / "sweep.yml", kit), kit, 1.0, order_seed=3)
    return kit, the_plan


def runner(the_plan, kit, results, experiment):
    progress = RichProgress(Console(file=io.StringIO(), force_terminal=False, width=200))
    return StudyRunner(the_plan, kit, results, experiment, progress)


def test_the_study_reports_loss_over_every_attempt_including_those_moved_aside(tmp_path):
    kit, the_plan = run_plan(tmp_path)
    results = tmp_path / "results"
    target, lossy = the_plan.runs[1].run_id, the_plan.runs[2].run_id
    fake = FakeExperiment(
        results,
        lambda run, call: {target: "incomplete", lossy: "lossy"}.get(run.run_id, "complete"),
    )

    def experiment(run, extravars, on_phase):
        result = fake(run, extravars, on_phase)
        if run.run_id == target:  # the collector counted 5 ids missing; no summary.json
            run_dir = results / run.run_id
            record = json.loads((run_dir / "run.json").read_text())
            record["verdict"]["lost"] = 5
            (run_dir / "run.json").write_text(json.dumps(record))
            (run_dir / "summary.json").unlink()
        return result

    runner(the_plan, kit, results, experiment).run()
    outcome = runner(the_plan, kit, results, FakeExperiment(results)).run()
    assert outcome.finished and lossy in outcome.complete
    count = the_plan.runs[2].parameters["count"]
    record = load_record(results / "sweep")
    entry = next(e for e in record["runs"] if e["run_id"] == target)
    (moved, moved_dir), (last, now) = attempt_directories(results, entry)
    assert moved["status"] == "incomplete" and last["status"] == "complete"
    assert moved_dir == results / "sweep" / "attempts" / f"{target}-1" and now == results / target
    assert attempt_loss(moved_dir, moved) == {
        "lost": 5,
        "acknowledged": None,
        "holds": None,
        "source": "study.json attempt verdict",
    }
    # Without study.json's copy, the moved directory's run.json says the same.
    assert attempt_loss(moved_dir)["source"] == "run.json verdict"

    text = write_report(the_plan, results, outcome, lambda run_dirs: None).read_text()
    attempts = sum(len(e["attempts"]) for e in record["runs"])
    assert attempts == len(the_plan.runs) + 1
    assert "## Loss over every attempt" in text
    assert f"{attempts} attempt(s), those moved aside and repeated included: 2 lost" in text
    assert "12 in all." in text
    assert (
        f"| {target} | 1 | incomplete | 5 | – | – | study.json attempt verdict | {moved_dir} |"
        in text
    )
    assert f"| {lossy} | 1 | complete | 7 | {count:,} | VIOLATED | summary.json verdict |" in text
