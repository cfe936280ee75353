"""A study's load from capacity (docs/studies.md, "Load from capacity"): the spec's keys, the
search, the runner's capacity step before the runs (recorded, reused when resumed, refused when
no rate is sustainable) and the report's Load section. The experiment is a stand-in."""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from study_fixtures import FakeExperiment, fake_kit

from analysis.study import __main__ as cli
from analysis.study import capacity, plan, spec
from analysis.study import report as study_report
from analysis.study.progress import RichProgress
from analysis.study.runner import (
    CAPACITY_DIR,
    ExperimentResult,
    StudyError,
    StudyRunner,
    load_record,
)

LOAD_SPEC = {
    "name": "loaded",
    "engines": ["flink", "storm"],
    "load": 0.5,
    "produce_s": 60,
    "capacity": {"p99_bound_ms": 1000, "from_rate": 1000, "runs": 4, "steady_s": 20},
    "parameters": {"warmup_s": 5, "recovery_window_s": 30, "checkpoint_interval_s": [2, 5]},
    "faults": [{"fault": "kill_taskmanager", "engines": ["flink"], "fault_at_s": 20},
               {"fault": "none", "engines": ["storm"]}],
}  # fmt: skip
# A study at a fixed rate: with capacity:, the report gives the fraction it was.
FIXED_RATE = {"warmup_s": 5, "recovery_window_s": 30, "rate": 1_000, "count": 60_000}
# What each engine sustains in the stand-in: a run passes at or below it.
SUSTAINS = {"flink": 3_000.0, "storm": 1_500.0}


@pytest.fixture
def kit(tmp_path):
    return fake_kit(tmp_path / "kit")


def write_spec(tmp_path: Path, **changes) -> Path:
    data = {**LOAD_SPEC, **changes}
    data = {k: v for k, v in data.items() if v is not None}
    path = tmp_path / f"{data['name']}.yml"
    path.write_text(yaml.safe_dump(data))
    return path


class CapacityExperiment(FakeExperiment):
    """A stand-in whose capacity runs leave the collector's summary: p99 200 ms at or below
    the engine's SUSTAINS rate, 9 s (overloaded) above it."""

    def __init__(self, results_dir: Path, sustains=SUSTAINS, breaks=None) -> None:
        super().__init__(results_dir)
        self.sustains = sustains
        # Capacity run number -> what it raises instead of leaving its summary.
        self.breaks: dict[int, BaseException] = breaks or {}
        self.capacity_runs: list[tuple[str, float, int, dict]] = []

    def __call__(self, run, extravars, on_phase):
        if f"-{CAPACITY_DIR}-" not in run.run_id:
            return super().__call__(run, extravars, on_phase)
        run_dir = Path(extravars["results_dir"]) / run.run_id
        run_dir.mkdir(parents=True)
        rate = float(extravars["rate"])
        self.capacity_runs.append((run.engine, rate, extravars["count"], extravars))
        if len(self.capacity_runs) in self.breaks:
            raise self.breaks[len(self.capacity_runs)]
        passes = rate <= self.sustains[run.engine]
        summary = {
            "status": "complete",
            "latency_ms": {"p50": 50, "p99": 200 if passes else 9_000},
            "overload": {"overloaded": not passes},
            "send_lag_ms": {"p99": 1.0},
            "output_rate": {"messages_per_s": rate},
        }
        (run_dir / capacity.FIRST_SUMMARY).write_text(json.dumps(summary))
        return ExperimentResult(rc=0)


def runner_for(path: Path, kit, results: Path, experiment) -> tuple[StudyRunner, io.StringIO]:
    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=False, width=200))
    the_plan = plan.make_plan(spec.load(path, kit), kit, 1.0, order_seed=5)
    return StudyRunner(the_plan, kit, results, experiment, progress), out


# ------------------------------------------------------------------ the spec


@pytest.mark.parametrize(
    ("changes", "key", "words"),
    [
        ({"load": 1.5}, "load", "above 0 and at most 1"),
        ({"load": 0}, "load", "above 0 and at most 1"),
        ({"parameters": {"rate": 2000}}, "parameters.rate", "remove rate"),
        ({"parameters": {"count": 9000}}, "parameters.count", "give produce_s instead"),
        ({"produce_s": None}, "produce_s", "missing"),
        ({"load": None}, "produce_s", "only with load:"),
        ({"capacity": {"p99_ms": 5}}, "capacity.p99_ms", "did you mean p99_bound_ms"),
        ({"capacity": {"runs": 0}}, "capacity.runs", "at least 1"),
        ({"capacity": {"from_rate": 50}}, "capacity.from_rate", "at least 100"),
    ],
)
def test_a_bad_load_spec_is_refused_naming_the_key(tmp_path, kit, changes, key, words):
    with pytest.raises(spec.SpecError) as refused:
        spec.load(write_spec(tmp_path, **changes), kit)
    assert refused.value.key == key and words in str(refused.value)


def test_load_gives_each_run_produce_s_and_the_capacity_defaults(tmp_path, kit):
    loaded = spec.load(
        write_spec(tmp_path, capacity=None, parameters={"warmup_s": 5, "recovery_window_s": 0}),
        kit,
    )
    assert loaded.load == 0.5 and loaded.produce_s == 60
    assert loaded.capacity == capacity.CapacitySpec()
    runs = plan.make_plan(loaded, kit, 1.0, order_seed=1, rates={"flink": 1234.0}).runs
    flink = [r for r in runs if r.engine == "flink"]
    assert {(r.parameters["rate"], r.parameters["count"]) for r in flink} == {(1234.0, 74_040)}
    # --scale shortens the producing time, not the rate.
    scaled = plan.make_plan(loaded, kit, 0.5, order_seed=1, rates={"flink": 1234.0})
    assert scaled.spec.produce_s == 30
    assert {r.parameters["count"] for r in scaled.runs if r.engine == "flink"} == {37_020}


# ------------------------------------------------------------------ the search


def fake_trial(sustains: float):
    def measure(rate: float) -> capacity.Trial:
        passes = rate <= sustains
        return capacity.Trial(
            f"t{rate:.0f}", rate, "complete", not passes, 50, 200 if passes else 9e3, 1, rate, 60
        )

    return measure


def test_the_search_doubles_then_bisects_to_its_step():
    found = capacity.search(fake_trial(5_000), capacity.CapacitySpec(1000, 2_000, 6, 20, 10))
    assert [t.rate for t in found.trials] == [2_000, 4_000, 8_000, 6_000, 5_000, 5_500]
    assert (found.rate, found.lowest_failing, found.lower_bound) == (5_000, 5_500, False)


def test_with_no_rate_failed_the_capacity_is_a_lower_bound():
    found = capacity.search(fake_trial(1e9), capacity.CapacitySpec(1000, 1_000, 3, 20, 10))
    assert [t.rate for t in found.trials] == [1_000, 2_000, 4_000]
    assert found.lower_bound and found.rate == 4_000
    assert capacity.fraction_text(1_000, found.as_json()) == "≤ 0.25 of ≥ 4,000/s"


def test_with_every_rate_failed_there_is_no_capacity():
    found = capacity.search(fake_trial(100), capacity.CapacitySpec(1000, 1_000, 3, 20, 10))
    assert [t.rate for t in found.trials] == [1_000, 500, 200]
    assert found.rate is None and found.lowest_failing == 200


def test_a_trial_fails_when_any_part_of_the_criterion_fails(tmp_path):
    good = capacity.Trial("t", 1000, "complete", False, 50, 900, 1, 1000, 60)
    assert good.sustainable(1000) and good.why_not(1000) == ""
    assert "overloaded" in capacity.Trial(
        "t", 1000, "complete", True, 50, 900, 1, 1000, 60
    ).why_not(1000)
    assert "unknown" in capacity.Trial("t", 1000, "complete", None, 50, 900, 1, 1000, 60).why_not(
        1000
    )
    assert "incomplete" in capacity.Trial(
        "t", 1000, "incomplete", False, 50, 900, 1, 1000, 60
    ).why_not(1000)
    assert "not under 900" in good.why_not(900)
    # A run that left no collector summary is a failed trial, not a missing one.
    missing = capacity.trial_from_summary("t", 1000, tmp_path / "nothing", 12.3)
    assert missing.status == "failed" and not missing.sustainable(1e9)


# ------------------------------------------------------------------ the runner


def test_the_study_measures_each_engine_first_and_runs_at_the_fraction(tmp_path, kit):
    results = tmp_path / "results"
    experiment = CapacityExperiment(results)
    runner, out = runner_for(write_spec(tmp_path), kit, results, experiment)
    outcome = runner.run()
    assert outcome.finished
    # Every capacity run comes before the first run of the study, each engine's in turn.
    first_study_call = next(i for i, c in enumerate(experiment.calls) if "-capacity-" not in c)
    assert all("-capacity-" in c for c in experiment.calls[:first_study_call])
    assert all("-capacity-" not in c for c in experiment.calls[first_study_call:])
    flink_rates = [rate for engine, rate, _, _ in experiment.capacity_runs if engine == "flink"]
    assert flink_rates == [1_000, 2_000, 4_000, 3_000]
    # A capacity run: fault-free, the search's warm-up and steady state, the study's first
    # setting, in the study's capacity/ folder.
    engine, rate, count, extravars = experiment.capacity_runs[0]
    assert (extravars["fault"], extravars["warmup_s"], count) == ("none", 10, 30_000)
    assert extravars["checkpoint_interval_s"] == 2
    assert extravars["results_dir"] == str(results / "loaded" / CAPACITY_DIR)

    record = load_record(results / "loaded")
    assert record["load"] == 0.5 and record["produce_s"] == 60
    assert record["capacity"]["flink"]["rate"] == 3_000
    assert record["capacity"]["flink"]["lowest_failing"] == 4_000
    assert len(record["capacity"]["flink"]["trials"]) == 4
    assert record["capacity"]["storm"]["rate"] == 1_500
    assert record["capacity"]["flink"]["capacity_spec"]["p99_bound_ms"] == 1000
    assert record["rates"] == {"flink": 1_500.0, "storm": 750.0}
    # Each study run at load x capacity for produce_s, as run.json records it.
    for entry in record["runs"]:
        rate = {"flink": 1_500.0, "storm": 750.0}[entry["engine"]]
        assert entry["parameters"]["rate"] == rate
        assert entry["parameters"]["count"] == math.ceil(rate * 60)
        recorded = json.loads((results / entry["run_id"] / "run.json").read_text())
        assert recorded["parameters"]["rate"] == rate
    assert "capacity of flink: 3,000/s" in out.getvalue()

    # Started again: nothing is measured again, nothing is run again.
    again = CapacityExperiment(results)
    runner, out = runner_for(write_spec(tmp_path), kit, results, again)
    assert runner.run().finished
    assert again.calls == []
    assert "measured by an earlier start" in out.getvalue()

    # The report says at what fraction each engine ran.
    section = "\n".join(study_report._load_section(runner.plan, results, outcome.complete))
    assert "| flink | 3,000 | 4,000 | 4 | 1,500 | 0.50 of 3,000/s |" in section
    assert "| storm | 1,500 | 1,800 | 4 | 750 | 0.50 of 1,500/s |" in section
    # The stand-in's runs take no time: give them 100 s each, 60 s of it producing.
    recorded = load_record(results / "loaded") or {}
    for entry in recorded["runs"]:
        for attempt in entry["attempts"]:
            attempt["wall_s"] = 100.0
        sent = '{"start_ms": 0, "end_ms": 60000}'
        (results / entry["run_id"] / "produced.summary.json").write_text(sent)
    spent = study_report.study_time(recorded, results)
    assert spent is not None and spent.capacity_runs == 8
    assert "the capacity search took 8 run(s)" in study_report._capacity_time(spent)


def test_a_changed_criterion_is_refused_before_any_trial_when_runs_used_it(tmp_path, kit):
    results = tmp_path / "results"
    runner, _ = runner_for(write_spec(tmp_path), kit, results, CapacityExperiment(results))
    runner.run()
    recorded = load_record(results / "loaded")["capacity"]
    changed = {**LOAD_SPEC["capacity"], "p99_bound_ms": 2000}
    again = CapacityExperiment(results)
    runner, _ = runner_for(write_spec(tmp_path, capacity=changed), kit, results, again)
    with pytest.raises(StudyError, match="another name"):
        runner.run()  # its complete runs ran at rates from the other criterion
    assert again.calls == []
    assert load_record(results / "loaded")["capacity"] == recorded
    # Another study name with the new criterion measures afresh.
    fresh = CapacityExperiment(results)
    runner, _ = runner_for(
        write_spec(tmp_path, capacity=changed, name="loaded2"), kit, results, fresh
    )
    assert runner.run().finished
    assert load_record(results / "loaded2")["capacity"]["flink"]["capacity_spec"] == {
        **asdict(capacity.CapacitySpec()),
        **changed,
    }


def test_other_hosts_measure_again(tmp_path, kit):
    results = tmp_path / "results"
    path = write_spec(tmp_path, load=None, produce_s=None, parameters=FIXED_RATE)
    runner, _ = runner_for(path, kit, results, CapacityExperiment(results))
    runner.run()
    again = CapacityExperiment(results)
    runner, _ = runner_for(path, kit, results, again)
    runner.inventory = "/elsewhere/hosts.yml"
    assert runner.run().finished  # a fixed rate: the runs stand, the capacity is measured again
    assert {engine for engine, *_ in again.capacity_runs} == {"flink", "storm"}
    assert (
        load_record(results / "loaded")["capacity"]["flink"]["inventory"] == "/elsewhere/hosts.yml"
    )


def test_an_interrupted_search_goes_on_from_its_trials(tmp_path, kit):
    results = tmp_path / "results"
    first = CapacityExperiment(results, breaks={3: KeyboardInterrupt()})
    runner, _ = runner_for(write_spec(tmp_path), kit, results, first)
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    partial = load_record(results / "loaded")["capacity_trials"]["flink"]
    assert [t["rate"] for t in partial["trials"]] == [1_000, 2_000]
    # Started again: the two trials stand, the search carries on at 4,000/s.
    again = CapacityExperiment(results)
    runner, _ = runner_for(write_spec(tmp_path), kit, results, again)
    assert runner.run().finished
    assert [rate for engine, rate, *_ in again.capacity_runs if engine == "flink"] == [4_000, 3_000]
    record = load_record(results / "loaded")
    assert [t["rate"] for t in record["capacity"]["flink"]["trials"]] == [
        1_000,
        2_000,
        4_000,
        3_000,
    ]
    assert record["capacity"]["flink"]["rate"] == 3_000 and record["capacity_trials"] == {}


def test_a_trial_that_left_no_summary_stops_the_search_and_is_run_again(tmp_path, kit):
    results = tmp_path / "results"
    broken = CapacityExperiment(results, breaks={2: RuntimeError("ansible-runner could not start")})
    runner, _ = runner_for(write_spec(tmp_path), kit, results, broken)
    with pytest.raises(StudyError, match="left no collector summary .RuntimeError"):
        runner.run()
    trials = load_record(results / "loaded")["capacity_trials"]["flink"]["trials"]
    assert [(t["rate"], t["status"]) for t in trials] == [(1_000, "complete"), (2_000, "failed")]
    again = CapacityExperiment(results)
    runner, _ = runner_for(write_spec(tmp_path), kit, results, again)
    assert runner.run().finished
    # The failed trial is no evidence: 2,000/s runs again, after the kept 1,000/s.
    assert [rate for engine, rate, *_ in again.capacity_runs if engine == "flink"] == [
        2_000, 4_000, 3_000
    ]  # fmt: skip


def test_stop_asked_before_a_capacity_run_stops_there(tmp_path, kit):
    results = tmp_path / "results"
    experiment = CapacityExperiment(results)
    runner, _ = runner_for(write_spec(tmp_path), kit, results, experiment)
    runner.stop_requested = lambda: len(experiment.capacity_runs) >= 1
    outcome = runner.run()
    assert outcome.stopped_by_request and not outcome.complete
    assert len(experiment.capacity_runs) == 1 and experiment.calls == []


def test_no_sustainable_rate_stops_before_any_run_with_the_trials_kept(tmp_path, kit):
    results = tmp_path / "results"
    experiment = CapacityExperiment(results, sustains={"flink": 3_000.0, "storm": 10.0})
    runner, _ = runner_for(write_spec(tmp_path), kit, results, experiment)
    with pytest.raises(StudyError) as refused:
        runner.run()
    assert "no rate tried was sustainable for storm" in str(refused.value)
    assert "lower capacity.from_rate or raise capacity.p99_bound_ms" in str(refused.value)
    assert all("-capacity-" in call for call in experiment.calls)
    record = load_record(results / "loaded")
    assert record["capacity"]["storm"]["rate"] is None
    assert [t["rate"] for t in record["capacity"]["storm"]["trials"]] == [1_000, 500, 200, 100]
    assert all(entry["status"] == "not run" for entry in record["runs"])
    # Not reused: the next start searches again (after fixing the cause, here the same hosts).
    again = CapacityExperiment(results, sustains={"flink": 3_000.0, "storm": 10.0})
    runner, _ = runner_for(write_spec(tmp_path), kit, results, again)
    with pytest.raises(StudyError):
        runner.run()
    assert {engine for engine, *_ in again.capacity_runs} == {"storm"}


def test_a_fixed_rate_study_with_capacity_reports_its_fraction(tmp_path, kit):
    results = tmp_path / "results"
    path = write_spec(tmp_path, load=None, produce_s=None, parameters=FIXED_RATE)
    runner, _ = runner_for(path, kit, results, CapacityExperiment(results))
    outcome = runner.run()
    assert {r.parameters["rate"] for r in runner.plan.runs} == {1_000}
    section = "\n".join(study_report._load_section(runner.plan, results, outcome.complete))
    assert "| flink | 3,000 | 4,000 | 4 | 1,000 | 0.33 of 3,000/s |" in section
    assert "| storm | 1,500 | 1,800 | 4 | 1,000 | 0.67 of 1,500/s |" in section


def test_without_capacity_the_report_says_it_was_not_measured(tmp_path, kit):
    path = write_spec(tmp_path, load=None, produce_s=None, capacity=None, parameters=FIXED_RATE)
    the_plan = plan.make_plan(spec.load(path, kit), kit, 1.0, order_seed=5)
    section = "\n".join(study_report._load_section(the_plan, tmp_path, []))
    assert "was not measured" in section and "capacity:" in section


def test_the_dry_run_says_what_it_will_measure_and_counts_it(tmp_path, kit, capsys):
    path = write_spec(tmp_path)
    assert cli.main([str(path), "--dry-run", "--results", str(tmp_path / "r")], kit=kit) == 0
    printed = capsys.readouterr().out
    assert "capacity of flink: to measure first, at most 4 fault-free runs of 30 s" in printed
    assert "load 0.5 of each engine's capacity, 60 s of producing per run: not known yet" in printed
    runner, _ = runner_for(path, kit, tmp_path / "r", CapacityExperiment(tmp_path / "r"))
    runner.inventory = f"{kit.default_inventory()} (ansible.cfg's)"  # as the command says it
    before = runner.forecast(runner.check_existing())
    # Two engines, each at most 4 runs of 30 s of producing plus the quiet period and overhead.
    quiet = kit.defaults["quiet_s"]
    assert before.capacity_s >= 2 * 4 * (30 + quiet + plan.RUN_OVERHEAD_S) - 1
    runner.run()
    assert runner.forecast(runner.check_existing()).capacity_s == 0
    assert cli.main([str(path), "--dry-run", "--results", str(tmp_path / "r")], kit=kit) == 0
    assert "capacity of flink: 3,000/s, measured by an earlier start" in capsys.readouterr().out
    assert capacity.capacity_text({"rate": 8000.0, "lower_bound": True}) == "at least 8,000/s"
    assert capacity.capacity_text({"rate": None, "lowest_failing": 500.0}) == "no rate passed"
    other = write_spec(tmp_path, capacity={**LOAD_SPEC["capacity"], "steady_s": 25}, name="x")
    (tmp_path / "r" / "x").mkdir()
    (tmp_path / "r" / "x" / "study.json").write_text(
        (tmp_path / "r" / "loaded" / "study.json").read_text()
    )
    assert cli.main([str(other), "--dry-run", "--results", str(tmp_path / "r")], kit=kit) == 0
    assert "capacity of flink: to measure first" in capsys.readouterr().out
