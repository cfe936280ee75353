"""Spark as the experiment's engine on the test hosts (docs/engines.md, docs/extending.md): a
run whose executor is killed mid-run, after an interrupted Spark run that it must stop first."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
import uuid

import pytest

from conftest import (
    LAB_EXPERIMENT_RATE,
    LAB_INVENTORY,
    control_node_reaches_only_ssh,
    lab_group_vars,
    lab_kafka_settings,
    run_playbook,
    start_playbook,
    wait_until,
)

pytestmark = pytest.mark.lab

RATE = LAB_EXPERIMENT_RATE
COUNT = 40 * RATE  # 40 s of messages
FAULT_AT_S = 12
SECRETS = [
    str(value) for key, value in lab_group_vars().items() if "secret" in key or "password" in key
]


def spark_apps(lab: dict[str, str]) -> list[dict]:
    """The applications the Spark master on node1 runs (its web UI's /json/)."""
    with urllib.request.urlopen(f"http://{lab['node1']}:8080/json/", timeout=10) as answer:
        return json.load(answer)["activeapps"]


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_an_executor_killed_mid_run_loses_nothing_after_an_interrupted_run_was_stopped(
    converged, tmp_path
):
    lab = converged
    results = tmp_path / "results"
    # An experiment stopped with Ctrl-C once its application runs: its driver goes on.
    interrupted_id = f"test-spark-interrupted-{uuid.uuid4().hex[:8]}"
    playbook = start_playbook(
        "experiment.yml",
        *("-e", "engine=spark", "-e", f"count={500 * RATE}", "-e", f"rate={RATE}"),
        *("-e", f"run_id={interrupted_id}", "-e", f"experiment_results_dir={results}"),
        *("-e", "analyze_on=none"),
    )
    try:
        (left,) = wait_until(
            lambda: (
                [a for a in spark_apps(lab) if a["name"].startswith("streamlab-")]
                if playbook.poll() is None
                else [{"name": "the playbook ended"}]
            ),
            bool,
            "the interrupted run's application",
            timeout_s=600,
        )
        assert left["name"] != "the playbook ended"
        os.killpg(playbook.pid, signal.SIGINT)
        assert playbook.wait(timeout=60) != 0
    finally:
        if playbook.poll() is None:
            os.killpg(playbook.pid, signal.SIGKILL)

    run_id = f"test-spark-{uuid.uuid4().hex[:8]}"
    with control_node_reaches_only_ssh(lab):
        run = run_playbook(
            "experiment.yml",
            LAB_INVENTORY,
            extravars={
                "engine": "spark",
                "count": COUNT,
                "rate": RATE,
                "warmup_s": 4,
                "fault": "kill_spark_executor",
                "fault_at_s": FAULT_AT_S,
                # The worker starts the new executor at once: the fault ends when it exists.
                "duration_s": 5,
                "recovery_window_s": 20,
                "run_id": run_id,
                "experiment_results_dir": str(results),
                "analyze_on": "none",
            },
            tmp_path=tmp_path,
        )
    assert run.rc == 0, run.output[-6000:]
    # The interrupted run's application was found by its name and stopped first.
    assert "An interrupted experiment had left 1 job(s)" in " ".join(run.output.split())
    assert spark_apps(lab) == []
    marked = json.loads((results / interrupted_id / "run.json").read_text())
    assert marked["status"] == "incomplete" and marked["engine"] == "spark"
    assert f"job {left['name']}" in " ".join(marked["interrupted"]["stopped"]), marked

    out = results / run_id
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "complete", record["incomplete_reasons"]
    assert record["verdict"]["holds"] is True and record["verdict"]["lost"] == 0, record["verdict"]
    # Duplicates are counted once the drain is complete: every received line of an id after
    # its first.
    received = read_jsonl(out / "received.jsonl")
    ids = [r["msg_id"] for r in received if isinstance(r.get("msg_id"), int) and r["msg_id"] > 0]
    assert set(range(1, COUNT + 1)) <= set(ids)
    assert record["verdict"]["duplicate_records"] == len(ids) - len(set(ids))
    assert all(isinstance(r["processed_ms"], int) for r in received)

    # The executor on the target was killed, and its worker started a new one.
    (fault,) = read_jsonl(out / "faults.jsonl")
    assert fault["fault"] == "kill_spark_executor" and fault["applied"]["pids"], fault
    assert fault["reverted"]["restarted"] is True and fault["reverted"]["new_pids"], fault
    # The timeline shows the executor lost, then replaced, on the fault's host.
    target = lab[fault["host"]]
    timeline = [
        line for line in read_jsonl(out / "engine" / "timeline.jsonl") if "error" not in line
    ]
    after = [line for line in timeline if line["t_ms"] >= fault["host_start_ms"]]
    lost = next(i for i, line in enumerate(after) if not line["executors"].get(target))
    assert after[lost]["healthy"] is False
    back = next(line for line in after[lost:] if line["executors"].get(target) == 1)
    assert back["healthy"] is True
    # Each micro-batch's duration and where it read up to, from the driver's progress reports:
    # the input topic's offsets only grow, and end past every message (the probe's are there
    # too).
    batches = [line for line in timeline if line.get("progress_batch_id") is not None]
    assert batches and all(line["batch_duration_ms"] > 0 for line in batches)
    read_to = [sum(line["end_offsets"][record["parameters"]["input_topic"]].values())
               for line in batches]  # fmt: skip
    assert read_to == sorted(read_to) and read_to[-1] >= COUNT
    # The settings the query ran with, read back from the driver's own account.
    settings = record["settings"]
    assert record["settings_read_from"]["network_timeout"].startswith("spark-job.json")
    sasl = bool(lab_kafka_settings())
    assert settings["kafka.security_protocol"] == ("SASL_SSL" if sasl else "PLAINTEXT")
    assert {
        name: settings.get(name)
        for name in (
            "guarantee",
            "trigger",
            "trigger_interval_ms",
            "source_tasks",
            "executors",
            "executor_cores",
            "sink.acks",
            "sink.linger_ms",
            "sink.idempotence",
            "kafka_clients_version",
        )
    } == {
        "guarantee": "at_least_once",
        "trigger": "micro_batch",
        "trigger_interval_ms": 1000,
        "source_tasks": 4,
        "executors": 2,
        "executor_cores": 2,
        "sink.acks": "all",
        "sink.linger_ms": 5,
        "sink.idempotence": True,
        "kafka_clients_version": "3.9.1",
    }
    assert record["parameters"]["spark_trigger_interval_ms"] == 1000
    assert record["setting_roles"]["replay_bound"] == "spark_trigger_interval_ms"
    # What the driver kept names no secret of the lab (the Kafka client reads them by reference).
    for name in ("spark-job.json", "spark-progress.jsonl", "spark-driver.log"):
        text = (out / "engine" / name).read_text()
        assert not [s for s in SECRETS if len(s) >= 8 and s in text], name
