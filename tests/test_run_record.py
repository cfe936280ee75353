"""run.json, faults.jsonl and first-summary.json from the playbook's facts (run_record.py)."""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import sys

import pytest

from conftest import REPO

SPEC = importlib.util.spec_from_file_location(
    "run_record", REPO / "roles" / "experiment" / "files" / "run_record.py"
)
run_record = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(run_record)

HOSTS = ["node1", "node2"]


def facts(**changes):
    base = {
        "run_id": "r1",
        "engine": "flink",
        "fault": "none",
        "parameters": {"count": 10, "rate": 2.0, "warmup_s": 2},
        "job_id": "abc",
        "engine_version": "2.1.1",
        "settings_file": "flink-job-config.json",
        "readback": {
            "checkpoint_interval_ms": ["flink-checkpoint-config.json", "interval"],
            "source_tasks": ["flink-job.json", "vertices", 0, "parallelism"],
            "absent": ["flink-job.json", "vertices", 5, "parallelism"],
            "tls_internal": ["flink-jobmanager-config.json", "security.ssl.internal.enabled"],
            "not_configured": ["flink-jobmanager-config.json", "security.ssl.verify-hostname"],
        },
        "installed": {
            "node1": ["kafka kafka-4.1.1-maven-ab12", "flink flink-2.1.1-pypi-cd34"],
            "node2": ["kafka kafka-4.1.1-maven-ab12"],
        },
        "wheels": {"kafka-python": "3.0.12"},
        "kit_commit": "f" * 40,
        "kit_dirty": False,
        "driver": "node1",
        "hosts": {
            "address": {"node1": "10.0.0.1", "node2": "10.0.0.2"},
            "distribution": dict.fromkeys(HOSTS, "Debian"),
            "distribution_version": dict.fromkeys(HOSTS, "12.11"),
            "os_family": dict.fromkeys(HOSTS, "Debian"),
            "architecture": dict.fromkeys(HOSTS, "x86_64"),
            "groups": {"node1": ["driver"], "node2": ["flink_taskmanager"]},
        },
        "java_release": {
            "node1": base64.b64encode(b'IMPLEMENTOR="Debian"\nJAVA_VERSION="17.0.17"\n').decode(),
            "node2": "",
        },
        "clocks": {
            "start": {"node1": '{"offset_ms": 0.01, "rtt_ms": 0.2}', "node2": "noise\n"},
            "end": {"node1": '{"offset_ms": 0.02, "rtt_ms": 0.4}', "node2": ""},
        },
        "probe": {"ready": True, "probe_ids": [-1, -2]},
        "faults": [{"fault": "kill", "host": "node2", "start_ms": 5, "end_ms": 9}],
        "start_utc": "2026-11-24T00:00:00.000Z",
        "end_utc": "2026-11-24T00:01:00.000Z",
        "start_ms": 1,
        "end_ms": 2,
        "producer_exit": 0,
        "collector_exit": 0,
        "failures": [],
    }
    return base | changes


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / "engine").mkdir()
    (tmp_path / "produced.jsonl").write_text("")
    (tmp_path / "produced.summary.json").write_text(
        json.dumps({"acked": 10, "send_lag_ms": {"p50": 0.1, "p99": 1.5, "max": 3.0}})
    )
    (tmp_path / "received.summary.json").write_text(
        json.dumps(
            {
                "received": 11,
                "unique": 10,
                "duplicates": 1,
                "missing": 0,
                "stop_reason": "complete",
                "latency_ms": {"warmup_s": 2, "messages": 6, "p50": 40, "p99": 90, "max": 95},
                "output_rate": {"messages_per_s": 2.0},
                "overload": {"overloaded": False, "backlog_slope_per_s": 0.1},
            }
        )
    )
    (tmp_path / "engine" / "flink-job-config.json").write_text(
        json.dumps(
            {
                "execution-config": {
                    "user-config": {
                        "streamlab.sink.linger_ms": "5",
                        "streamlab.sink.idempotence": "true",
                        "streamlab.checkpoint_interval_ms": "1",
                        "streamlab.kafka_clients_version": "3.9.1",
                        "other": "x",
                    }
                }
            }
        )
    )
    (tmp_path / "engine" / "flink-checkpoint-config.json").write_text(
        json.dumps({"interval": 5000})
    )
    (tmp_path / "engine" / "flink-job.json").write_text(
        json.dumps({"vertices": [{"parallelism": 4}]})
    )
    # /jobmanager/config: a list of {key, value} entries.
    (tmp_path / "engine" / "flink-jobmanager-config.json").write_text(
        json.dumps(
            [
                {"key": "security.ssl.internal.keystore-password", "value": "******"},
                {"key": "security.ssl.internal.enabled", "value": "true"},
            ]
        )
    )
    return tmp_path


def write(run_dir, given):
    return run_record.write_run(run_dir, given)


def test_a_complete_run_records_settings_as_the_engine_reported_them(run_dir):
    lines = write(run_dir, facts())
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "complete" and record["incomplete_reasons"] == []
    # The job's own streamlab.* account, typed; the engine's own report wins where both exist.
    assert record["settings"] == {
        "sink.linger_ms": 5,
        "sink.idempotence": True,
        "checkpoint_interval_ms": 5000,
        "kafka_clients_version": "3.9.1",
        "source_tasks": 4,
        "tls_internal": True,
    }
    assert record["settings_read_from"]["checkpoint_interval_ms"] == (
        "flink-checkpoint-config.json interval"
    )
    assert record["settings_read_from"]["tls_internal"] == (
        "flink-jobmanager-config.json security.ssl.internal.enabled"
    )
    assert record["versions"] == {
        "kafka": "4.1.1",
        "flink": "2.1.1",
        "engine": "2.1.1",
        "kafka-python": "3.0.12",
        "flink_kafka_clients": "3.9.1",
    }
    hosts = {h["name"]: h for h in record["hosts"]}
    assert (
        hosts["node1"]["clock_offset_ms"] == 0.01 and hosts["node1"]["clock_offset_end_ms"] == 0.02
    )
    assert hosts["node1"]["clock_offset_error_ms"] == 0.1
    assert hosts["node1"]["java"] == "17.0.17" and hosts["node2"]["java"] is None
    assert hosts["node2"]["clock_offset_ms"] is None and hosts["node2"]["os"] == "Debian 12.11"
    faults = [json.loads(line) for line in (run_dir / "faults.jsonl").read_text().splitlines()]
    assert faults == facts()["faults"]
    first = json.loads((run_dir / "first-summary.json").read_text())
    assert first["latency_ms"]["p99"] == 90 and first["overload"]["overloaded"] is False
    assert lines[0].startswith("run r1 (flink, fault=none): complete")
    assert "p50=40 p99=90 max=95 ms" in lines[2] and "not overloaded" in lines[4]


def test_a_failed_step_a_drain_timeout_and_a_dead_producer_are_each_a_reason(run_dir):
    (run_dir / "produced.jsonl").rename(run_dir / "produced.jsonl.part")
    summary = json.loads((run_dir / "received.summary.json").read_text())
    summary |= {
        "stop_reason": "drain_timeout",
        "incomplete_reason": "3 acknowledged ids never arrived",
    }
    (run_dir / "received.summary.json").write_text(json.dumps(summary))
    lines = write(run_dir, facts(failures=["stopping the job failed (x): abc"]))
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "incomplete"
    assert record["incomplete_reasons"] == [
        "stopping the job failed (x): abc",
        "the producer did not finish (only produced.jsonl.part)",
        "the collector stopped with drain_timeout: 3 acknowledged ids never arrived",
    ]
    assert lines[0].startswith("run r1 (flink, fault=none): incomplete")
    assert json.loads((run_dir / "first-summary.json").read_text())["status"] == "incomplete"


def test_a_run_with_no_collector_summary_is_incomplete_and_still_written(run_dir):
    (run_dir / "received.summary.json").unlink()
    write(run_dir, facts(settings_file=None, readback={}))
    record = json.loads((run_dir / "run.json").read_text())
    assert record["incomplete_reasons"] == ["the collector left no summary"]
    assert record["settings"] == {} and record["drain"]["stop_reason"] is None
    assert not list(run_dir.glob("*.part"))


def test_main_reads_the_facts_from_standard_input(run_dir, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(facts())))
    assert run_record.main(["--result-dir", str(run_dir)]) == 0
    assert "complete" in capsys.readouterr().out


def test_main_refuses_input_that_is_not_json(run_dir, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("{not json"))
    with pytest.raises(SystemExit):
        run_record.main(["--result-dir", str(run_dir)])
    assert "standard input is not one JSON object" in capsys.readouterr().err
    assert not (run_dir / "run.json").exists()


def test_each_engine_hosts_log_tail_is_kept_and_an_unreached_host_says_so(run_dir):
    write(run_dir, facts(log_tails={"node1": "line 1\nline 2", "node2": None}))
    logs = run_dir / "engine" / "logs"
    assert (logs / "node1.log").read_text() == "line 1\nline 2\n"
    assert (logs / "node2.log").read_text() == "(host unreachable when the run was recorded)\n"
    assert sorted(p.name for p in logs.iterdir()) == ["node1.log", "node2.log"]


def test_a_complete_run_that_lost_acknowledged_messages_is_complete_with_a_failed_verdict(
    run_dir,
):
    summary = json.loads((run_dir / "received.summary.json").read_text())
    summary |= {"acked": 10, "unique": 7, "missing": 3, "duplicates": 1}
    (run_dir / "received.summary.json").write_text(json.dumps(summary))
    lines = write(run_dir, facts())
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "complete" and record["incomplete_reasons"] == []
    assert record["verdict"] == {
        "guarantee": "at_least_once",
        "holds": False,
        "lost": 3,
        "duplicate_records": 1,
        "reason": "at-least-once violated: 3 of 10 acknowledged messages lost",
    }
    first = json.loads((run_dir / "first-summary.json").read_text())
    assert first["verdict"] == record["verdict"]
    assert lines[0].startswith(
        "run r1 (flink, fault=none): complete, AT-LEAST-ONCE VIOLATED: 3 OF 10 ACKNOWLEDGED"
    )


def test_a_complete_run_without_loss_holds_at_least_once_whatever_its_duplicates(run_dir):
    summary = json.loads((run_dir / "received.summary.json").read_text())
    (run_dir / "received.summary.json").write_text(json.dumps(summary | {"acked": 10}))
    lines = write(run_dir, facts())
    record = json.loads((run_dir / "run.json").read_text())
    assert record["verdict"]["holds"] is True
    assert record["verdict"]["reason"] == "at-least-once held: 0 of 10 acknowledged messages lost"
    assert "at-least-once held" in lines[0]


@pytest.mark.parametrize(
    "guarantee,lost,duplicates,holds",
    [
        ("at_least_once", 0, 5, True),
        ("at_least_once", 1, 0, False),
        ("at_most_once", 4, 0, True),
        ("at_most_once", 0, 1, False),
        ("exactly_once", 0, 0, True),
        ("exactly_once", 0, 1, False),
        ("exactly_once", 1, 0, False),
    ],
)
def test_each_guarantee_forbids_what_it_promises_never_happens(guarantee, lost, duplicates, holds):
    received = {"acked": 10, "missing": lost, "duplicates": duplicates}
    judged = run_record.verdict(guarantee, "complete", received)
    assert judged["holds"] is holds
    assert (judged["lost"], judged["duplicate_records"]) == (lost, duplicates)


def test_an_incomplete_run_is_not_judged(run_dir):
    judged = run_record.verdict("at_least_once", "incomplete", {"missing": 3, "duplicates": 0})
    assert judged["holds"] is None
    assert judged["reason"] == "at-least-once not judged: the run is incomplete"


@pytest.mark.parametrize("guarantee", ["at_most_once", "at_least_once", "exactly_once", "none"])
@pytest.mark.parametrize(("lost", "duplicates"), [(0, 0), (3, 0), (0, 4), (2, 5)])
def test_run_json_and_the_analysis_judge_a_run_alike(guarantee, lost, duplicates):
    # run_record.py runs without the kit's packages, so it keeps its own copy of the rules.
    from analysis.verdict import verdict as analysed

    recorded = run_record.verdict(
        guarantee, "complete", {"acked": 10, "missing": lost, "duplicates": duplicates}
    )
    assert recorded == analysed(guarantee, 10, lost, duplicates)


def test_each_phase_ends_where_the_next_starts_and_the_last_when_the_record_is_written(run_dir):
    marks = [{"name": "facts", "ms": 1_000}, {"name": "producing", "ms": 4_000}]
    marks.append({"name": "drain", "ms": 3_500})  # the clock stepped back: no overlap
    record = run_record.build_record(run_dir, facts(phase_marks=marks), now_ms=9_000)
    assert record["phases"] == [
        {"name": "facts", "start_ms": 1_000, "end_ms": 4_000},
        {"name": "producing", "start_ms": 4_000, "end_ms": 4_000},
        {"name": "drain", "start_ms": 4_000, "end_ms": 9_000},
    ]
    assert run_record.build_record(run_dir, facts())["phases"] == []


def test_the_summary_says_how_long_the_run_took_around_its_producing(run_dir):
    produced = json.loads((run_dir / "produced.summary.json").read_text())
    produced |= {"start_ms": 20_000, "end_ms": 45_000}
    (run_dir / "produced.summary.json").write_text(json.dumps(produced))
    marks = [
        {"name": "checks", "ms": 0},
        {"name": "submit", "ms": 5_000},
        {"name": "producing", "ms": 19_000},
        {"name": "drain", "ms": 46_000},
        {"name": "record", "ms": 58_000},
    ]
    record = run_record.build_record(run_dir, facts(phase_marks=marks), now_ms=60_000)
    first = run_record.first_summary(record, produced, None)
    assert first["time"] == {
        "total_s": 60.0,
        "producing_s": 25.0,
        "around_producing_s": 35.0,
        "longest": [
            {"name": "producing", "s": 27.0},
            {"name": "submit", "s": 14.0},
            {"name": "drain", "s": 12.0},
        ],
    }
    assert (
        "time: 60.0 s from the playbook's start, producing 25.0 s, around it 35.0 s (longest "
        "phases: producing 27.0 s, submit 14.0 s, drain 12.0 s)"
    ) in run_record.summary_lines(first, run_dir)


@pytest.mark.parametrize(
    ("producer_ms", "collector_ms", "moved"),
    [(0.0, 0.3, False), (-0.2, 6512.3, True), (-80.0, 1.0, True), (None, 0.0, None)],
)
def test_a_wall_clock_that_moved_against_the_runs_clocks_is_recorded_and_shouted(
    run_dir, producer_ms, collector_ms, moved
):
    for name, value in (("produced", producer_ms), ("received", collector_ms)):
        path = run_dir / f"{name}.summary.json"
        summary = json.loads(path.read_text())
        if value is not None:
            summary["wall_clock_moved_ms"] = value
        path.write_text(json.dumps(summary))
    lines = write(run_dir, facts())
    record = json.loads((run_dir / "run.json").read_text())
    assert record["wall_clock"]["moved"] is moved
    assert record["wall_clock"]["producer_ms"] == producer_ms
    assert record["wall_clock"]["collector_ms"] == collector_ms
    if moved is not None:
        assert record["wall_clock"]["largest_ms"] == max(abs(producer_ms), abs(collector_ms))
    first = json.loads((run_dir / "first-summary.json").read_text())
    assert first["wall_clock"] == record["wall_clock"]
    shouted = [line for line in lines if line.startswith("WALL CLOCK MOVED")]
    assert bool(shouted) is bool(moved), lines
    if moved:
        assert f"{max(abs(producer_ms), abs(collector_ms)):,.1f} ms" in shouted[0]
    # A moved clock flags the run; it is still complete and judged.
    assert record["status"] == "complete" and record["verdict"]["holds"] is True


def test_setting_roles_name_the_settings_the_manifest_marks():
    """run.json setting_roles: which engine setting bounds replay and which paces the offset
    commits, from the engine's declared settings (engine.yml), so the analysis needs no checkout."""
    spec = {
        "checkpoint_interval_s": {"replay_bound": True, "commits_offsets": True},
        "timeout_s": {"replay_bound": False},
        "odd": 5,
    }
    assert run_record.setting_roles(spec) == {
        "replay_bound": "checkpoint_interval_s",
        "commits_offsets": "checkpoint_interval_s",
    }
    assert run_record.setting_roles({}) == {}
