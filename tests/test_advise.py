"""Checkpoint-interval advice: the models against hand-computed values, and the measured runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from analysis import advise
from analysis.__main__ import main
from analysis.io import InputError


@pytest.mark.parametrize(
    "x",
    [-1 / math.e + 1e-12, -0.367, -0.3, -0.1, -1e-9, 1e-9, 0.5, 1.0, 2.9, 3.1, 10.0, 1e6, 1e300],
)
def test_lambert_w_solves_its_equation(x):
    w = advise.lambert_w(x)
    assert w >= -1
    assert w * math.exp(w) == pytest.approx(x, rel=1e-12, abs=1e-15)


def test_lambert_w_known_values():
    assert advise.lambert_w(0.0) == 0.0
    assert advise.lambert_w(math.e) == pytest.approx(1.0, rel=1e-15)
    assert advise.lambert_w(-1 / math.e) == pytest.approx(-1.0, abs=1e-7)
    # Omega constant: W(1).
    assert advise.lambert_w(1.0) == pytest.approx(0.5671432904097838, rel=1e-15)
    # -ln 2 exp(-ln 2) = -ln 2 / 2, and ln 2 exp(ln 2) = 2 ln 2.
    assert advise.lambert_w(-math.log(2) / 2) == pytest.approx(-math.log(2), rel=1e-14)
    assert advise.lambert_w(2 * math.log(2)) == pytest.approx(math.log(2), rel=1e-14)


def test_lambert_w_outside_its_domain():
    with pytest.raises(ValueError, match="-1/e"):
        advise.lambert_w(-0.5)


@pytest.mark.parametrize(
    ("cost_s", "mtbf_s", "lambert_s", "young_daly_s"),
    [(0.778, 600, 30.82, 30.55), (0.688, 600, 28.96, 28.73)],
)
def test_intervals_match_hand_computed_values(cost_s, mtbf_s, lambert_s, young_daly_s):
    assert round(advise.lambert_interval(cost_s, mtbf_s), 2) == lambert_s
    assert round(advise.young_daly_interval(cost_s, mtbf_s), 2) == young_daly_s


def test_lambert_interval_maximises_the_utilisation():
    cost_s, mtbf_s = 0.778, 600
    best = advise.lambert_interval(cost_s, mtbf_s)
    peak = advise.utilisation(best, cost_s, mtbf_s)
    for other in (best * 0.9, best * 0.99, best * 1.01, best * 1.1, 5, 300):
        assert advise.utilisation(other, cost_s, mtbf_s) < peak
    # lambda (T - c) / (exp(lambda T) - 1) by hand at T = 60 s.
    assert advise.utilisation(60, cost_s, mtbf_s) == pytest.approx(
        (59.222 / 600) / (math.exp(0.1) - 1)
    )
    assert advise.utilisation(0.5, cost_s, mtbf_s) == 0.0


def test_models_refuse_non_positive_inputs():
    with pytest.raises(ValueError, match="checkpoint cost"):
        advise.lambert_interval(0, 600)
    with pytest.raises(ValueError, match="between failures"):
        advise.young_daly_interval(1, -5)


# ---------------------------------------------------------------- measured runs


def write_run(
    root: Path,
    run_id: str,
    interval_s: float,
    *,
    engine: str = "flink",
    status: str = "complete",
    checkpoints: dict | None = None,
    details: dict | None = None,
    faults: list[dict] | None = None,
    phases: dict | None = None,
    p99_ms: int = 100,
    summary: bool = True,
    extra: dict | None = None,
) -> Path:
    """A run directory: run.json, summary.json (faults, latency_phases) and engine/ files."""
    run_dir = root / run_id
    (run_dir / "engine").mkdir(parents=True)
    parameters = {"count": 1000, "rate": 100}
    if engine == "flink":
        parameters["checkpoint_interval_s"] = interval_s
    else:
        parameters["storm_message_timeout_s"] = interval_s
    run = {"run_id": run_id, "engine": engine, "status": status, "parameters": parameters}
    (run_dir / "run.json").write_text(json.dumps(run))
    if checkpoints is not None:
        (run_dir / "engine" / "flink-checkpoints.json").write_text(json.dumps(checkpoints))
    if details is not None:
        (run_dir / "engine" / "flink-checkpoint-details.json").write_text(json.dumps(details))
    if summary:
        data = {
            **run,
            "fault": "kill_taskmanager",
            "produced": 1000,
            "duplicate_rate": 0.01,
            "latency_ms": {"p99": p99_ms},
            "faults": faults if faults is not None else [{"recovery_s": 5.0, "replayed_s": 1.0}],
            **({"latency_phases": phases} if phases is not None else {}),
            **(extra or {}),
        }
        (run_dir / "summary.json").write_text(json.dumps(data))
    return run_dir


def flink_checkpoints(average_ms: float, completed: int) -> dict:
    return {
        "counts": {"completed": completed, "failed": 0},
        "summary": {"end_to_end_duration": {"avg": average_ms, "max": average_ms * 2}},
        "history": [],
    }


def subtask(sync_ms: int, alignment_ms: int, async_ms: int = 0, status: str = "completed") -> dict:
    """One subtask as GET .../checkpoints/details/:id/subtasks/:vertex lists it (Flink 2.x)."""
    return {
        "@class": status,
        "index": 0,
        "status": status,
        "end_to_end_duration": sync_ms + alignment_ms + async_ms + 500,
        "start_delay": 400,
        "checkpoint": {"sync": sync_ms, "async": async_ms},
        "alignment": {"buffered": 0, "processed": 0, "persisted": 0, "duration": alignment_ms},
        "unaligned_checkpoint": False,
        "aborted": False,
    }


def checkpoint_details(per_checkpoint: dict[int, dict[str, list[dict]]]) -> dict:
    """engine/flink-checkpoint-details.json as evidence.yml writes it."""
    asked, documents = {}, {}
    for checkpoint, vertices in per_checkpoint.items():
        for vertex, subtasks in vertices.items():
            name = f"{checkpoint}/{vertex}"
            asked[name] = f"/jobs/j/checkpoints/details/{checkpoint}/subtasks/{vertex}"
            if subtasks is not None:
                documents[name] = {"id": checkpoint, "status": "COMPLETED", "subtasks": subtasks}
    return {"asked": asked, "documents": documents, "error": None}


def uniform_details(cost_ms: int, count: int) -> dict:
    """count checkpoints, each holding its slowest subtask cost_ms (sync + alignment)."""
    return checkpoint_details(
        {
            i: {"v1": [subtask(cost_ms // 2, cost_ms - cost_ms // 2), subtask(1, 1)]}
            for i in range(count)
        }
    )


def phases(before_p99: float | None, after_p99: float | None = None) -> dict:
    return {
        "before_fault": None if before_p99 is None else {"p50": before_p99 / 2, "p99": before_p99},
        "after_recovery": None if after_p99 is None else {"p50": after_p99 / 2, "p99": after_p99},
    }


def test_the_cost_is_the_slowest_subtasks_sync_plus_alignment(tmp_path):
    details = checkpoint_details(
        {
            # Vertex v1: subtasks 30 + 20 and 10 + 45 ms; v2: 5 + 0; async and start delay are
            # not counted, a pending subtask neither: c = max(50, 55, 5) = 55 ms.
            7: {
                "v1": [subtask(30, 20, async_ms=900), subtask(10, 45)],
                "v2": [subtask(5, 0), subtask(999, 999, status="pending_or_failed")],
            },
            8: {"v1": [subtask(12, 3)], "v2": [subtask(40, 1, async_ms=300)]},  # 41 ms
            9: {"v1": [subtask(500, 500)], "v2": None},  # v2 did not answer: left out
            10: {"v1": [subtask(600, 0)], "v2": [subtask(1, 1, status="pending_or_failed")]},
        }
    )
    run_dir = write_run(tmp_path, "cp5-r1", 5, details=details)
    blocking, asynchronous = advise.blocking_costs(run_dir)
    assert blocking == [0.055, 0.041]
    assert asynchronous == [0.9, 0.3]


def test_each_interval_has_its_own_cost_and_what_if(tmp_path):
    # 5 s: 30 checkpoints of 40 ms; 30 s: 5 of 200 ms and 5 of 100 ms (two runs).
    write_run(tmp_path, "cp5-r1", 5, details=uniform_details(40, 30), phases=phases(200, 300))
    write_run(tmp_path, "cp30-r1", 30, details=uniform_details(200, 5), phases=phases(200, 300))
    write_run(tmp_path, "cp30-r2", 30, details=uniform_details(100, 5), phases=phases(200, 300),
              checkpoints=flink_checkpoints(5000, 5))  # fmt: skip
    advice = advise.advise([tmp_path], mtbf_s=600)
    five, thirty = advice.measured
    assert five.cost_source == thirty.cost_source == advise.COST_BLOCKING
    assert five.checkpoint_cost_s == pytest.approx(0.04) and five.checkpoints == 30
    # Each checkpoint counts once: (5 x 0.2 + 5 x 0.1) / 10; not pooled with the 5 s runs.
    assert thirty.checkpoint_cost_s == pytest.approx(0.15) and thirty.checkpoints == 10
    assert thirty.checkpoint_cost_max_s == pytest.approx(0.2)
    assert thirty.end_to_end_s == pytest.approx(5.0)  # kept beside it, not used
    assert five.lambert_s == pytest.approx(advise.lambert_interval(0.04, 600))
    assert thirty.young_daly_s == pytest.approx(math.sqrt(2 * 0.15 * 600))
    assert thirty.utilisation == pytest.approx(advise.utilisation(30, 0.15, 600))
    # The headline: the median of the two intervals' costs.
    assert advice.checkpoint_cost_s == pytest.approx((0.04 + 0.15) / 2)
    assert advice.cost_source == advise.COST_BLOCKING and advice.checkpoints == 40
    assert advice.young_daly_s == pytest.approx(math.sqrt(2 * 0.095 * 600))


def test_without_details_the_end_to_end_duration_is_an_upper_bound(tmp_path):
    write_run(tmp_path, "cp30-r1", 30, checkpoints=flink_checkpoints(900, 10), phases=phases(1))
    history = {
        "counts": {"completed": 0},
        "summary": {},
        "history": [
            {"status": "COMPLETED", "end_to_end_duration": 600},
            {"status": "COMPLETED", "end_to_end_duration": 1000},
            {"status": "FAILED", "end_to_end_duration": 99999},
        ],
    }
    write_run(tmp_path, "cp30-r2", 30, checkpoints=history, phases=phases(1))
    advice = advise.advise([tmp_path], mtbf_s=600)
    (thirty,) = advice.measured
    # (900 x 10 + 800 x 2) / 12 ms, the two runs' means weighted by their checkpoints.
    assert thirty.checkpoint_cost_s == pytest.approx((900 * 10 + 800 * 2) / 12 / 1000)
    assert thirty.cost_source == advise.COST_END_TO_END and thirty.checkpoints == 12
    assert advice.cost_source == advise.COST_END_TO_END
    assert any("upper bound" in note for note in advice.notes)
    assert "(an upper bound)" in advise.markdown(advice)


def test_overhead_against_replayed_seconds_per_hour(tmp_path):
    faults = [{"recovery_s": 8.0, "replayed_s": 3.0}, {"recovery_s": 9.0, "replayed_s": 5.0}]
    write_run(tmp_path, "cp10-r1", 10, details=uniform_details(100, 4), faults=faults,
              phases=phases(200))  # fmt: skip
    # An older summary without replayed_s: unknown, not 0.
    write_run(tmp_path, "cp10-r2", 10, details=uniform_details(100, 4),
              faults=[{"recovery_s": 8.0}], phases=phases(200))  # fmt: skip
    advice = advise.advise([tmp_path], mtbf_s=1200)
    (ten,) = advice.measured
    assert ten.overhead_s_per_hour == pytest.approx(0.1 / 10 * 3600)  # 36 s of every hour
    assert ten.replayed_s_per_fault == pytest.approx(4.0) and ten.replayed_runs == 1
    assert ten.replayed_s_per_hour == pytest.approx(4.0 * 3600 / 1200)  # 3 failures an hour
    assert ten.model_replayed_s_per_hour == pytest.approx(10 / 2 * 3)
    assert ten.lost_s_per_hour == pytest.approx(36 + 12)
    assert "4.0 s (1 of 2 runs)" in advise.markdown(advice)


def test_the_models_overhead_plus_replay_is_least_at_young_daly():
    cost_s, mtbf_s = 0.15, 600

    def lost(interval_s):
        return cost_s / interval_s + interval_s / 2 / mtbf_s

    best = advise.young_daly_interval(cost_s, mtbf_s)
    assert all(lost(best) < lost(best * f) for f in (0.5, 0.9, 1.1, 2))


def test_the_best_is_judged_on_steady_latency_and_recovery_not_whole_run_p99(tmp_path):
    # 5 s recovers fastest but its steady latency is too high; 60 s has a fault-dominated
    # whole-run p99 of 30 s yet steady latency within bound, and recovers faster than 30 s.
    write_run(tmp_path, "cp5-r1", 5, details=uniform_details(40, 9), phases=phases(1500, 300),
              faults=[{"recovery_s": 4.0, "replayed_s": 1.0}], p99_ms=2000)  # fmt: skip
    write_run(tmp_path, "cp30-r1", 30, details=uniform_details(40, 9), phases=phases(300, 300),
              faults=[{"recovery_s": 12.0, "replayed_s": 9.0}], p99_ms=800)  # fmt: skip
    write_run(tmp_path, "cp60-r1", 60, details=uniform_details(40, 9), phases=phases(300, 900),
              faults=[{"recovery_s": 9.0, "replayed_s": 20.0}], p99_ms=30000)  # fmt: skip
    advice = advise.advise([tmp_path], mtbf_s=600, max_p99_ms=1000)
    by_interval = {r.interval_s: r for r in advice.measured}
    assert by_interval[5.0].acceptable_latency is False
    assert by_interval[60.0].acceptable_latency is True
    assert advice.best_measured_s == 60.0 and advice.tied_s == []
    assert advice.verdict.startswith("Best measured: 60 s")
    text = advise.markdown(advice)
    assert "60 s **best**" in text and "300 ms / 900 ms" in text
    # A stricter bound leaves only 30 s; a looser one lets 5 s in, the fastest.
    assert advise.advise([tmp_path], mtbf_s=600, max_p99_ms=500).best_measured_s == 30.0
    assert advise.advise([tmp_path], mtbf_s=600, max_p99_ms=2000).best_measured_s == 5.0
    none = advise.advise([tmp_path], mtbf_s=600, max_p99_ms=100)
    assert none.best_measured_s is None and none.verdict.startswith("No measured best")


def test_a_tie_is_named_and_never_goes_to_the_shorter_interval(tmp_path):
    for interval, recoveries in ((5, (10.0, 12.0)), (30, (11.0, 11.0)), (60, (20.0, 22.0))):
        for i, recovery_s in enumerate(recoveries):
            write_run(tmp_path, f"cp{interval}-r{i}", interval, details=uniform_details(50, 3),
                      phases=phases(200, 200),
                      faults=[{"recovery_s": recovery_s, "replayed_s": 1.0}])  # fmt: skip
    advice = advise.advise([tmp_path], mtbf_s=600)
    # 5 s: 11 +- sd 1.414; 30 s: 11 +- 0: within the spread, a tie; both beat 60 s (21 s),
    # 21 - 11 > 1.414.
    by_interval = {r.interval_s: r for r in advice.measured}
    assert by_interval[5.0].recovery.value_s == pytest.approx(11.0)
    assert by_interval[5.0].recovery.spread_s == pytest.approx(math.sqrt(2))
    assert advice.best_measured_s is None
    assert advice.tied_s == [5.0, 30.0]
    assert advice.verdict.startswith("Tie: 5 s, 30 s")
    text = advise.markdown(advice)
    assert "5 s **tie**" in text and "30 s **tie**" in text and "**best**" not in text


def test_exactly_equal_single_runs_tie(tmp_path):
    for interval in (60, 5):
        write_run(tmp_path, f"cp{interval}-r1", interval, details=uniform_details(50, 3),
                  phases=phases(200, 200), faults=[{"recovery_s": 7.0}])  # fmt: skip
    advice = advise.advise([tmp_path], mtbf_s=600)
    assert advice.best_measured_s is None and advice.tied_s == [5.0, 60.0]


def censored(bound_s: float | None) -> dict:
    return {"recovery_s": None, "recovery_censored": True, "recovery_at_least_s": bound_s}


def test_a_censored_recovery_is_a_lower_bound(tmp_path):
    def runs(root, faults_at_30):
        write_run(root, "cp5-r1", 5, details=uniform_details(50, 3), phases=phases(200, 200),
                  faults=[{"recovery_s": 20.0, "recovery_censored": False}])  # fmt: skip
        write_run(root, "cp30-r1", 30, details=uniform_details(50, 3), phases=phases(200),
                  faults=faults_at_30)  # fmt: skip

    # At least 40 s against an observed 20 s: 5 s is surely faster.
    runs(tmp_path / "a", [censored(40.0)])
    advice = advise.advise([tmp_path / "a"], mtbf_s=600)
    by_interval = {r.interval_s: r for r in advice.measured}
    assert by_interval[30.0].recovery == advise.Recovery(40.0, True)
    assert by_interval[30.0].recovery.text() == ">= 40.0 s"
    assert by_interval[30.0].acceptable_latency is True  # no after_recovery phase: unknown, ok
    assert advice.best_measured_s == 5.0

    # At least 10 s against 20 s: it may have been faster or slower, so no best.
    runs(tmp_path / "b", [{"recovery_s": 3.0, "recovery_censored": False}, censored(10.0)])
    advice = advise.advise([tmp_path / "b"], mtbf_s=600)
    assert advice.best_measured_s is None and advice.tied_s == []
    assert advice.verdict == (
        "No measured best: 5 s, 30 s cannot be told apart on recovery (30 s: recovery censored, "
        "only a lower bound)."
    )
    assert ">= 10.0 s" in advise.markdown(advice)


def test_the_censored_group_mean_is_a_lower_bound():
    runs = [advise.Recovery(10.0, False), advise.Recovery(30.0, True)]
    assert advise.group_recovery(runs) == advise.Recovery(20.0, True)
    assert advise.group_recovery([advise.Recovery(10.0, False), None]) is None
    # Censored never beats; an observed one beats a bound only below it.
    assert not advise.recovers_faster(advise.Recovery(5.0, True), advise.Recovery(50.0, False))
    assert advise.recovers_faster(advise.Recovery(5.0, False), advise.Recovery(6.0, True))
    assert not advise.recovers_faster(advise.Recovery(7.0, False), advise.Recovery(6.0, True))


def test_a_missing_recovery_gives_no_measured_best(tmp_path):
    write_run(tmp_path, "cp5-r1", 5, details=uniform_details(50, 3), phases=phases(200),
              faults=[{"recovery_s": 4.0}])  # fmt: skip
    # An older summary: recovery_s null and no censoring fields, i.e. unknown (not 0, not a win
    # for the other interval).
    write_run(tmp_path, "cp30-r1", 30, details=uniform_details(50, 3), phases=phases(200),
              faults=[{"recovery_s": None, "stall_s": 3.0}])  # fmt: skip
    advice = advise.advise([tmp_path], mtbf_s=600)
    thirty = advice.measured[1]
    assert thirty.recovery is None and thirty.recovery_unknown_runs == 1
    assert advice.best_measured_s is None and advice.tied_s == []
    assert advice.verdict.startswith("No measured best: 30 s lack a recovery figure")


def test_without_steady_latency_there_is_no_measured_best(tmp_path):
    # Summaries from before latency_phases, and one that never reached a steady state.
    write_run(tmp_path, "cp5-r1", 5, details=uniform_details(50, 3), p99_ms=10)
    write_run(tmp_path, "cp30-r1", 30, details=uniform_details(50, 3), phases=phases(100),
              extra={"steady_state": {"reached": False}})  # fmt: skip
    advice = advise.advise([tmp_path], mtbf_s=600)
    assert [r.acceptable_latency for r in advice.measured] == [None, None]
    assert advice.best_measured_s is None
    assert advice.verdict == (
        "No measured best: no interval's steady-state latency is known and within the bound "
        "(5 s, 30 s: no latency_phases.before_fault in their summaries)."
    )
    assert any("cp30-r1: never reached a steady state" in note for note in advice.notes)


def test_the_advice_says_what_the_model_leaves_out(tmp_path):
    write_run(tmp_path, "cp30-r1", 30, details=uniform_details(50, 3), phases=phases(200))
    advice = advise.advise([tmp_path], mtbf_s=600)
    text = advise.markdown(advice)
    assert "## What the model leaves out" in text
    assert "- Restart downtime:" in text and "- Duplicates are the real price:" in text
    assert advice.as_json()["leaves_out"] == list(advise.LEAVES_OUT)
    assert "sync + alignment" in text and advice.as_json()["cost_definition"].startswith("c per")


def test_runs_left_out(tmp_path):
    write_run(tmp_path, "cp30-r1", 30, details=uniform_details(50, 3), phases=phases(200))
    write_run(tmp_path, "storm-r1", 30, engine="storm")
    write_run(tmp_path, "cp30-broken", 30, status="incomplete", details=uniform_details(1, 1))
    exactly = write_run(tmp_path, "cp30-eo", 30, details=uniform_details(1, 1))
    record = json.loads((exactly / "run.json").read_text())
    record["parameters"]["guarantee"] = "exactly_once"
    (exactly / "run.json").write_text(json.dumps(record))
    advice = advise.advise([tmp_path], mtbf_s=600)
    assert advice.cost_runs == ["cp30-r1"]
    assert advice.notes == [
        "cp30-broken left out: its run.json status is 'incomplete'",
        "cp30-eo left out: it ran exactly_once; the advice is for at-least-once",
    ]


def test_advice_needs_checkpoint_durations(tmp_path):
    write_run(tmp_path, "cp5-r1", 5, checkpoints=None)
    with pytest.raises(InputError, match="flink-checkpoint-details.json or .*flink-checkpoints"):
        advise.advise([tmp_path], mtbf_s=600)


def test_advice_needs_each_flink_runs_summary(tmp_path):
    write_run(tmp_path, "cp5-r1", 5, checkpoints=flink_checkpoints(700, 3), summary=False)
    with pytest.raises(InputError, match="summary.json.*python -m analysis summarize"):
        advise.advise([tmp_path], mtbf_s=600)


def test_advice_reads_a_studys_runs(tmp_path):
    write_run(tmp_path, "study-cp5-r1", 5, checkpoints=flink_checkpoints(700, 3))
    write_run(tmp_path, "other-cp5-r1", 5, checkpoints=flink_checkpoints(100, 3))
    study = tmp_path / "study"
    study.mkdir()
    runs = [{"run_id": "study-cp5-r1"}, {"run_id": "study-cp30-r1"}]  # the second never ran
    (study / "study.json").write_text(json.dumps({"runs": runs}))
    advice = advise.advise([study], mtbf_s=600)
    assert advice.cost_runs == ["study-cp5-r1"]
    assert advice.checkpoint_cost_s == pytest.approx(0.7)


def test_advise_command(tmp_path, capsys):
    write_run(tmp_path, "cp30-r1", 30, checkpoints=flink_checkpoints(778, 12))
    out = tmp_path / "advice"
    assert main(["advise", str(tmp_path), "--mtbf-s", "600", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "30.82 s" in printed and "30.55 s" in printed
    data = json.loads((out / "advice.json").read_text())
    assert round(data["lambert_s"], 2) == 30.82
    assert (out / "advice.md").read_text().startswith("# Checkpoint interval advice")

    assert main(["advise", str(tmp_path / "nothing-here"), "--mtbf-s", "600"]) == 1
    assert "not a directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:
        main(["advise", str(tmp_path), "--mtbf-s", "0"])
    assert refused.value.code == 2


def test_an_overloaded_run_is_left_out_of_the_measured_intervals(tmp_path):
    write_run(tmp_path, "cp30-r1", 30, details=uniform_details(50, 3), phases=phases(300))
    queued = write_run(tmp_path, "cp30-r2", 30, details=uniform_details(50, 3), phases=phases(9000))
    verdict = {"overload": {"overloaded": True, "reason": "the backlog grew"}}
    (queued / "received.summary.json").write_text(json.dumps(verdict))
    advice = advise.advise([tmp_path], mtbf_s=600, max_p99_ms=1000)
    (measured,) = advice.measured
    assert measured.runs == ["cp30-r1"] and measured.p99_before_ms == 300
    assert any("cp30-r2 left out of the measured intervals" in note for note in advice.notes)
