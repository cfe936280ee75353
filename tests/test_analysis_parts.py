"""The analysis' pure-Python parts: percentiles, engine evidence, compare and the CLI."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from analysis_runs import BASE_MS, RunDir

from analysis import compare, engine, histogram
from analysis.__main__ import main
from analysis.engines import flink as flink_engine
from conftest import REPO

B = BASE_MS


@pytest.mark.parametrize(
    "counts,percent,expected",
    [
        ([(5, 1)], "50", 5),
        ([(1, 1), (2, 1), (3, 1), (4, 1)], "50", 2),
        ([(1, 1), (2, 1), (3, 1), (4, 1)], "50.1", 3),
        ([(10, 999), (20, 1)], "99.9", 10),
        ([(10, 998), (20, 2)], "99.9", 20),
        ([(-3, 2), (7, 2)], "100", 7),
        ([], "99", None),
    ],
)
def test_nearest_rank(counts, percent, expected):
    assert histogram.nearest_rank(counts, percent) == expected


def test_describe_and_cdf():
    counts = [(1, 2), (4, 1), (10, 1)]
    assert histogram.describe(counts) == {
        "count": 4,
        "p50": 1,
        "p90": 10,
        "p99": 10,
        "p99.9": 10,
        "max": 10,
        "mean": 4.0,
    }
    assert histogram.cdf(counts) == [(1, 0.5), (4, 0.75), (10, 1.0)]


def write_engine(path, files):
    (path / "engine").mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        text = data if isinstance(data, str) else json.dumps(data)
        (path / "engine" / name).write_text(text)


def test_flink_evidence_and_the_timeline_around_a_fault(tmp_path):
    fault = B + 60_000
    # The JobManager's clock runs 500 ms ahead of the driver's.
    run = {
        "hosts": [
            {"name": "node1", "roles": ["driver", "flink_jobmanager"], "clock_offset_ms": 500},
            {"name": "node2", "roles": ["flink_taskmanager"], "clock_offset_ms": -20},
        ]
    }
    checkpoints = {
        "counts": {"completed": 11, "failed": 2, "in_progress": 0, "restored": 1, "total": 13},
        "summary": {
            "end_to_end_duration": {"p50": 40.5, "max": 1200},
            "checkpointed_size": {"avg": 3000, "max": 4000},
        },
        "latest": {"completed": {"checkpointed_size": 3412}},
        "history": [
            {
                "id": 9,
                "status": "FAILED",
                "trigger_timestamp": fault + 2_500,
                "end_to_end_duration": 900,
            },
            {"id": 3, "status": "COMPLETED", "trigger_timestamp": fault - 40_000},
        ],
    }
    write_engine(
        tmp_path,
        {
            "flink-checkpoints.json": checkpoints,
            "flink-checkpoint-config.json": {"interval": 5000, "mode": "at_least_once"},
            "flink-exceptions.json": {
                "exceptionHistory": {
                    "entries": [
                        {
                            "exceptionName": "TaskManagerLost",
                            "timestamp": fault + 1_500,
                            "taskName": "enrich",
                        }
                    ],
                    "truncated": False,
                }
            },
            "flink-job.json": {"state": "RUNNING", "timestamps": {"RESTARTING": fault + 1_600}},
            "timeline.jsonl": json.dumps({"t_ms": fault + 40, "host": "node2", "what": "x"})
            + "\nnot json\n",
            "lag.jsonl": "\n".join(
                json.dumps(row)
                for row in [
                    {"t_ms": fault - 1_000, "lag": 5, "backlog": 8},
                    {"t_ms": fault + 1_000, "lag": 900, "backlog": 950},
                    {"t_ms": fault + 2_000, "error": "timeout"},
                ]
            ),
        },
    )
    assert engine.evidence(tmp_path) == {
        "flink": {
            "checkpoints": {
                "completed": 11,
                "failed": 2,
                "in_progress": 0,
                "restored": 1,
                "duration_ms": {"p50": 40.5, "max": 1200},
                "size_bytes": {"last": 3412, "avg": 3000, "max": 4000},
            },
            "checkpoint_interval_ms": 5000,
            "checkpoint_mode": "at_least_once",
            "restarts": 1,
            "exception_history_size": None,  # no /jobmanager/config kept
            "restarts_truncated": False,
            "job_state": "RUNNING",
        }
    }
    (timeline,) = engine.timelines(tmp_path, run, [fault])
    assert [(e["t_ms"] - fault, e["source"]) for e in timeline["events"]] == [
        (60, "timeline"),
        (1_000, "flink-exceptions"),
        (1_100, "flink-job"),
        (2_000, "flink-checkpoints"),
    ]
    assert timeline["events"][3]["event"] == "checkpoint 9 FAILED (900 ms)"
    assert timeline["events"][0]["offset_s"] == 0.06
    assert timeline["lag"] == {"samples": 2, "lag_before": 5, "max_lag": 900, "max_backlog": 950}


@pytest.mark.parametrize(
    ("entries", "jobmanager_config", "cut", "size", "truncated"),
    [
        # As in a CI run: 16 failed restarts filled Flink's default history.
        (16, [{"key": "jobmanager.rpc.port", "value": "6123"}], False, 16, True),
        (15, [], False, 16, False),
        (10, [{"key": "web.exception-history-size", "value": "256"}], False, 256, False),
        (256, [{"key": "web.exception-history-size", "value": "256"}], False, 256, True),
        # The REST handler's own cut (maxExceptions) is flagged whatever the size.
        (20, [{"key": "web.exception-history-size", "value": "256"}], True, 256, True),
        # Without the JobManager's word the size is unknown: only Flink's flag counts.
        (16, None, False, None, False),
        (3, [{"key": "web.exception-history-size", "value": "lots"}], False, None, False),
    ],
)
def test_flink_restarts_are_a_lower_bound_when_the_exception_history_was_full(
    tmp_path, entries, jobmanager_config, cut, size, truncated
):
    history = {"entries": [{"timestamp": B + i} for i in range(entries)], "truncated": cut}
    files = {"flink-exceptions.json": {"exceptionHistory": history}}
    if jobmanager_config is not None:
        files["flink-jobmanager-config.json"] = jobmanager_config
    write_engine(tmp_path, files)
    flink = flink_engine.evidence(tmp_path / "engine")
    assert flink == {
        "restarts": entries,
        "exception_history_size": size,
        "restarts_truncated": truncated,
    }


def test_storm_evidence_and_no_engine_directory(tmp_path):
    assert engine.evidence(tmp_path) == {}
    assert engine.timelines(tmp_path, {}, [B]) == [{}]
    topology = {"spout_acked": 100, "spout_failed": 3, "complete_latency_ms": 8.5}
    write_engine(tmp_path, {"storm-topology.json": topology})
    assert engine.evidence(tmp_path) == {
        "storm": {"acked": 100, "emitted": None, "failed": 3, "complete_latency_ms": 8.5}
    }


def fake_summary(root, run_id, engine_name, interval, duplicate_rate, p99, recovery):
    directory = root / run_id
    directory.mkdir()
    parameters = {"rate": 2000, "seed": len(run_id), "input_topic": f"in-{run_id}"}
    if engine_name == "flink":
        parameters["checkpoint_interval_s"] = interval
    else:
        parameters["storm_message_timeout_s"] = interval
    summary = {
        "run_id": run_id,
        "engine": engine_name,
        "fault": "kill-taskmanager",
        "parameters": parameters,
        "produced": 1000,
        "loss_rate": 0.0,
        "duplicate_rate": duplicate_rate,
        "duplicated_messages_rate": duplicate_rate / 2,
        "latency_ms": {"p50": 10, "p99": p99, "p99.9": p99 * 2, "max": p99 * 3},
        "throughput": {"produced_per_s": {"mean": 2000.0}, "received_per_s": {"mean": 1999.0}},
        "faults": [{"stall_s": 1.5, "recovery_s": recovery}],
    }
    (directory / "summary.json").write_text(json.dumps(summary))
    return directory


def test_compare_groups_repetitions_and_writes_table_and_plots(tmp_path, capsys):
    runs = [
        fake_summary(tmp_path, "f5-a", "flink", 5, 0.01, 100, 4.0),
        fake_summary(tmp_path, "f5-b", "flink", 5, 0.03, 300, 6.0),
        fake_summary(tmp_path, "f10-a", "flink", 10, 0.05, 200, 9.0),
        fake_summary(tmp_path, "s30-a", "storm", 30, 0.2, 50, None),
    ]
    out = tmp_path / "cmp"
    assert main(["compare", *map(str, runs), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert (
        "flink checkpoint_interval_s=5     n=2  replayed s/fault –  duplicate rate 2 %  "
        "p99 ms 200  recovery s 5 ± 1.414" in printed
    )

    # Numbers by value, equal ones by their text; anything else by its text after them.
    values = ["b", None, 30, True, 5.0, 5, 10]
    assert sorted(values, key=compare._value_order) == [5, 5.0, 10, 30, "b", None, True]

    # Past ALL_PAIRS_UP_TO groups, two engines are compared at the same value of their studied
    # settings, whatever fault each ran (the fault is among the parameters).
    many = [
        compare.Group(engine, fault, {"fault": fault, "rate": 100, sweep: value})
        for engine, fault, sweep in (
            ("flink", "kill_taskmanager", "checkpoint_interval_s"),
            ("storm", "kill_supervisor", "storm_message_timeout_s"),
        )
        for value in (5, 30, 60, 90)
    ]
    pairs = {(a.engine, b.engine, a.parameters[a.sweep_parameter]) for a, b in
             compare.compared_pairs(many) if a.engine != b.engine}  # fmt: skip
    assert pairs == {("flink", "storm", value) for value in (5, 30, 60, 90)}

    groups = compare.group_runs(compare.load_runs(runs))
    assert [(g.label, [r.run_id for r in g.runs]) for g in groups] == [
        # By the setting's value, not its text.
        ("flink checkpoint_interval_s=5", ["f5-a", "f5-b"]),
        ("flink checkpoint_interval_s=10", ["f10-a"]),
        ("storm storm_message_timeout_s=30", ["s30-a"]),
    ]
    rows = list(csv.DictReader((out / "comparison.csv").open()))
    mean = next(r for r in rows if r["group"].endswith("=5") and r["kind"] == "mean")
    sd = next(r for r in rows if r["group"].endswith("=5") and r["kind"] == "sd")
    assert float(mean["duplicate_rate"]) == pytest.approx(0.02)
    assert float(mean["latency_p99_ms"]) == 200.0
    assert float(mean["recovery_s"]) == 5.0 and float(sd["latency_p99_ms"]) == pytest.approx(
        141.42135623730951
    )
    assert mean["n"] == "2" and mean["checkpoint_interval_s"] == "5"
    assert "seed" not in rows[0] and "input_topic" not in rows[0]
    table = (out / "comparison.md").read_text()
    assert "| s30-a |" in table and "| not in run |" in table and "± 1.414" in table
    assert {p.name for p in (out / "plots").iterdir()} == {
        "latency_percentiles.png",
        "duplicate_rate.png",
        "recovery.png",
        "parameter_sweep.png",
    }


def test_the_start_lead_does_not_split_repetitions_recorded_before_and_after_it(tmp_path):
    """Older runs' run.json has no start_lead_ms; it follows from the fault, so an older run
    without it and a newer one with it are repetitions of one setting."""
    older = fake_summary(tmp_path, "f5-old", "flink", 5, 0.01, 100, 4.0)
    newer = fake_summary(tmp_path, "f5-new", "flink", 5, 0.03, 300, 6.0)
    summary = json.loads((newer / "summary.json").read_text())
    summary["parameters"]["start_lead_ms"] = 5000
    (newer / "summary.json").write_text(json.dumps(summary))
    groups = compare.group_runs(compare.load_runs([older, newer]))
    assert [[r.run_id for r in g.runs] for g in groups] == [["f5-old", "f5-new"]]


def test_compare_needs_summaries(tmp_path, capsys):
    (tmp_path / "r").mkdir()
    assert main(["compare", str(tmp_path / "r"), "--out", str(tmp_path / "o")]) == 1
    assert "summary.json: missing: run `python -m analysis summarize" in capsys.readouterr().err


def test_summarize_command_line(tmp_path):
    run = RunDir(tmp_path, parameters={"warmup_s": 0})
    for i in range(1, 801):
        run.produce(i, B + 10 * i).receive(i, B + 10 * i + 25)
    run.fault(B + 1_000, B + 1_500)
    path = run.write()
    done = subprocess.run(
        [sys.executable, "-m", "analysis", "summarize", str(path), "--master", "local[1]"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "latency ms  p50 25  p90 25" in done.stdout
    assert "fault 1     kill node2 at +0.990 s: stall 0.010 s, recovery 0.025 s" in done.stdout
    summary = json.loads((path / "summary.json").read_text())
    assert summary["analysis"]["master"] == "local[1]"
    assert (path / "report.html").exists() and (path / "plots" / "throughput.png").exists()


def test_several_runs_share_one_spark_application_and_a_bad_one_is_left_untouched(tmp_path):
    paths = []
    for run_id, latency in (("run-a", 20), ("run-bad", 30), ("run-b", 40)):
        run = RunDir(tmp_path, run_id, parameters={"warmup_s": 0})
        for i in range(1, 201):
            run.produce(i, B + 10 * i).receive(i, B + 10 * i + latency)
        paths.append(run.write())
    bad = paths[1] / "received.jsonl"
    lines = bad.read_text().splitlines(keepends=True)
    bad.write_text("".join([*lines[:2], "not json\n", *lines[2:]]))
    done = subprocess.run(
        [sys.executable, "-m", "analysis", "summarize", *map(str, paths), "--master", "local[1]"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert f"{bad}:3: not a JSON object" in done.stderr
    assert not (paths[1] / "summary.json").exists() and not (paths[1] / "plots").exists()
    # The runs around it are summarised, each with its own figures and headline.
    for path, latency in ((paths[0], 20), (paths[2], 40)):
        assert json.loads((path / "summary.json").read_text())["latency_ms"]["p50"] == latency
        assert f"== {path.name}\n" in done.stdout
    twice = subprocess.run(
        [sys.executable, "-m", "analysis", "summarize", str(paths[0]), str(paths[0])],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert twice.returncode == 2 and "named twice; name each run once" in twice.stderr


def test_summarize_command_line_bad_input(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "analysis", "summarize", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"python -m analysis summarize: error: {tmp_path / 'nope'}: not a directory"
    )
    usage = subprocess.run(
        [sys.executable, "-m", "analysis", "summarize", str(tmp_path), "--conf", "x"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert usage.returncode == 2 and "expected KEY=VALUE" in usage.stderr


def test_the_engines_own_word_on_when_it_was_unwell_and_well_again():
    start = 1_000_000
    rows = [
        {"t_ms": start - 1000, "healthy": True},
        {"t_ms": start + 1000, "healthy": True},  # not noticed yet
        {"t_ms": start + 2000, "healthy": False},
        {"t_ms": start + 3000, "error": "timeout", "healthy": False},
        {"t_ms": start + 9000, "healthy": True},
        {"t_ms": start + 10000, "healthy": True},
        {"t_ms": start + 11000, "state": "no flag"},
    ]
    health = engine.engine_health(rows, {}, start)
    assert health == {
        "unhealthy_from_ms": start + 2000,
        "healthy_again_ms": start + 9000,
        "engine_recovery_s": 9.0,
        "last_sample_ms": start + 10000,
    }
    never_unwell = engine.engine_health(rows[:2], {}, start)
    assert never_unwell["unhealthy_from_ms"] is None and never_unwell["engine_recovery_s"] is None
    assert engine.engine_health(rows[:4], {}, start)["healthy_again_ms"] is None
    assert engine.engine_health([{"t_ms": start}], {}, start) is None


def test_compare_flags_overloaded_runs_and_leaves_them_out_of_the_mean(tmp_path):
    runs = [
        fake_summary(tmp_path, "f5-a", "flink", 5, 0.01, 100, 4.0),
        fake_summary(tmp_path, "f5-b", "flink", 5, 0.03, 300, 6.0),
        fake_summary(tmp_path, "f5-c", "flink", 5, 0.05, 900, 8.0),
    ]
    verdicts = {"f5-a": False, "f5-b": True}  # f5-c: the collector could not tell
    for run in runs[:2]:
        overload = {"overloaded": verdicts[run.name], "reason": "backlog slope"}
        (run / "received.summary.json").write_text(json.dumps({"overload": overload}))
    out = tmp_path / "cmp"
    (group,) = compare.compare(runs, out)
    assert [r.overloaded for r in group.runs] == [False, True, None]
    assert [r.run_id for r in group.counted] == ["f5-a", "f5-c"]
    assert group.mean(compare._metric("latency_p99_ms")) == 500.0
    table = (out / "comparison.md").read_text()
    assert "| f5-b | yes |" in table and "| f5-a | no |" in table and "| f5-c | unknown |" in table
    assert "mean (n=2, 1 overloaded left out, 1 with overload unknown counted)" in table
    rows = list(csv.DictReader((out / "comparison.csv").open()))
    assert [r["overloaded"] for r in rows if r["kind"] == "run"] == ["false", "true", ""]
    assert next(r for r in rows if r["kind"] == "mean")["n"] == "2"
    assert (out / "plots" / "latency_percentiles.png").is_file()
    assert "![latency_percentiles.png](plots/latency_percentiles.png)" in table


def test_compare_leaves_a_run_whose_wall_clock_moved_out_of_the_mean_not_out_of_held(tmp_path):
    runs = [
        fake_summary(tmp_path, "f5-a", "flink", 5, 0.01, 100, 4.0),
        fake_summary(tmp_path, "f5-b", "flink", 5, 0.03, 300, 6.0),
        fake_summary(tmp_path, "f5-c", "flink", 5, 0.05, 900, 8.0),
    ]
    for run, moved in zip(runs, (False, True, None), strict=True):
        clock = {"largest_ms": 6500.0 if moved else 0.1, "limit_ms": 50.0, "moved": moved}
        (run / "run.json").write_text(json.dumps({"wall_clock": clock}))
        summary = json.loads((run / "summary.json").read_text())
        summary["verdict"] = {"guarantee": "at_least_once", "holds": True, "lost": 0}
        (run / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "cmp"
    (group,) = compare.compare(runs, out)
    assert [r.clock_moved for r in group.runs] == [False, True, None]
    assert [r.run_id for r in group.counted] == ["f5-a", "f5-c"]
    assert group.mean(compare._metric("latency_p99_ms")) == 500.0
    assert group.held_text() == "3 of 3 held"
    table = (out / "comparison.md").read_text()
    assert "| f5-b (clock moved) | unknown |" in table and "| f5-a | unknown |" in table
    assert "mean (n=2, 1 with the clock moved left out, 2 with overload unknown counted)" in table
    rows = list(csv.DictReader((out / "comparison.csv").open()))
    assert [r["clock_moved"] for r in rows if r["kind"] == "run"] == ["false", "true", ""]
    assert next(r for r in rows if r["kind"] == "mean")["n"] == "2"


def test_compare_draws_no_plot_of_overloaded_runs_and_says_why(tmp_path):
    runs = [
        fake_summary(tmp_path, "f5-a", "flink", 5, 0.01, 100, 4.0),
        fake_summary(tmp_path, "s30-a", "storm", 30, 0.2, 50, 3.0),
    ]
    out = tmp_path / "cmp"
    compare.compare(runs, out)  # not overloaded: every plot drawn but replayed.png (no figure)
    assert len(list((out / "plots").iterdir())) == 4
    for run in runs:
        overload = {"overloaded": True, "reason": "backlog slope"}
        (run / "received.summary.json").write_text(json.dumps({"overload": overload}))
    compare.compare(runs, out)  # the same runs, now flagged: the earlier plots are gone
    assert list((out / "plots").iterdir()) == []
    table = (out / "comparison.md").read_text()
    assert "![" not in table
    assert (
        "Not drawn, as no run counted in a mean has a value for them (2 of 2 runs flagged "
        "overloaded and left out): latency_percentiles.png, replayed.png, duplicate_rate.png, "
        "recovery.png, "
        "parameter_sweep.png." in table
    )


def test_compare_says_when_only_some_runs_had_internal_tls(tmp_path, capsys):
    """Flink with flink_tls_internal against Storm (no TLS between workers): the table and the
    terminal say the comparison is not on equal footing, naming the runs; with TLS the same on
    every run (or none), nothing is said."""
    flink = fake_summary(tmp_path, "f5-a", "flink", 5, 0.01, 100, 4.0)
    storm = fake_summary(tmp_path, "s30-a", "storm", 30, 0.2, 50, None)
    (flink / "run.json").write_text(json.dumps({"settings": {"tls_internal": True}}))
    out = tmp_path / "cmp"
    assert main(["compare", str(flink), str(storm), "--out", str(out)]) == 0
    warning = "Not on equal footing: 1 of 2 runs ran with internal TLS"
    assert warning in capsys.readouterr().out
    table = (out / "comparison.md").read_text()
    assert f"**{warning} (settings.tls_internal: f5-a)" in table
    (flink / "run.json").write_text(json.dumps({"settings": {"tls_internal": False}}))
    assert main(["compare", str(flink), str(storm), "--out", str(out)]) == 0
    assert "equal footing" not in capsys.readouterr().out
    assert "equal footing" not in (out / "comparison.md").read_text()
