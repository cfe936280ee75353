"""The producer, collector, probe and topics tools against a real (throwaway, local) Kafka broker.

Not a lab test: the broker runs on 127.0.0.1 from the kit's cached Kafka jars (local_kafka.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import local_kafka
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata, TopicPartition

from producer import produce
from producer.clock import SystemClock
from producer.consumer import LOG_APPEND_TIME
from producer.lagsampler import LagSampler
from producer.offsets import KafkaOffsets

kafka_broker = local_kafka.kafka_broker  # the session fixture: one broker for these tests
REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def tool(module, *args, timeout=60):
    """Run python -m producer.<module> to its end; returns the completed process."""
    return subprocess.run(
        [sys.executable, "-m", f"producer.{module}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
        cwd=REPO,
        check=False,
    )


def new_topics(bootstrap, *names, partitions=4, config=("message.timestamp.type=LogAppendTime",)):
    options = [item for setting in config for item in ("--config", setting)]
    done = tool(
        "topics",
        *("--bootstrap", bootstrap, "--partitions", str(partitions), "--replication", "1"),
        *options,
        *names,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["configs"] == dict(s.split("=", 1) for s in config)


def read_all(bootstrap, topic):
    """Every record of topic, from the beginning to its current end."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        records = []
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, "could not read the topic to its end"
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def start_producer(bootstrap, topic, count, rate, out, *extra):
    """python -m producer.produce in the background (seed 1); its stderr kept for failures."""
    return subprocess.Popen(
        [sys.executable, "-m", "producer.produce", "--bootstrap", bootstrap]
        + ["--topic", topic, "--count", count, "--rate", rate, "--seed", "1"]
        + ["--out", str(out), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
        cwd=REPO,
    )


def wait_while_running(producer, condition, what, timeout_s=30):
    """Wait until condition() holds; fail at once, with its stderr, if the producer ends first."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert producer.poll() is None, producer.stderr.read().decode()
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        time.sleep(0.05)


def test_a_killed_producer_leaves_every_acknowledged_message_in_produced_jsonl_part(
    kafka_broker, tmp_path
):
    topic = f"crash-{uuid.uuid4().hex[:8]}"
    new_topics(kafka_broker.bootstrap, topic)
    out = tmp_path / "produced.jsonl"
    part = tmp_path / "produced.jsonl.part"
    producer = start_producer(
        kafka_broker.bootstrap, topic, "1000000", "3000", out, "--progress-interval", "1"
    )
    try:
        wait_while_running(
            producer, lambda: part.exists() and part.stat().st_size > 0, "a line in produced.jsonl"
        )
        time.sleep(3.5)  # about 4 s after it started sending
        killed_ms = time.time_ns() // 1_000_000
        producer.send_signal(signal.SIGKILL)
        producer.wait(timeout=10)
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait()
    assert producer.returncode == -signal.SIGKILL

    text = part.read_text()
    complete, _, _cut = text.rpartition("\n")  # the last line may be cut short by the kill
    lines = [json.loads(line) for line in complete.splitlines()]
    acked = {row["msg_id"] for row in lines if row["acked"] is True}
    assert len(acked) == len(lines), "every outcome so far is an ack, each written once"
    assert not out.exists()

    records = read_all(kafka_broker.bootstrap, topic)
    assert all(record.timestamp_type == LOG_APPEND_TIME for record in records)
    settled = [r for r in records if r.timestamp < killed_ms - 1000]
    assert len(settled) > 3000 * 2, f"only {len(settled)} records more than 1 s before the kill"
    unrecorded = sorted(
        json.loads(r.value)["msg_id"] for r in settled if json.loads(r.value)["msg_id"] not in acked
    )
    assert unrecorded == [], f"{len(unrecorded)} acknowledged long before the kill, not recorded"


def first_good_sample(sampler, timeout_s=15):
    """Samples fail while a fresh broker creates __consumer_offsets (no group coordinator yet):
    the collector records those as errors and goes on; here, wait for the first good one."""
    deadline = time.monotonic() + timeout_s
    while (sample := sampler.sample()).error is not None:
        assert "Coordinator" in sample.error and time.monotonic() < deadline, sample.error
        time.sleep(0.2)
    return sample


def test_lag_samples_read_end_and_committed_offsets_from_kafka(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    run = uuid.uuid4().hex[:8]
    source, sink, group = f"lag-in-{run}", f"lag-out-{run}", f"lag-group-{run}"
    new_topics(bootstrap, source, partitions=2, config=())
    new_topics(bootstrap, sink, partitions=1, config=())
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for partition, count in ((0, 5), (1, 3)):
        for i in range(count):
            producer.send(source, value=b"x%d" % i, partition=partition)
    for i in range(2):
        producer.send(sink, value=b"y%d" % i, partition=0)
    producer.flush()
    producer.close()
    sampler = LagSampler(lambda: KafkaOffsets([bootstrap]), source, sink, group, SystemClock())
    try:
        before = first_good_sample(sampler)  # the group has committed nothing yet
        committer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
        committer.commit({TopicPartition(source, 0): OffsetAndMetadata(5, "", -1)})
        half = sampler.sample()
        committer.commit({TopicPartition(source, 1): OffsetAndMetadata(3, "", -1)})
        committer.close()
        after = sampler.sample()
    finally:
        sampler.close()
    for sample in (before, half):
        assert sample.error is None, sample.error
        assert sample.line() | {"t_ms": 0} == {
            "t_ms": 0,
            "input_end": [5, 3],
            "committed": [None, None] if sample is before else [5, None],
            "result_end": [2],
            "input_end_total": 8,
            "committed_total": None,
            "lag": None,
            "result_end_total": 2,
            "backlog": 6,
        }
    assert (after.committed, after.lag, after.short_of_end()) == ((5, 3), 0, {})


class EchoJob:
    """A tiny at-least-once job: copies IN to OUT and commits its group's offsets after each
    batch is acknowledged (what Flink and Storm do at a checkpoint / ack)."""

    def __init__(self, bootstrap, source, sink, group):
        self.source, self.sink = source, sink
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
        )
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        partitions = [TopicPartition(self.source, p) for p in range(4)]
        self.consumer.assign(partitions)
        self.consumer.seek_to_beginning(*partitions)
        self.thread.start()
        return self

    def _run(self):
        while not self.done.is_set():
            batches = self.consumer.poll(timeout_ms=100)
            for records in batches.values():
                for record in records:
                    self.producer.send(self.sink, value=record.value)
            if batches:
                self.producer.flush()
                self.consumer.commit()

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(10)
        self.consumer.close()
        self.producer.close()


def test_probe_then_a_run_that_drains_through_the_collector(kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap
    run = uuid.uuid4().hex[:8]
    source, sink, group = f"run-in-{run}", f"run-out-{run}", f"run-group-{run}"
    new_topics(bootstrap, source, sink)
    with EchoJob(bootstrap, source, sink, group):
        probed = tool(
            "probe",
            *("--bootstrap", bootstrap, "--input-topic", source, "--result-topic", sink),
            *("--timeout-s", "30", "--resend-s", "2"),
        )
        assert probed.returncode == 0, probed.stderr
        report = json.loads(probed.stdout)
        assert report["ready"] is True and report["partitions"] == 4
        assert sorted(report["per_partition"]) == ["0", "1", "2", "3"]
        assert all(row["recv_ms"] is not None for row in report["per_partition"].values())

        collector = subprocess.Popen(
            [sys.executable, "-m", "producer.collect", "--bootstrap", bootstrap]
            + ["--topic", sink, "--out", str(tmp_path / "received.jsonl")]
            + ["--produced", str(tmp_path / "produced.jsonl"), "--input-topic", source]
            + ["--group", group, "--sample-interval-s", "0.2", "--quiet-s", "1"]
            + ["--warmup-s", "0.5", "--drain-timeout-s", "30", "--timeout-s", "60"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ENV,
            cwd=REPO,
        )
        produced = tool(
            "produce",
            *("--bootstrap", bootstrap, "--topic", source, "--count", "600", "--rate", "300"),
            *("--seed", "1", "--out", str(tmp_path / "produced.jsonl")),
        )
        assert produced.returncode == 0, produced.stderr
        out, err = collector.communicate(timeout=60)
    assert collector.returncode == 0, err.decode()[-3000:]
    summary = json.loads((tmp_path / "received.summary.json").read_text())
    assert summary["stop_reason"] == "complete" and summary["incomplete_reason"] is None
    assert (summary["acked"], summary["missing"], summary["unique"]) == (600, 0, 600)
    assert summary["probe_records"] == len(report["probe_ids"])
    received = [
        json.loads(line) for line in (tmp_path / "received.jsonl").read_text().split("\n")[:-1]
    ]
    assert all(row["msg_id"] > 0 and row["broker_ms"] is not None for row in received)
    lag = [json.loads(line) for line in (tmp_path / "lag.jsonl").read_text().splitlines()]
    good = [row for row in lag if "error" not in row]
    assert len(good) >= 5
    assert good[-1]["lag"] == 0 and good[-1]["input_end_total"] == 600 + len(report["probe_ids"])
    latency = summary["latency_ms"]
    assert latency["messages"] > 0 and 0 <= latency["p50"] <= latency["p99"] <= latency["max"]
    assert (
        summary["send_lag_ms"]
        == json.loads((tmp_path / "produced.summary.json").read_text())["send_lag_ms"]
    )
    # An echo job at this rate keeps up; over so short a window the verdict may be unknown
    # (the backlog slope's interval straddling the threshold), but never overloaded.
    overload = summary["overload"]
    assert overload["samples"] >= 5 and overload["overloaded"] is not True, overload["reason"]
    assert overload["backlog_slope_ci95_per_s"] is not None


def test_a_producer_waits_connected_for_its_start_file_and_sends_from_that_instant(
    kafka_broker, tmp_path
):
    """--start-file: ready once connected, nothing sent before the instant written afterwards,
    message 1 due exactly then (what experiment.yml does, so Ansible's slow steps before the
    instant never make the first messages late)."""
    topic = f"start-{uuid.uuid4().hex[:8]}"
    new_topics(kafka_broker.bootstrap, topic)
    start_file = tmp_path / "start"
    out = tmp_path / "produced.jsonl"
    producer = start_producer(
        kafka_broker.bootstrap,
        topic,
        "200",
        "100",
        out,
        *("--start-file", str(start_file), "--start-wait-s", "60"),
    )
    try:
        wait_while_running(producer, (tmp_path / "start.ready").exists, "start.ready")
        time.sleep(1.0)  # ready and waiting: nothing may be sent yet
        assert read_all(kafka_broker.bootstrap, topic) == []
        fixed = tool("start", "--file", str(start_file), "--lead-ms", "500")
        assert fixed.returncode == 0, fixed.stderr
        instant = int(fixed.stdout)
        _, stderr = producer.communicate(timeout=60)
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait()
    assert producer.returncode == 0, stderr.decode()[-2000:]
    summary = json.loads((tmp_path / "produced.summary.json").read_text())
    assert summary["start_ms"] == instant and summary["acked"] == 200
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert min(row["intended_ms"] for row in lines) == instant
    records = read_all(kafka_broker.bootstrap, topic)
    assert len(records) == 200 and min(r.timestamp for r in records) >= instant


def test_a_producer_whose_start_file_never_comes_sends_nothing_and_says_why(kafka_broker, tmp_path):
    topic = f"nostart-{uuid.uuid4().hex[:8]}"
    new_topics(kafka_broker.bootstrap, topic)
    done = tool(
        "produce",
        *("--bootstrap", kafka_broker.bootstrap, "--topic", topic, "--count", "10"),
        *("--rate", "10", "--seed", "1", "--out", str(tmp_path / "produced.jsonl")),
        *("--start-file", str(tmp_path / "start"), "--start-wait-s", "2"),
    )
    assert done.returncode == produce.EXIT_CANNOT_RUN, done.stderr
    assert f"no start instant in {tmp_path / 'start'} within 2 s; nothing was sent" in done.stderr
    assert read_all(kafka_broker.bootstrap, topic) == []
    assert not (tmp_path / "produced.jsonl").exists()
