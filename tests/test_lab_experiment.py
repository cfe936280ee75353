"""experiment.yml on the test hosts: short real runs on both engines; bad inputs refused early."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from conftest import LAB_INVENTORY, run_playbook, set_daemon, storm_probe, wait_until

pytestmark = pytest.mark.lab

COUNT = 20_000
RATE = 2_000


def topics(lab: dict[str, str]) -> set[str]:
    admin = KafkaAdminClient(bootstrap_servers=f"{lab['node1']}:9092")
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def flink_overview(lab: dict[str, str]) -> dict:
    with urllib.request.urlopen(f"http://{lab['node1']}:8081/overview", timeout=10) as response:
        return json.load(response)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("engine", ["flink", "storm"])
def test_a_run_without_faults_delivers_every_acknowledged_message(converged, tmp_path, engine):
    results = tmp_path / "results"
    run_id = f"test-{engine}-{uuid.uuid4().hex[:8]}"  # topics are named after the run
    run = run_playbook(
        "experiment.yml",
        LAB_INVENTORY,
        extravars={
            "engine": engine,
            "count": COUNT,
            "rate": RATE,
            "run_id": run_id,
            "experiment_results_dir": str(results),
        },
        tmp_path=tmp_path,
    )
    assert run.rc == 0, run.output[-6000:]
    out = results / run_id

    produced = read_jsonl(out / "produced.jsonl")
    assert [p["msg_id"] for p in produced] == list(range(1, COUNT + 1))
    assert all(p["acked"] for p in produced)
    assert all(p["sent_ms"] >= p["intended_ms"] for p in produced)
    received = read_jsonl(out / "received.jsonl")
    assert {r["msg_id"] for r in received} == set(range(1, COUNT + 1))
    assert all(isinstance(r["processed_ms"], int) and r["offset"] >= 0 for r in received)
    assert (out / "faults.jsonl").read_text() == ""

    record = json.loads((out / "run.json").read_text())
    assert record["engine"] == engine and record["fault"] == "none"
    assert record["parameters"]["count"] == COUNT and record["parameters"]["rate"] == RATE
    assert record["parameters"]["partitions"] == 4
    assert len(record["kit_commit"]) == 40
    assert record["versions"]["kafka"] == "4.1.1"
    assert record["versions"][engine] == {"flink": "2.2.1", "storm": "2.8.3"}[engine]
    assert record["versions"]["engine"] == record["versions"][engine]
    assert sorted(h["name"] for h in record["hosts"]) == ["node1", "node2", "node3"]
    assert all(abs(h["clock_offset_ms"]) < 50 for h in record["hosts"])
    assert {h["os"].split()[0] for h in record["hosts"]} == {"Debian"}
    assert record["start_ms"] < record["end_ms"]
    summary = json.loads((out / "received.summary.json").read_text())
    assert (summary["missing"], summary["acked"]) == (0, COUNT)
    # The producer ran with kafka-python's checksums in C: the pinned crc32c wheel fits the host.
    client = json.loads((out / "produced.summary.json").read_text())["client"]
    assert client["crc32c"] == "C extension" and record["versions"]["crc32c"] == "2.9.post0"

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


@pytest.mark.parametrize(
    "extravars,message",
    [
        ({"engine": "spark"}, "engine=spark is not an engine the kit runs experiments on"),
        ({"engine": "flink", "rate": 0}, "rate=0 must be a number of messages per second above 0"),
        ({"engine": "storm", "count": -5}, "count=-5 must be a whole number of at least 1"),
        ({"engine": "flink", "fault": "meteor"}, "fault=meteor is not a known fault schedule"),
    ],
)
def test_bad_input_fails_before_any_topic_or_job(converged, tmp_path, extravars, message):
    before = topics(converged)
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
        wait_until(lambda: flink_overview(converged), lambda o: o["taskmanagers"] == 2, "2 TMs")
