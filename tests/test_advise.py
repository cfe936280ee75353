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
    interval_s: int,
    *,
    engine: str = "flink",
    status: str = "complete",
    checkpoints: dict | None = None,
    duplicate_rate: float = 0.0,
    recovery_s: float | None = 5.0,
    p99_ms: int = 100,
    summary: bool = True,
) -> Path:
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
    if summary:
        data = {
            **run,
            "fault": "kill_taskmanager",
            "produced": 1000,
            "duplicate_rate": duplicate_rate,
            "latency_ms": {"p99": p99_ms},
            "faults": [{"recovery_s": recovery_s, "stall_s": 1.0}],
        }
        (run_dir / "summary.json").write_text(json.dumps(data))
    return run_dir


def flink_checkpoints(average_ms: float, completed: int) -> dict:
    return {
        "counts": {"completed": completed, "failed": 0},
        "summary": {"end_to_end_duration": {"avg": average_ms, "max": average_ms * 2}},
        "history": [],
    }


def test_advice_from_measured_runs(tmp_path):
    write_run(tmp_path, "cp5-r1", 5, checkpoints=flink_checkpoints(700, 30), duplicate_rate=0.01,
              recovery_s=8.0, p99_ms=1500)  # fmt: skip
    write_run(tmp_path, "cp30-r1", 30, checkpoints=flink_checkpoints(900, 10), duplicate_rate=0.02,
              recovery_s=10.0, p99_ms=300)  # fmt: skip
    write_run(tmp_path, "cp30-r2", 30, checkpoints=flink_checkpoints(800, 10), duplicate_rate=0.04,
              recovery_s=12.0, p99_ms=500)  # fmt: skip
    # Only the history: its completed checkpoints count, the failed one does not.
    history = {
        "counts": {"completed": 0},
        "summary": {},
        "history": [
            {"status": "COMPLETED", "end_to_end_duration": 600},
            {"status": "COMPLETED", "end_to_end_duration": 1000},
            {"status": "FAILED", "end_to_end_duration": 99999},
        ],
    }
    write_run(tmp_path, "cp300-r1", 300, checkpoints=history, duplicate_rate=0.2,
              recovery_s=None, p99_ms=200)  # fmt: skip
    write_run(tmp_path, "storm-r1", 30, engine="storm", duplicate_rate=0.0, p99_ms=10)
    write_run(tmp_path, "cp30-broken", 30, status="incomplete", checkpoints=flink_checkpoints(1, 1))

    advice = advise.advise([tmp_path], mtbf_s=600, max_p99_ms=1000)

    # (700 x 30 + 900 x 10 + 800 x 10 + 600 + 1000) / 52 ms
    cost_s = (700 * 30 + 900 * 10 + 800 * 10 + 600 + 1000) / 52 / 1000
    assert advice.checkpoint_cost_s == pytest.approx(cost_s)
    assert advice.checkpoints == 52
    assert advice.lambert_s == pytest.approx(advise.lambert_interval(cost_s, 600))
    assert advice.young_daly_s == pytest.approx(math.sqrt(2 * cost_s * 600))
    by_interval = {r.interval_s: r for r in advice.measured}
    assert sorted(by_interval) == [5.0, 30.0, 300.0]
    assert by_interval[30.0].runs == ["cp30-r1", "cp30-r2"]
    assert by_interval[30.0].duplicate_rate == pytest.approx(0.03)
    assert by_interval[30.0].recovery_s == pytest.approx(11.0)
    assert by_interval[30.0].latency_p99_ms == pytest.approx(400)
    assert by_interval[30.0].checkpoint_cost_s == pytest.approx(0.85)
    assert by_interval[300.0].without_recovery == 1
    assert by_interval[300.0].checkpoint_cost_s == pytest.approx(0.8)
    assert not by_interval[5.0].acceptable_latency  # p99 1500 ms > 1000 ms
    # 5 s has the lowest duplicates and recovery but too much latency; 300 s never recovered.
    assert advice.best_measured_s == 30.0
    assert by_interval[30.0].utilisation == pytest.approx(advise.utilisation(30, cost_s, 600))
    assert advice.notes == ["cp30-broken left out: its run.json status is 'incomplete'"]
    text = advise.markdown(advice)
    assert f"{advice.lambert_s:.2f} s" in text and "30 s **best**" in text

    # With a looser latency bound, 5 s wins on both duplicate rate and recovery.
    assert advise.advise([tmp_path], mtbf_s=600, max_p99_ms=2000).best_measured_s == 5.0
    assert advise.advise([tmp_path], mtbf_s=600, max_p99_ms=50).best_measured_s is None


def test_advice_needs_checkpoint_durations(tmp_path):
    write_run(tmp_path, "cp5-r1", 5, checkpoints=None)
    with pytest.raises(InputError, match="flink-checkpoints.json"):
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
    write_run(tmp_path, "cp30-r1", 30, checkpoints=flink_checkpoints(900, 10), p99_ms=300)
    queued = write_run(tmp_path, "cp30-r2", 30, checkpoints=flink_checkpoints(800, 10), p99_ms=9000)
    verdict = {"overload": {"overloaded": True, "reason": "the backlog grew"}}
    (queued / "received.summary.json").write_text(json.dumps(verdict))
    advice = advise.advise([tmp_path], mtbf_s=600, max_p99_ms=1000)
    (measured,) = advice.measured
    assert measured.runs == ["cp30-r1"] and measured.latency_p99_ms == 300
    assert any("cp30-r2 left out of the measured intervals" in note for note in advice.notes)
