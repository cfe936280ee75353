"""experiment.yml on the test hosts: short real runs on both engines; bad inputs refused early."""

from __future__ import annotations

import base64
import itertools
import json
import os
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from conftest import (
    LAB_EXPERIMENT_RATE,
    LAB_INVENTORY,
    LAB_KAFKA_CLIENT_CONFIG,
    BackgroundPlaybook,
    control_node_reaches_only_ssh,
    flink_rest,
    lab_group_vars,
    lab_hosts_state,
    lab_kafka_settings,
    lab_pki,
    on_lab_host,
    role_default,
    run_playbook,
    set_daemon,
    start_playbook,
    storm_probe,
    wait_until,
)

pytestmark = pytest.mark.lab

RATE = LAB_EXPERIMENT_RATE
COUNT = 10 * RATE  # 10 s of messages
UNSTOPPABLE_COUNT = 5 * RATE  # 5 s of messages


def topics(lab: dict[str, str]) -> set[str]:
    admin = KafkaAdminClient(bootstrap_servers=f"{lab['node1']}:9092", **lab_kafka_settings())
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def flink_overview(lab: dict[str, str]) -> dict:
    return flink_rest(lab, "/overview", timeout_s=10)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# The same names, with the same values, in both engines' run.json `settings`, as each engine
# reported them (Flink's REST job configuration, Storm's topology configuration from Nimbus).
LAB_SECRETS = lab_group_vars()
EQUAL_FOOTING = {
    "source_tasks": 4,
    "sink.acks": "all",
    "sink.linger_ms": 5,
    "sink.batch_size": 65536,
    "sink.compression": "none",
    "sink.idempotence": True,
    "sink.max_in_flight": 5,
}
WARMUP_S = 4
# Where the driver host (node1) keeps each run's files while it runs (driver_runs_dir).
DRIVER_RUNS = "/var/lib/streamlab/runs"


def producer_started(lab: dict[str, str], run_id: str, running: Callable[[], bool]) -> str:
    """Wait until the run's producer has its start instant on the driver host (node1): it opens
    produced.jsonl.part then, once it and the collector are connected. The run's name on the
    cluster (its run id and when it started: its topics, job and files there).

    running() says whether the playbook still runs: one that ended first fails the wait at once,
    so the timeout can allow for a loaded machine without a failed run costing all of it."""
    started = wait_until(
        # one argument: the test host's shell expands the pattern
        lambda: on_lab_host(
            lab["node1"], f"ls {DRIVER_RUNS}/{run_id}-*/client/produced.jsonl.part"
        ),
        lambda done: done.returncode == 0 or not running(),
        f"the producer of {run_id} started",
        timeout_s=600,
    )
    assert started.returncode == 0, f"the playbook of {run_id} ended before its producer started"
    return started.stdout.strip().split("/")[-3]


def run_program_users(address: str, instance: str) -> dict[str, set[str]]:
    """The users the run's Python programs (producer, collector, Flink's timeline sampler) run
    as on a test host, by module or script; root only starts them (runuser's own process and the
    shells are not counted)."""
    done = on_lab_host(address, "ps", "-eww", "-o", "user:32=,args=")
    assert done.returncode == 0, done.stderr
    users: dict[str, set[str]] = {}
    for line in done.stdout.splitlines():
        user, _, args = line.strip().partition(" ")
        words = args.split()
        if f"/{instance}/" not in args or not words[0].endswith("/venv/bin/python"):
            continue
        if "-m" in words:
            users.setdefault(words[words.index("-m") + 1], set()).add(user)
        elif words[1].endswith(".py"):
            users.setdefault(Path(words[1]).name, set()).add(user)
    return users


def run_processes(address: str, instance: str) -> list[str]:
    """Command lines on a test host that work in the run's directories (as `ps` lists them)."""
    done = on_lab_host(address, "ps", "-eww", "-o", "args=")
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if f"/{instance}/" in line]


@dataclass(frozen=True)
class InterruptedRun:
    results: Path
    run_id: str
    instance: str  # the run's name on the cluster and on the hosts
    job_id: str


@pytest.fixture
def interrupted_run(converged, tmp_path) -> InterruptedRun:
    """A Flink experiment stopped with Ctrl-C (SIGINT to ansible-playbook's process group, as a
    terminal sends it) while its producer runs: its job, producer, collector and timeline go on."""
    results = tmp_path / "results"
    run_id = f"test-interrupted-{uuid.uuid4().hex[:8]}"
    # Its producer must still run when the next experiment looks for leftovers: 500 s of
    # messages. On a loaded machine that look can come minutes after the interrupted run
    # started, and 100 s of messages were over by then.
    playbook = start_playbook(
        "experiment.yml",
        *("-e", "engine=flink", "-e", f"count={500 * RATE}", "-e", f"rate={RATE}"),
        *("-e", f"run_id={run_id}", "-e", f"experiment_results_dir={results}"),
        *("-e", "analyze_on=none"),
    )
    try:
        instance = producer_started(converged, run_id, lambda: playbook.poll() is None)
        os.killpg(playbook.pid, signal.SIGINT)
        assert playbook.wait(timeout=60) != 0
    finally:
        if playbook.poll() is None:
            os.killpg(playbook.pid, signal.SIGKILL)
    # What Ctrl-C left: the job still runs, and so do the producer and the collector.
    (job,) = [
        j for j in flink_jobs(converged) if j["name"] == f"streamlab-flink-streamlab-{instance}-in"
    ]
    assert job["state"] == "RUNNING", job
    left = " ".join(run_processes(converged["node1"], instance))
    assert "producer.produce" in left and "producer.collect" in left, left
    # They and the timeline's sampler run as the service account, not root.
    users = run_program_users(converged["node1"], instance)
    assert users == {
        "producer.produce": {"streamlab"},
        "producer.collect": {"streamlab"},
        "flink_timeline.py": {"streamlab"},
    }, users
    run_dir = results / run_id
    assert (run_dir / "run.started.json").exists() and not (run_dir / "run.json").exists()
    return InterruptedRun(results, run_id, instance, job["jid"])


LOSSY_COUNT = 5 * RATE
DROP_EVERY = 100  # the job drops ids 100, 200, ...: exactly LOSSY_COUNT // DROP_EVERY of them
# Shorter than the default, longer than quiet_s (10 s), which a drain waits out too: the run's
# last records come within a second of its last message.
LOSSY_LOST_WAIT_S = 12


def test_a_run_that_loses_acknowledged_messages_ends_complete_with_a_failed_verdict(
    converged, tmp_path
):
    """The loss verdict can fail: a Flink job switched to drop every 100th id (test_drop_every,
    a switch only this test uses) commits its input and never writes those records. The run
    ends complete in normal time (not at drain_timeout_s), counted lost to the message. The
    analysis judges such a run alike on synthetic runs (tests/test_analysis_recovery.py), so this
    one is not summarised: a Spark application costs minutes on the loaded test hosts."""
    results = tmp_path / "results"
    run_id = f"test-lossy-{uuid.uuid4().hex[:8]}"
    run = run_playbook(
        "experiment.yml",
        LAB_INVENTORY,
        extravars={
            "engine": "flink",
            "count": LOSSY_COUNT,
            "rate": RATE,
            "warmup_s": WARMUP_S,
            "test_drop_every": DROP_EVERY,
            "lost_wait_s": LOSSY_LOST_WAIT_S,
            "run_id": run_id,
            "experiment_results_dir": str(results),
            "analyze_on": "none",
        },
        tmp_path=tmp_path,
    )
    assert run.rc == 0, run.output[-6000:]
    out = results / run_id
    dropped = set(range(DROP_EVERY, LOSSY_COUNT + 1, DROP_EVERY))
    assert f"run {run_id} (flink, fault=none): complete, AT-LEAST-ONCE VIOLATED" in run.output
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "complete", record["incomplete_reasons"]
    assert record["settings"]["test_drop_every"] == DROP_EVERY
    assert record["verdict"] == {
        "guarantee": "at_least_once",
        "holds": False,
        "lost": len(dropped),
        "duplicate_records": record["verdict"]["duplicate_records"],
        "reason": f"at-least-once violated: {len(dropped)} of {LOSSY_COUNT:,} acknowledged "
        "messages lost",
    }
    received = {r["msg_id"] for r in read_jsonl(out / "received.jsonl")}
    assert set(range(1, LOSSY_COUNT + 1)) - received == dropped
    collected = json.loads((out / "received.summary.json").read_text())
    assert collected["stop_reason"] == "complete" and collected["missing"] == len(dropped)
    # Ended lost_wait_s after the last record, far from the 300 s drain timeout.
    lost_wait_ms = LOSSY_LOST_WAIT_S * 1000
    assert lost_wait_ms <= collected["end_ms"] - collected["last_recv_ms"] < lost_wait_ms + 2000
    assert collected["end_ms"] - collected["producer_done_ms"] < lost_wait_ms + 60_000
    assert record["parameters"]["lost_wait_s"] == LOSSY_LOST_WAIT_S
    first = json.loads((out / "first-summary.json").read_text())
    assert (first["verdict"]["holds"], first["missing"]) == (False, len(dropped))


def flink_jobs(lab: dict[str, str]) -> list[dict]:
    return flink_rest(lab, "/jobs/overview", timeout_s=10)["jobs"]


# run.json `phases` of a run without a fault, in the order the playbook reaches them.
PHASES = [
    *("facts", "checks", "install", "cluster", "build", "clients", "topics", "clocks", "submit"),
    *("timeline", "ready", "start", "producing", "drain", "evidence", "record", "stop"),
    *("recover", "record_again"),
]


def check_phases(record: dict, produced: dict) -> None:
    """Every phase, in order, each ending where the next starts; the producer's own sending
    (driver clock: the test hosts share the control node's) begins in the lead, after the
    clients started, and ends within `producing`, which the playbook saw end soon after."""
    phases = record["phases"]
    assert [p["name"] for p in phases] == PHASES, phases
    assert all(p["start_ms"] <= p["end_ms"] for p in phases), phases
    assert all(a["end_ms"] == b["start_ms"] for a, b in itertools.pairwise(phases)), phases
    assert phases[0]["start_ms"] < record["start_ms"] < record["end_ms"] <= phases[-1]["end_ms"]
    start, producing = (next(p for p in phases if p["name"] == n) for n in ("start", "producing"))
    assert start["start_ms"] < produced["start_ms"] < produced["end_ms"], (start, produced)
    # The mark follows the start instant by a task or two, well within the lead.
    assert producing["start_ms"] <= produced["start_ms"] + 1000, (producing, produced)
    assert produced["end_ms"] <= producing["end_ms"] <= produced["end_ms"] + 10_000, producing


@pytest.mark.parametrize("engine", ["flink", "storm"])
def test_a_run_without_faults_delivers_every_acknowledged_message(
    converged, tmp_path, engine, request
):
    """Storm's run starts on a clean lab; Flink's starts after an experiment was interrupted
    mid-run (in the same results directory), and must first stop what that one left."""
    interrupted = request.getfixturevalue("interrupted_run") if engine == "flink" else None
    results = tmp_path / "results"
    run_id = f"test-{engine}-{uuid.uuid4().hex[:8]}"  # topics are named after the run
    started_s = time.time()  # the test hosts share this machine's clock
    # One engine's run is enough to check the experiment's own analysis here; Storm's run with a
    # fault is summarised in test_lab_study.py.
    analyze_on = "local" if engine == "flink" else "none"
    # The control node reaches the hosts over SSH only: the run's REST calls and Kafka
    # questions go through hosts of the cluster.
    with control_node_reaches_only_ssh(converged):
        run = run_playbook(
            "experiment.yml",
            LAB_INVENTORY,
            extravars={
                "engine": engine,
                "count": COUNT,
                "rate": RATE,
                "warmup_s": WARMUP_S,
                "run_id": run_id,
                "experiment_results_dir": str(results),
                "analyze_on": analyze_on,
            },
            tmp_path=tmp_path,
        )
    assert run.rc == 0, run.output[-6000:]
    out = results / run_id
    assert f"run {run_id} ({engine}, fault=none): complete" in run.output

    produced = read_jsonl(out / "produced.jsonl")
    assert sorted(p["msg_id"] for p in produced) == list(range(1, COUNT + 1))
    assert all(p["acked"] for p in produced)
    assert all(p["sent_ms"] >= p["intended_ms"] for p in produced)
    received = read_jsonl(out / "received.jsonl")
    assert {r["msg_id"] for r in received} == set(range(1, COUNT + 1))
    assert all(isinstance(r["processed_ms"], int) and r["offset"] >= 0 for r in received)
    # The result topic keeps the brokers' append time: engine latency and collector lag apart.
    # recv_ms is on the collector's clock, broker_ms on the wall clock: they part by as much as
    # the wall clock moved against the collector's clock, which run.json must say.
    moved = json.loads((out / "run.json").read_text())["wall_clock"]["collector_ms"]
    assert isinstance(moved, float), moved
    slack = 1000 + abs(moved)
    assert all(r["processed_ms"] - 1000 <= r["broker_ms"] <= r["recv_ms"] + slack for r in received)
    assert (out / "faults.jsonl").read_text() == ""

    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "complete", record["incomplete_reasons"]
    assert record["engine"] == engine and record["fault"] == "none"
    check_phases(record, json.loads((out / "produced.summary.json").read_text()))
    parameters = record["parameters"]
    assert (parameters["count"], parameters["rate"], parameters["warmup_s"]) == (
        COUNT,
        RATE,
        WARMUP_S,
    )
    assert parameters["partitions"] == 4
    # The probe crossed every partition before the producer started, with ids that are no message.
    assert record["probe"]["ready"] and len(record["probe"]["per_partition"]) == 4
    assert all(msg_id < 0 for msg_id in record["probe"]["probe_ids"])
    settings = record["settings"]
    assert {name: settings.get(name) for name in EQUAL_FOOTING} == EQUAL_FOOTING
    # The job's Kafka clients connected as the lab's Kafka asks (the sink the job really built).
    sasl = bool(lab_kafka_settings())
    assert settings["kafka.security_protocol"] == ("SASL_SSL" if sasl else "PLAINTEXT")
    assert settings["kafka.sasl_mechanism"] == ("SCRAM-SHA-512" if sasl else "(none)")
    # The client configuration the run's clients read may hold the password: root and the
    # service account read it, no one else.
    done = on_lab_host(converged["node1"], f"stat -c '%U:%G %a' {LAB_KAFKA_CLIENT_CONFIG}")
    assert done.stdout.split() == ["root:streamlab", "640"], done.stdout
    assert settings["kafka_clients_version"] == record["versions"][f"{engine}_kafka_clients"]
    if engine == "flink":
        # The CLI submitted the job as the service account during this run: Flink names its log
        # flink-<user>-client-<host>.log, and the service account owns it.
        client_log = on_lab_host(
            converged["node1"],
            "stat -c '%U %Y' /var/log/streamlab/flink/flink-streamlab-client-node1.log",
        )
        owner, modified_s = client_log.stdout.split()
        assert owner == "streamlab" and int(modified_s) >= int(started_s), client_log.stdout
        assert record["settings_read_from"]["checkpoint_interval_ms"].startswith("flink-checkpoint")
        # The manifest's marks, recorded for an analysis that has no checkout at hand.
        assert record["setting_roles"] == {
            "replay_bound": "checkpoint_interval_s",
            "commits_offsets": "checkpoint_interval_s",
        }
        assert settings["checkpoint_interval_ms"] == 5000
        assert settings["tolerable_failed_checkpoints"] == 3
        assert settings["checkpointing_mode"] == "at_least_once"
        # TLS as the JobManager reports its configuration; the stores' passwords are not kept.
        tls = bool(LAB_SECRETS.get("flink_tls_internal")), bool(LAB_SECRETS.get("flink_tls_rest"))
        assert (settings["tls_internal"], settings["tls_rest"]) == tls
        assert settings["registration_error_delay"] == "1000 ms"  # the role's default
        pki = lab_pki("flink")
        if any(tls):
            secrets = [path.read_text() for path in pki.glob("*.password")]
            assert len(secrets) == 4, secrets  # 3 hosts' key stores and the trust store
            files = [path for path in out.rglob("*") if path.is_file()]
            holding = [f for f in files if any(s in f.read_text("latin-1") for s in secrets)]
            assert not holding, holding
    else:
        assert record["settings_read_from"]["message_timeout_s"].startswith("storm-topology-conf")
        assert record["setting_roles"] == {
            "replay_bound": "storm_message_timeout_s",
            "commits_offsets": "storm_offset_commit_period_s",
        }
        assert (settings["workers"], settings["message_timeout_s"]) == (2, 30)
        assert settings["offset_commit_period_ms"] == 5000
        assert settings["spout_wait_strategy"] == "org.apache.storm.policy.WaitStrategyPark"
        assert settings["grouping"] == "localOrShuffle"
    assert record["drain"]["stop_reason"] == "complete"
    assert len(record["kit_commit"]) == 40
    assert record["versions"]["kafka"] == role_default("kafka", "kafka_version")
    assert record["versions"][engine] == role_default(engine, f"{engine}_version")
    assert record["versions"]["engine"] == record["versions"][engine]
    assert sorted(h["name"] for h in record["hosts"]) == ["node1", "node2", "node3"]
    for host in record["hosts"]:
        assert abs(host["clock_offset_ms"]) < 50 and abs(host["clock_offset_end_ms"]) < 50
    assert {h["os"].split()[0] for h in record["hosts"]} == {"Debian"}
    # node3 is the Debian 13 host booted with systemd (OpenJDK 21), the others Debian 12 (17).
    releases = {
        h["name"]: (h["os"].split()[1].split(".")[0], str(h["java"]).split(".")[0])
        for h in record["hosts"]
    }
    assert releases == {"node1": ("12", "17"), "node2": ("12", "17"), "node3": ("13", "21")}
    assert record["start_ms"] < record["end_ms"]
    summary = json.loads((out / "received.summary.json").read_text())
    assert (summary["missing"], summary["acked"]) == (0, COUNT)
    # The producer ran with kafka-python's checksums in C: the pinned crc32c wheel fits the host.
    client = json.loads((out / "produced.summary.json").read_text())["client"]
    assert client["crc32c"] == "C extension" and record["versions"]["crc32c"] == "2.9.post0"
    # The producer and the collector connected as the jobs did.
    collector = summary["client"]
    assert (
        client["security_protocol"]
        == collector["security_protocol"]
        == settings["kafka.security_protocol"]
    )
    # No secret of the lab is in the result directory or the playbook's output.
    secrets = [LAB_SECRETS[name] for name in ("kafka_sasl_password", "spark_authenticate_secret")]
    kept = [path for path in out.rglob("*") if path.is_file()]
    assert kept and not [
        path for path in kept if any(s.encode() in path.read_bytes() for s in secrets)
    ]
    assert not any(secret in run.output for secret in secrets)

    # The first summary: steady-state latency over the messages after the warm-up, the overload
    # flag from the lag sampled every second.
    first = json.loads((out / "first-summary.json").read_text())
    latency = first["latency_ms"]
    assert latency["warmup_s"] == WARMUP_S
    assert 0 < latency["messages"] < COUNT
    assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    # Enough samples for a verdict, which follows the slope's 95 % interval: above the threshold
    # is overloaded, at or below it is not, straddling it is undecided (None).
    overload = first["overload"]
    if overload["samples"] < 5:
        # A loaded machine's sampler missed seconds of the short window: too few to decide, and
        # the flag says so rather than guess.
        assert overload["overloaded"] is None, overload
        assert overload["backlog_slope_ci95_per_s"] is None, overload
    else:
        low, high = overload["backlog_slope_ci95_per_s"]
        assert f"(95 % interval {low:.1f} to {high:.1f})" in overload["reason"]
        threshold = overload["threshold_per_s"]
        assert overload["overloaded"] is (
            True if low > threshold else False if high <= threshold else None
        )
    assert first["send_lag_ms"]["p99"] >= 0
    # The instant was fixed (the lead ahead) only once the producer and the collector were ready.
    produced_summary = json.loads((out / "produced.summary.json").read_text())
    lead_ms = record["parameters"]["start_lead_ms"]
    assert lead_ms == 1000, lead_ms  # no fault to start before the first message
    for ready in ("producer.ready", "collector.ready"):
        assert int((out / ready).read_text()) <= produced_summary["start_ms"] - lead_ms, ready
    # The clients' files came as one archive of files only: the result directory kept its mode.
    assert oct(out.stat().st_mode & 0o777) == "0o755"
    assert not (out / "client-files.tar").exists()
    lag = read_jsonl(out / "engine" / "lag.jsonl")
    assert len(lag) >= 10 and all(
        len(line["input_end"]) == 4 for line in lag if "error" not in line
    )

    # No duplicate: one received line per message.
    assert len(received) == COUNT
    if analyze_on == "local":
        # The run ends with its PySpark summary: report and plots written, headline numbers.
        analysed = json.loads((out / "summary.json").read_text())
        assert (analysed["produced"], analysed["lost"], analysed["duplicate_records"]) == (
            COUNT,
            0,
            0,
        )
        assert analysed["latency_ms"]["count"] == latency["messages"]
        assert analysed["latency_ms"]["p50"] == latency["p50"]
        assert (out / "report.md").exists() and (out / "report.html").exists()
        assert {p.name for p in (out / "plots").iterdir()} >= {"latency_cdf.png", "throughput.png"}
        assert "Summarise the run (summary.json" in run.output
    else:
        assert not (out / "summary.json").exists()

    if interrupted:
        assert "An interrupted experiment had left 1 job(s)" in " ".join(run.output.split())
        # Nothing of the interrupted run is left: its job ended, its processes are gone ...
        (job,) = [j for j in flink_jobs(converged) if j["jid"] == interrupted.job_id]
        assert job["state"] == "CANCELED", job
        for host in ("node1", "node2", "node3"):
            assert run_processes(converged[host], interrupted.instance) == [], host
        # ... and its result directory is kept, marked incomplete, with what was stopped.
        marked = json.loads((results / interrupted.run_id / "run.json").read_text())
        assert marked["status"] == "incomplete" and marked["engine"] == "flink"
        assert marked["incomplete_reasons"][0].startswith("interrupted: "), marked
        assert f"the experiment {run_id}" in marked["incomplete_reasons"][0]
        stopped = " ".join(marked["interrupted"]["stopped"])
        assert f"job streamlab-flink-streamlab-{interrupted.instance}-in cancelled" in stopped
        assert "producer.produce" in stopped and "producer.collect" in stopped, stopped

    logs = {p.name for p in (out / "engine" / "logs").iterdir()}
    assert logs == {"node1.log", "node2.log", "node3.log"}
    if engine == "flink":
        checkpoints = json.loads((out / "engine" / "flink-checkpoints.json").read_text())
        assert checkpoints["counts"]["completed"] > 0
        assert flink_overview(converged)["jobs-running"] == 0
    else:
        topology = json.loads((out / "engine" / "storm-topology.json").read_text())
        # Executors ran on both supervisors, and the topology was killed afterwards.
        hosts = {e["host"] for e in topology["executors"]}
        assert hosts == {converged["node2"], converged["node3"]}
        assert topology["spout_acked"] > 0
        assert storm_probe(converged, "cluster")["topologies"] == []
        # What Nimbus hands anyone who asks for the topology: its spouts and bolts carry no secret
        # of the Kafka client configuration, only where the workers read it.
        code = json.loads((out / "engine" / "storm-topology-code.json").read_text())["components"]
        serialized = {name: base64.b64decode(text) for name, text in code.items()}
        assert len(serialized) >= 3 and all(serialized.values()), sorted(code)
        assert not [n for n, data in serialized.items() if any(s.encode() in data for s in secrets)]
        if sasl:
            reference = f"${{streamlabfile:{LAB_KAFKA_CLIENT_CONFIG}:sasl.jaas.config}}".encode()
            assert any(reference in data for data in serialized.values()), sorted(code)


def test_a_job_that_cannot_be_stopped_still_leaves_a_complete_result_directory(converged, tmp_path):
    """Nimbus dies while the topology runs: the run is recorded, marked incomplete, and says why."""
    results = tmp_path / "results"
    run_id = f"test-unstoppable-{uuid.uuid4().hex[:8]}"
    playbook = BackgroundPlaybook(
        "experiment.yml",
        LAB_INVENTORY,
        extravars={
            "engine": "storm",
            "count": UNSTOPPABLE_COUNT,
            "rate": RATE,
            "warmup_s": 1,
            "run_id": run_id,
            "experiment_results_dir": str(results),
        },
        tmp_path=tmp_path,
    )
    topology = ""
    try:
        # Once the producer runs (the probe has crossed the topology), Nimbus goes.
        topology = "streamlab-" + producer_started(converged, run_id, playbook.is_alive)
        set_daemon("storm-nimbus", "killed", "node1", tmp_path)
        run = playbook.join(timeout_s=600)
    finally:
        set_daemon("storm-nimbus", "started", "node1", tmp_path)
        wait_until(
            lambda: storm_probe(converged, "cluster"),
            lambda seen: len(seen["supervisors"]) == 2,
            "Nimbus back",
            retry_on=(OSError, ValueError),
        )
        if topology:
            on_lab_host(converged["node1"], "/opt/streamlab/bin/storm-probe", "kill", topology, "0")
    assert run.rc != 0
    out = results / run_id
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "incomplete"
    reasons = " ".join(record["incomplete_reasons"])
    assert "stopping the job failed" in reasons and topology in reasons, reasons
    # Everything the run produced was fetched before the stop was tried.
    produced = read_jsonl(out / "produced.jsonl")
    assert len(produced) == UNSTOPPABLE_COUNT
    received = {r["msg_id"] for r in read_jsonl(out / "received.jsonl")}
    assert received == set(range(1, UNSTOPPABLE_COUNT + 1))
    assert json.loads((out / "first-summary.json").read_text())["status"] == "incomplete"


@pytest.mark.parametrize(
    "extravars,message",
    [
        # The settings' own checks, on hosts that need no cluster: tests/test_bad_inputs.py.
        (
            # 40 s of messages, the fault over 30 s in: 10 s left, less than recovery_window_s.
            {"engine": "flink", "fault": "kill_taskmanager", "count": 20000, "rate": 500},
            "less than recovery_window_s=120, so the run may not show the recovery. "
            "Raise -e count to at least 75000",
        ),
        ({"engine": "flink", "guarante": "at_least_once"}, "-e guarante=at_least_once"),
    ],
)
def test_bad_input_fails_before_any_topic_or_job(converged, tmp_path, extravars, message):
    before = topics(converged)
    hosts_before = lab_hosts_state(converged)
    results = tmp_path / "results"
    run = run_playbook(
        "experiment.yml",
        LAB_INVENTORY,
        extravars={**extravars, "experiment_results_dir": str(results)},
        tmp_path=tmp_path,
    )
    assert run.rc != 0
    assert message in " ".join(run.output.split()), run.output[-3000:]
    assert topics(converged) == before
    assert not results.exists()
    assert lab_hosts_state(converged) == hosts_before


def test_a_cluster_without_taskmanagers_is_refused_before_any_topic(converged, tmp_path):
    before = topics(converged)
    set_daemon("flink-taskmanager", "stopped", "node2:node3", tmp_path)
    try:
        wait_until(lambda: flink_overview(converged), lambda o: o["taskmanagers"] == 0, "0 TMs")
        run = run_playbook(
            "experiment.yml",
            LAB_INVENTORY,
            extravars={"engine": "flink", "experiment_results_dir": str(tmp_path / "results")},
            tmp_path=tmp_path,
        )
        assert run.rc != 0
        assert "The Flink cluster has no TaskManager" in " ".join(run.output.split())
        assert topics(converged) == before
    finally:
        set_daemon("flink-taskmanager", "started", "node2:node3", tmp_path)
        wait_until(
            lambda: flink_overview(converged),
            lambda o: o["slots-total"] == 4,
            "2 TMs and their slots",
        )
