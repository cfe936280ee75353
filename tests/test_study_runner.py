"""Running a study without a lab: resume, repeated incomplete runs, the failure limit, the
record, the report and the command line (the experiment is a stand-in)."""

from __future__ import annotations

import io
import json
import signal
from pathlib import Path

import pytest
from rich.console import Console
from study_fixtures import STUDIES, TEST_STUDIES, FakeExperiment, fake_kit

from analysis.study import __main__ as cli
from analysis.study import ansible, plan, spec
from analysis.study import report as study_report
from analysis.study.interrupt import Cancelled, StopSwitch
from analysis.study.progress import RichProgress, duration_text
from analysis.study.report import ReportError, write_report
from analysis.study.runner import Forecast, StudyError, StudyRunner, load_record


@pytest.fixture
def kit(tmp_path):
    return fake_kit(tmp_path / "kit")


def sweep_plan(kit, seed: int = 3) -> plan.Plan:
    return plan.make_plan(spec.load(TEST_STUDIES / "sweep.yml", kit), kit, 1.0, order_seed=seed)


def quiet_progress() -> tuple[RichProgress, io.StringIO]:
    out = io.StringIO()
    return RichProgress(Console(file=out, force_terminal=False, width=200)), out


def make_runner(the_plan, kit, results, experiment, max_failures=None):
    progress, out = quiet_progress()
    runner = StudyRunner(the_plan, kit, results, experiment, progress, max_failures=max_failures)
    return runner, out


def test_interrupted_study_resumes_with_only_the_missing_runs(tmp_path, kit):
    results = tmp_path / "results"
    the_plan = sweep_plan(kit)
    order = [run.run_id for run in the_plan.runs]

    # First start: the first run completes, Ctrl-C arrives during the second.
    first = FakeExperiment(results, lambda run, call: "complete" if call == 1 else "interrupt")
    runner, _ = make_runner(the_plan, kit, results, first)
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    assert first.calls == order[:2]
    record = load_record(results / "sweep")
    assert [r["status"] for r in record["runs"]] == ["complete", "incomplete", "not run", "not run"]
    assert record["runs"][1]["attempts"][0]["status"] == "interrupted"
    assert record["order_seed"] == 3

    # Second start: only the three missing runs, in the plan's order; the interrupted run's
    # directory is kept under attempts/ and the run repeated.
    second = FakeExperiment(results)
    runner, out = make_runner(the_plan, kit, results, second)
    outcome = runner.run()
    assert second.calls == order[1:]
    assert outcome.finished and outcome.complete == order
    assert (results / "sweep" / "attempts" / f"{order[1]}-1").is_dir()
    record = load_record(results / "sweep")
    assert [r["status"] for r in record["runs"]] == ["complete"] * 4
    second_run = record["runs"][1]
    assert [a["status"] for a in second_run["attempts"]] == ["interrupted", "complete"]
    assert second_run["attempts"][1]["moved_aside"].endswith(f"attempts/{order[1]}-1")
    assert record["runs"][0]["attempts"][0]["status"] == "complete"
    assert second.extravars[0]["results_dir"] == str(results)
    # Each experiment leaves its analysis to the study's report, which runs one for all.
    assert {extravars["analyze_on"] for extravars in second.extravars} == {"none"}
    printed = out.getvalue()
    assert "3 of 4 runs to do (1 already complete)" in printed
    assert f"[4/4] {order[3]} complete" in printed

    # Third start: nothing left to run.
    third = FakeExperiment(results)
    runner, _ = make_runner(the_plan, kit, results, third)
    assert runner.run().finished and third.calls == []


def test_an_incomplete_run_is_repeated_and_kept(tmp_path, kit):
    results = tmp_path / "results"
    the_plan = sweep_plan(kit)
    target = the_plan.runs[2].run_id
    experiment = FakeExperiment(
        results, lambda run, call: "incomplete" if run.run_id == target else "complete"
    )
    runner, out = make_runner(the_plan, kit, results, experiment)
    outcome = runner.run()
    assert outcome.failed == [target] and not outcome.finished and not outcome.stopped_early
    assert "the drain timed out" in out.getvalue()
    record = load_record(results / "sweep")
    entry = next(r for r in record["runs"] if r["run_id"] == target)
    assert entry["status"] == "incomplete"
    assert entry["attempts"][0]["reasons"] == ["the drain timed out"]

    again = FakeExperiment(results)
    runner, _ = make_runner(the_plan, kit, results, again)
    assert runner.run().finished
    assert again.calls == [target]
    moved = results / "sweep" / "attempts" / f"{target}-1"
    assert json.loads((moved / "run.json").read_text())["status"] == "incomplete"


def test_a_run_whose_guarantee_failed_counts_in_its_group_and_is_never_repeated(tmp_path, kit):
    results = tmp_path / "results"
    the_plan = sweep_plan(kit)
    lossy = the_plan.runs[1].run_id
    experiment = FakeExperiment(
        results, lambda run, call: "lossy" if run.run_id == lossy else "complete"
    )
    runner, _ = make_runner(the_plan, kit, results, experiment)
    outcome = runner.run()
    assert outcome.finished and lossy in outcome.complete
    assert experiment.calls.count(lossy) == 1
    record = load_record(results / "sweep")
    entry = next(r for r in record["runs"] if r["run_id"] == lossy)
    assert entry["status"] == "complete"
    verdict = entry["attempts"][0]["verdict"]
    assert (verdict["holds"], verdict["lost"]) == (False, 7)
    # Every attempt keeps its verdict, so a study's loss covers all of them.
    assert all(r["attempts"][0]["verdict"] is not None for r in record["runs"])


def test_failures_are_recorded_and_the_study_stops_at_the_limit(tmp_path, kit):
    results = tmp_path / "results"
    the_plan = sweep_plan(kit)
    outcomes = {1: "nothing", 2: "complete", 3: "raise", 4: "complete"}
    experiment = FakeExperiment(results, lambda run, call: outcomes[call])
    runner, out = make_runner(the_plan, kit, results, experiment, max_failures=2)
    outcome = runner.run()
    assert outcome.stopped_early
    assert experiment.calls == [run.run_id for run in the_plan.runs[:3]]
    assert len(outcome.failed) == 2 and outcome.not_run == [the_plan.runs[3].run_id]
    record = load_record(results / "sweep")
    first, _, third, fourth = record["runs"]
    assert first["attempts"][0]["status"] == "failed"
    assert first["attempts"][0]["rc"] == 2
    assert "stopped before recording the run (exit code 2)" in first["attempts"][0]["reasons"][0]
    assert "UNREACHABLE" in first["attempts"][0]["reasons"][1]
    assert "RuntimeError: ansible-runner could not start" in third["attempts"][0]["reasons"][1]
    assert fourth["attempts"] == []
    assert "UNREACHABLE" in out.getvalue()


def test_failures_below_the_limit_do_not_stop_the_study(tmp_path, kit):
    results = tmp_path / "results"
    the_plan = sweep_plan(kit)
    experiment = FakeExperiment(results, lambda run, call: "nothing" if call < 3 else "complete")
    runner, _ = make_runner(the_plan, kit, results, experiment, max_failures=3)
    outcome = runner.run()
    assert not outcome.stopped_early and len(experiment.calls) == 4
    assert len(outcome.failed) == 2 and len(outcome.complete) == 2


def test_a_complete_run_of_other_settings_is_refused_before_any_run(tmp_path, kit):
    results = tmp_path / "results"
    the_plan = sweep_plan(kit)
    other = the_plan.runs[1]
    (results / other.run_id).mkdir(parents=True)
    record = {
        "run_id": other.run_id,
        "engine": other.engine,
        "status": "complete",
        "parameters": {**other.parameters, "count": 1234},
    }
    (results / other.run_id / "run.json").write_text(json.dumps(record))
    experiment = FakeExperiment(results)
    runner, _ = make_runner(the_plan, kit, results, experiment)
    planned = other.parameters["count"]
    with pytest.raises(StudyError, match=f"count=1234 \\(the plan: {planned}\\)"):
        runner.run()
    assert experiment.calls == []


def test_forecast_corrects_the_estimates_by_the_runs_so_far():
    forecast = Forecast({"a": 100.0, "b": 100.0, "c": 200.0})
    assert forecast.remaining_s() == 400
    forecast.finished("a", 150.0)  # runs take 1.5 times the estimate
    assert forecast.correction == 1.5
    assert forecast.remaining_s() == 450
    assert forecast.remaining_s(current="b", current_elapsed_s=100) == 50 + 300
    assert forecast.remaining_s(current="b", current_elapsed_s=1000) == 300
    assert duration_text(3725) == "1h 02m" and duration_text(65) == "1m 05s"
    assert duration_text(9.4) == "9s"
    with_analysis = Forecast({"a": 100.0}, analysis_s=39.0)
    assert with_analysis.remaining_s() == 139
    with_analysis.finished("a", 100.0)
    assert with_analysis.remaining_s() == 39  # the analysis is still to come


def test_the_forecast_counts_the_analysis_of_every_complete_run_without_a_summary(tmp_path, kit):
    results = tmp_path / "results"
    the_plan = sweep_plan(kit)
    first = FakeExperiment(results, lambda run, call: "complete" if call == 1 else "interrupt")
    with pytest.raises(KeyboardInterrupt):
        make_runner(the_plan, kit, results, first)[0].run()
    runner, _ = make_runner(the_plan, kit, results, FakeExperiment(results))
    todo = runner.check_existing()
    assert len(todo) == 3
    assert runner.forecast(todo).analysis_s == plan.analysis_estimate_s(3)
    # The complete run lost its summary (an earlier start stopped before its report).
    (results / the_plan.runs[0].run_id / "summary.json").unlink()
    forecast = runner.forecast(todo)
    assert forecast.analysis_s == plan.analysis_estimate_s(4)
    assert forecast.remaining_s() == pytest.approx(
        sum(forecast.estimates.values()) + forecast.analysis_s
    )
    assert plan.analysis_estimate_s(0) == 0.0
    assert plan.analysis_estimate_s(2) == plan.ANALYSIS_START_S + 2 * plan.ANALYSIS_PER_RUN_S


def test_report_compares_the_complete_runs_with_the_advice(tmp_path, kit):
    results = tmp_path / "results"
    study = spec.load(STUDIES / "checkpoint-interval.yml", kit)
    the_plan = plan.make_plan(study, kit, 0.5, order_seed=5)
    broken = the_plan.runs[4].run_id
    experiment = FakeExperiment(
        results, lambda run, call: "incomplete" if run.run_id == broken else "complete"
    )
    runner, _ = make_runner(the_plan, kit, results, experiment)
    outcome = runner.run()
    for run_id in outcome.complete:  # Flink's own checkpoint statistics
        engine = results / run_id / "engine"
        engine.mkdir()
        checkpoints = {
            "counts": {"completed": 10},
            "summary": {"end_to_end_duration": {"avg": 778}},
        }
        (engine / "flink-checkpoints.json").write_text(json.dumps(checkpoints))
    # One run whose experiment did not summarise it: the report summarises it first.
    unsummarised = results / outcome.complete[0]
    (unsummarised / "summary.json").rename(unsummarised / "kept.json")
    summarised = []

    def summarize_runs(run_dirs):
        summarised.extend(run_dirs)
        for run_dir in run_dirs:
            (run_dir / "kept.json").rename(run_dir / "summary.json")

    report = write_report(the_plan, results, outcome, summarize_runs)
    assert summarised == [unsummarised]
    study_dir = results / "checkpoint-interval-scale0p5"
    assert report == study_dir / "report.md"
    text = report.read_text()
    assert text.startswith("# Study checkpoint-interval-scale0p5")
    assert "**Scale 0.5**" in text
    assert "| parameters.checkpoint_interval_s | 300 | 150 |" in text
    assert "| advice.mtbf_s | 600 | 300 |" in text
    assert "Complete: 8 of 9 runs (the comparison covers those)." in text
    assert f"| {broken} | incomplete | 1 | the drain timed out |" in text
    assert "## Comparison" in text and "![duplicate_rate.png](plots/duplicate_rate.png)" in text
    # The advice at the scaled failure rate: c = 0.778 s, M = 300 s.
    assert "## Checkpoint interval advice" in text
    advice = json.loads((study_dir / "advice.json").read_text())
    assert advice["checkpoint_cost_s"] == pytest.approx(0.778)
    assert advice["mtbf_s"] == pytest.approx(300)
    assert advice["young_daly_s"] == pytest.approx((2 * 0.778 * 300) ** 0.5)
    assert sorted(r["interval_s"] for r in advice["measured"]) == [3, 15, 150]
    csv_rows = (study_dir / "comparison.csv").read_text().splitlines()
    assert len([row for row in csv_rows if ",run," in row]) == 8
    # It ends with what the runs show, written from their intervals.
    assert "## Intervals over repetitions" in text and "## Comparisons" in text
    assert text.rstrip().endswith("not that there is none.")
    assert "\n## What this study shows\n" in text


def test_command_refuses_a_bad_spec_before_any_run(tmp_path, kit, capsys):
    results = tmp_path / "results"
    bad = tmp_path / "bad.yml"
    bad.write_text("engines: [flink]\nparameters:\n  count: [40000]\n  checkpoint_intervall_s: 5\n")
    experiment = FakeExperiment(results)
    code = cli.main([str(bad), "--results", str(results)], kit=kit, run_experiment=experiment)
    assert code == 2
    error = capsys.readouterr().err
    assert "parameters.checkpoint_intervall_s: not an experiment parameter" in error
    assert experiment.calls == [] and not results.exists()


def test_command_dry_run_lists_the_runs_and_writes_nothing(tmp_path, kit, capsys):
    results = tmp_path / "results"
    experiment = FakeExperiment(results)
    sweep = str(TEST_STUDIES / "sweep.yml")
    assert cli.main([sweep, "--results", str(results), "--dry-run"], kit, experiment) == 0
    printed = capsys.readouterr().out
    assert "study sweep" in printed and ": 4 runs" in printed
    assert "inventory: inventory/local (ansible.cfg's)" in printed
    assert printed.count(", ~") == 4 and "to run: 4 of 4, estimated" in printed
    assert (
        f"with the analysis after the last run (~{duration_text(plan.analysis_estimate_s(4))}"
        in printed
    )
    assert (
        "overhead taken from flink: the kit's fixed model (no earlier run to measure); "
        "storm: the kit's fixed model" in printed
    )
    assert experiment.calls == [] and not results.exists()


def test_command_runs_the_study_and_reports(tmp_path, kit, capsys):
    results = tmp_path / "results"
    experiment = FakeExperiment(results)
    sweep = str(TEST_STUDIES / "sweep.yml")
    assert cli.main([sweep, "--results", str(results)], kit, experiment) == 0
    assert len(experiment.calls) == 4
    assert "wrote" in capsys.readouterr().out
    record = load_record(results / "sweep")
    seed = record["order_seed"]
    assert isinstance(seed, int)
    assert (results / "sweep" / "report.md").is_file()
    # A second start keeps the recorded order seed and has nothing to run.
    again = FakeExperiment(results)
    assert cli.main([sweep, "--results", str(results), "--dry-run"], kit, again) == 0
    printed = capsys.readouterr().out
    assert f"seed {seed} (recorded when the study first started)" in printed
    assert printed.count("complete, skipped") == 4
    assert cli.main([sweep, "-i", str(tmp_path / "nowhere")], kit, again) == 2
    assert "no such inventory" in capsys.readouterr().err


def fake_ansible_run(monkeypatch, result: object, events: tuple[dict, ...] = ()) -> dict:
    """ansible_runner.run replaced: it sends events to the handler and returns result; the
    options it was given land in the returned dict."""
    seen: dict = {}

    def fake_run(**options):
        seen.update(options)
        for event in events:
            options["event_handler"](event)
        return result

    monkeypatch.setattr(ansible.ansible_runner, "run", fake_run)
    return seen


def test_ansible_experiment_runs_the_playbook_with_the_runs_settings(tmp_path, kit, monkeypatch):
    class Result:
        rc = 2
        status = "failed"
        stdout = io.StringIO("PLAY [Experiment]\nfatal: [node1]: FAILED! => {}\n")

    events = (
        {"event": "playbook_on_play_start", "event_data": {"play": "Experiment"}},
        {"event": "runner_on_ok", "event_data": {"task": "not a phase"}},
        {"event": "playbook_on_task_start", "event_data": {"task": "Drain"}},
    )
    seen = fake_ansible_run(monkeypatch, Result, events)
    run = sweep_plan(kit).runs[0]
    phases = []
    experiment = ansible.AnsibleExperiment(kit, None, tmp_path / "logs")
    result = experiment(run, run.extravars("/results"), phases.append)
    assert phases == ["Experiment", "Drain"]
    assert seen["playbook"] == str(kit.root / "playbooks" / "experiment.yml")
    assert seen["project_dir"] == str(kit.root)
    assert seen["extravars"]["run_id"] == run.run_id
    assert seen["envvars"]["ANSIBLE_CONFIG"] == str(kit.root / "ansible.cfg")
    # One fact cache for every run of the study, never expired while it runs.
    assert seen["envvars"]["ANSIBLE_CACHE_PLUGIN_CONNECTION"] == experiment.facts.name
    assert Path(experiment.facts.name).is_dir()
    assert seen["envvars"]["ANSIBLE_CACHE_PLUGIN_TIMEOUT"] == "0"
    assert "inventory" not in seen  # ansible.cfg's, as ansible-playbook takes it
    assert result.rc == 2 and "FAILED!" in result.output_tail
    assert result.log is not None and "fatal: [node1]" in Path(result.log).read_text()

    Result.stdout = io.StringIO("")
    ansible.AnsibleExperiment(kit, tmp_path / "hosts.yml", tmp_path / "logs")(
        run, run.extravars("/results"), phases.append
    )
    assert seen["inventory"] == str(tmp_path / "hosts.yml")


def test_settings_the_kit_derives_from_0_are_no_conflict(tmp_path, kit):
    results = tmp_path / "results"
    path = tmp_path / "derived.yml"
    path.write_text("engines: [flink]\nparameters:\n  count: 40000\n  partitions: 0\n")
    the_plan = plan.make_plan(spec.load(path, kit), kit, 1.0, order_seed=1)
    (run,) = the_plan.runs
    (results / run.run_id).mkdir(parents=True)
    recorded = {"engine": "flink", "status": "complete", "parameters": {"count": 40000.0}}
    recorded["parameters"]["partitions"] = 4  # what the experiment derived from the slots
    (results / run.run_id / "run.json").write_text(json.dumps(recorded))
    experiment = FakeExperiment(results)
    runner, _ = make_runner(the_plan, kit, results, experiment)
    assert runner.run().finished and experiment.calls == []


def test_asked_to_stop_the_study_ends_after_the_run_under_way(tmp_path, kit):
    results = tmp_path / "results"
    the_plan = sweep_plan(kit)
    switch = StopSwitch(out=io.StringIO())
    experiment = FakeExperiment(results)

    def first_run_then_ctrl_c(run, extravars, on_phase):
        result = experiment(run, extravars, on_phase)
        switch._on_interrupt(signal.SIGINT, None)  # Ctrl-C during the first run
        return result

    progress, _ = quiet_progress()
    runner = StudyRunner(
        the_plan, kit, results, first_run_then_ctrl_c, progress, stop_requested=switch
    )
    outcome = runner.run()
    assert experiment.calls == [the_plan.runs[0].run_id]
    assert outcome.stopped_by_request and not outcome.finished and not outcome.failed
    assert outcome.complete == [the_plan.runs[0].run_id]
    assert [r["status"] for r in load_record(results / "sweep")["runs"]] == [
        "complete",
        *["not run"] * 3,
    ]
    assert not switch.cancel()  # the run under way was left to finish


def test_a_second_ctrl_c_cancels_the_run_or_interrupts_at_once():
    switch = StopSwitch(out=io.StringIO())
    switch._on_interrupt(signal.SIGINT, None)
    assert switch() and not switch.cancel()
    with switch.experiment():
        switch._on_interrupt(signal.SIGINT, None)  # in a run: ansible-runner cancels it
    assert switch.cancel()
    with pytest.raises(KeyboardInterrupt):  # between runs (the report): at once
        switch._on_interrupt(signal.SIGINT, None)
    terminated = StopSwitch(out=io.StringIO())
    with terminated.experiment():
        terminated._on_terminate(signal.SIGTERM, None)
    assert terminated() and terminated.cancel()


def test_a_cancelled_playbook_is_an_interrupted_run_with_its_log(tmp_path, kit, monkeypatch):
    class CancelledResult:
        rc = 254
        status = "canceled"
        stdout = io.StringIO("PLAY [Experiment]\nTASK [Drain]\n")

    seen = fake_ansible_run(monkeypatch, CancelledResult)
    switch = StopSwitch(out=io.StringIO())
    run = sweep_plan(kit).runs[0]
    experiment = ansible.AnsibleExperiment(kit, None, tmp_path / "logs", switch)
    with pytest.raises(Cancelled, match="cancelled") as raised:
        experiment(run, run.extravars("/results"), lambda phase: None)
    assert seen["cancel_callback"] == switch.cancel
    (log,) = (tmp_path / "logs").iterdir()
    assert "TASK [Drain]" in log.read_text() and raised.value.log == str(log)

    # The study records the cancelled attempt with that log.
    results = tmp_path / "results"

    def cancelled(run, extravars, on_phase):
        raise Cancelled("the playbook was cancelled", str(log))

    progress, _ = quiet_progress()
    runner = StudyRunner(sweep_plan(kit), kit, results, cancelled, progress)
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    (attempt,) = load_record(results / "sweep")["runs"][0]["attempts"]
    assert attempt["status"] == "interrupted" and attempt["log"] == str(log)


def test_the_study_handles_signals_only_while_its_runs_go():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    switch = StopSwitch(out=io.StringIO())
    with switch.installed():
        assert signal.getsignal(signal.SIGINT) == switch._on_interrupt
        assert signal.getsignal(signal.SIGTERM) == switch._on_terminate
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_the_report_sets_the_study_time_against_the_producing_time(tmp_path, kit):
    results = tmp_path / "results"
    the_plan = sweep_plan(kit)
    now = [0.0]
    experiment = FakeExperiment(results)

    def run_for_100_s(run, extravars, on_phase):
        now[0] += 100
        return experiment(run, extravars, on_phase)

    progress, _ = quiet_progress()
    runner = StudyRunner(the_plan, kit, results, run_for_100_s, progress, clock=lambda: now[0])
    outcome = runner.run()
    analysed = []

    def summarize_in_12_s(run_dirs):  # the runs' experiments did not summarise them
        analysed.extend(run_dirs)
        for run_dir in run_dirs:
            (run_dir / "kept.json").rename(run_dir / "summary.json")
        now[0] += 12

    for run_id in outcome.complete:
        (results / run_id / "summary.json").rename(results / run_id / "kept.json")
    text = write_report(
        the_plan, results, outcome, summarize_in_12_s, clock=lambda: now[0]
    ).read_text()
    assert len(analysed) == 4
    sending_s = the_plan.runs[0].parameters["count"] / the_plan.runs[0].parameters["rate"]
    assert "## Time" in text
    assert "4 attempt(s) took 6.7 min of wall time in all" in text
    assert f"producers sent for {4 * sending_s / 60:.1f} min" in text
    assert f"producing was {100 * sending_s / 100:.0f} % of the study's time" in text
    assert f"was {100 - sending_s:.0f} to {100 - sending_s:.0f} s" in text
    assert (
        "After the last run, 4 run(s) without a summary.json were analysed in one local Spark "
        "application (4 summarised), in 12 s of wall time besides." in text
    )


def test_a_report_whose_runs_cannot_be_summarised_says_so_and_what_to_do(tmp_path, kit):
    results = tmp_path / "results"
    the_plan = sweep_plan(kit)
    progress, _ = quiet_progress()
    outcome = StudyRunner(the_plan, kit, results, FakeExperiment(results), progress).run()
    for run_id in outcome.complete:
        (results / run_id / "summary.json").unlink()
    with pytest.raises(ReportError) as refused:
        write_report(the_plan, results, outcome, lambda run_dirs: None)
    assert "4 complete run(s), none could be summarised" in str(refused.value)
    assert "python -m analysis summarize" in str(refused.value)
    assert not (results / "sweep" / "report.md").exists()


def test_spark_summarize_names_a_run_that_fails_and_summarises_the_others(
    tmp_path, monkeypatch, capsys
):
    from analysis import session, summarize

    class FakeSpark:
        stopped = False

        def stop(self):
            FakeSpark.stopped = True

    def fake_summarize(spark, run_dir):
        if run_dir.name == "bad":
            raise RuntimeError("Py4JJavaError: out of memory")
        (run_dir / "summary.json").write_text("{}")
        return {"run_id": run_dir.name}

    monkeypatch.setattr(session, "build", lambda: FakeSpark())
    monkeypatch.setattr(summarize, "summarize", fake_summarize)
    monkeypatch.setattr(study_report, "headline", lambda summary: f"headline {summary['run_id']}")
    run_dirs = [tmp_path / name for name in ("a", "bad", "b")]
    for run_dir in run_dirs:
        run_dir.mkdir()
    study_report.spark_summarize(run_dirs)
    printed = capsys.readouterr()
    assert f"cannot summarise {tmp_path / 'bad'}: Py4JJavaError: out of memory" in printed.err
    assert "a:\nheadline a" in printed.out and "b:\nheadline b" in printed.out
    assert [(d / "summary.json").exists() for d in run_dirs] == [True, False, True]
    assert FakeSpark.stopped


def test_the_study_lock_is_held_from_the_runs_through_the_report(tmp_path, kit):
    results = tmp_path / "results"
    the_plan = sweep_plan(kit)
    progress, _ = quiet_progress()
    first = StudyRunner(the_plan, kit, results, FakeExperiment(results), progress)
    second = StudyRunner(the_plan, kit, results, FakeExperiment(results), progress)
    with first.locked():
        first.run()  # takes no second lock of its own
        with pytest.raises(StudyError, match="another streamlab-study is running sweep"):
            second.run()
    second.run()  # free again


def test_the_phase_table_gives_each_engines_median_phase_and_time_around_producing(tmp_path):
    def run(name, engine, phases, sending_ms):
        run_dir = tmp_path / name
        run_dir.mkdir()
        marks, at = [], 0
        for phase, length_s in phases:
            marks.append({"name": phase, "start_ms": at, "end_ms": at + length_s * 1000})
            at += length_s * 1000
        (run_dir / "run.json").write_text(json.dumps({"engine": engine, "phases": marks}))
        summary = {"start_ms": 1_000, "end_ms": 1_000 + sending_ms}
        (run_dir / "produced.summary.json").write_text(json.dumps(summary))
        return run_dir

    dirs = [
        run("f1", "flink", [("submit", 10), ("producing", 30), ("drain", 6)], 25_000),
        run("f2", "flink", [("submit", 14), ("producing", 31), ("drain", 8)], 26_000),
        run("f3", "flink", [("submit", 30), ("producing", 29), ("drain", 7)], 25_000),
        run("s1", "storm", [("submit", 20), ("producing", 30)], 25_000),
        run("old", "storm", [], 25_000),  # recorded before phases: left out
    ]
    assert study_report.phase_table(dirs) == [
        "| phase | flink: median s (runs) | storm: median s (runs) |",
        "|---|---|---|",
        "| submit | 14.0 (3) | 20.0 (1) |",
        "| producing | 30.0 (3) | 30.0 (1) |",
        "| drain | 7.0 (3) | – |",
        # flink: 46 - 25, 53 - 26, 66 - 25 = 21, 27, 41; storm: 50 - 25
        "| around producing | 27.0 (3) | 25.0 (1) |",
    ]
    assert study_report.phase_table(dirs[-1:]) == []
    # A phase only later runs have (a fault's setup) is listed where runs reach it.
    faulted = run("s2", "storm", [("submit", 20), ("fault_setup", 4), ("producing", 30)], 25_000)
    rows = study_report.phase_table([dirs[3], faulted])[2:]
    assert [row.split(" | ")[0] for row in rows] == [
        "| submit",
        "| fault_setup",
        "| producing",
        "| around producing",
    ]


def test_the_report_names_the_kit_commits_its_runs_ran_with(tmp_path):
    from analysis.study.report import _kit_text  # noqa: PLC0415

    def run(run_id: str, commit: str | None, dirty: bool = False) -> str:
        (tmp_path / run_id).mkdir()
        record = {"kit_commit": commit, "kit_dirty": dirty} if commit else {}
        (tmp_path / run_id / "run.json").write_text(json.dumps(record))
        return run_id

    one = [run("a", "0123abcd" * 5), run("b", "0123abcd" * 5)]
    assert _kit_text(tmp_path, one) == [
        "All 2 complete runs ran with the kit at commit 0123abc.",
        "",
    ]
    resumed = [*one, run("c", "fedcba98" * 5, dirty=True)]
    assert _kit_text(tmp_path, resumed)[0] == (
        "The complete runs ran with 2 commits of the kit (0123abc: 2 runs; fedcba9: 1 run): a "
        "group whose runs span them also spans what changed between those commits. 1 of them "
        "ran with uncommitted changes in the kit's tree (run.json kit_dirty): c."
    )
    # Outside a git checkout the experiment records `unknown`: no commit either.
    assert _kit_text(tmp_path, [run("d", None), run("e", "unknown")])[0] == (
        "The complete runs' run.json records no kit commit (kit_commit)."
    )
    from analysis.study.kit import one_commit  # noqa: PLC0415

    assert one_commit(tmp_path / name for name in one) == ("0123abc", False)
    assert one_commit(tmp_path / name for name in resumed) is None
    assert one_commit([tmp_path / "e"]) is None


def test_a_study_resumed_with_another_kit_commit_says_so_and_how_to_keep_one(tmp_path):
    from analysis.study.report import kit_change_note  # noqa: PLC0415

    for run_id, commit in (("a", "0123abcd" * 5), ("b", "0123abcd" * 5), ("c", None)):
        (tmp_path / run_id).mkdir()
        record = {"kit_commit": commit} if commit else {}
        (tmp_path / run_id / "run.json").write_text(json.dumps(record))
    runs = ["a", "b", "c"]
    same = ("0123abcd" * 5, False)
    assert kit_change_note(tmp_path, runs, same) is None
    assert kit_change_note(tmp_path, runs, None) is None  # not a git checkout
    assert kit_change_note(tmp_path, [], ("fedcba98" * 5, True)) is None  # nothing ran yet
    assert kit_change_note(tmp_path, runs, ("fedcba98" * 5, False)) == (
        "this study's complete runs ran with the kit 2 at 0123abc; this checkout is at fedcba9, "
        "which the runs still to do will record, and the report names every commit; to run the "
        "rest with 0123abc, start the study from a worktree of it (git worktree add <dir> "
        "0123abc) with the same --results"
    )
    dirty = kit_change_note(tmp_path, runs, ("0123abcd" * 5, True))
    assert dirty is not None and "this checkout is at 0123abc with uncommitted changes" in dirty
    assert "worktree" not in dirty
