"""Readiness probe: one probe per input partition, resends with new ids, the JSON it prints."""

from __future__ import annotations

import json

import pytest
from kafka.consumer.fetcher import ConsumerRecord
from kafka.future import Future
from kafka.structs import TopicPartition

from producer import probe
from producer.clock import SimulatedClock
from producer.probe import ProbeRun, ProbeSettings, ProbeState, probe_answer

MS = 1_000_000
SECOND = 1_000_000_000


class FakeProbeSender:
    """KafkaProducer with 3 input partitions; records what was sent where."""

    def __init__(self, clock, partitions=(0, 1, 2), refuse=()):
        self.clock = clock
        self.input_partitions = set(partitions)
        self.refuse = set(refuse)
        self.sent = []  # (partition, message, clock)
        self.closed = False

    def partitions_for(self, topic):
        assert topic == "in"
        return set(self.input_partitions)

    def send(self, topic, value, partition):
        assert topic == "in"
        message = json.loads(value)
        self.sent.append((partition, message, self.clock.now_ns()))
        future = Future()
        if message["msg_id"] in self.refuse:
            future.failure(OSError("broker gone"))
        return future

    def close(self, timeout=None):
        self.closed = True


class EngineOut:
    """The result topic as the fake engine fills it: answers(sent) decides which probes the
    job has copied to the output so far (a partition that is not assigned yet stays silent)."""

    def __init__(self, clock, sender, answers, stale=()):
        self.clock, self.sender, self.answers = clock, sender, answers
        self.delivered = set()
        self.backlog = list(stale)  # values already in the topic before the probe started
        self.assigned = self.sought = None
        self.offset = 0

    def partitions_for_topic(self, topic):
        assert topic == "out"
        return {0, 1}

    def assign(self, partitions):
        self.assigned = partitions

    def seek_to_beginning(self, *partitions):
        self.sought = list(partitions)

    def poll(self, timeout_ms):
        assert self.sought == self.assigned == [TopicPartition("out", 0), TopicPartition("out", 1)]
        self.clock.advance(timeout_ms * MS)
        values = self.backlog
        self.backlog = []
        for partition, message, sent_ns in self.sender.sent:
            key = message["msg_id"]
            if key not in self.delivered and self.answers(partition, message, sent_ns):
                self.delivered.add(key)
                values.append(json.dumps(message | {"engine": "flink", "processed_ms": 1}))
        records = []
        for value in values:
            self.offset += 1
            records.append(
                ConsumerRecord(
                    "out", 0, 0, self.offset, 0, 0, None, value.encode(), [], None, 0, 0, 0
                )
            )
        return {TopicPartition("out", 0): records} if records else {}

    def close(self):
        pass


def probe_run(answers, timeout_s=30, resend_s=5, refuse=(), stale=()):
    clock = SimulatedClock()
    sender = FakeProbeSender(clock, refuse=refuse)
    consumer = EngineOut(clock, sender, answers, stale)
    settings = ProbeSettings("in", "out", timeout_s, resend_s)
    report = ProbeRun(sender, consumer, settings, clock).run()
    return report, sender, clock


def test_every_partition_gets_a_probe_and_the_answers_make_it_ready():
    def answers(partition, message, sent_ns):  # the job answers 250 ms after each send
        return sent_ns + 250 * MS <= sent_ns + 300 * MS

    report, sender, clock = probe_run(answers)
    assert [(p, m["msg_id"]) for p, m, _ in sender.sent] == [(0, -1), (1, -2), (2, -3)]
    first_sent_ms = sender.sent[0][2] // MS
    # Shaped like a real message, with the probe's negative id and its send time as sent_ms.
    message = sender.sent[0][1]
    assert list(message) == ["msg_id", "content", "timestamp", "sent_ms"]
    assert message["sent_ms"] == first_sent_ms
    assert report == {
        "probe_ids": [-1, -2, -3],
        "partitions": 3,
        "ready": True,
        "sent_ms": first_sent_ms,
        "ready_ms": first_sent_ms + 100,
        "waited_ms": 100,
        "per_partition": {
            str(p): {"msg_id": -(p + 1), "sent_ms": first_sent_ms, "recv_ms": first_sent_ms + 100}
            for p in range(3)
        },
        "send_errors": [],
    }
    assert probe.exit_code(report) == probe.EXIT_READY


def test_a_partition_that_does_not_answer_is_probed_again_with_a_new_id():
    start = SimulatedClock().now_ns()

    def answers(partition, message, sent_ns):  # partition 2 is only assigned after 7 s
        return partition != 2 or sent_ns >= start + 7 * SECOND

    report, sender, _ = probe_run(answers, resend_s=5)
    sends = [(p, m["msg_id"], (ns - start) // MS) for p, m, ns in sender.sent]
    assert sends == [(0, -1, 0), (1, -2, 0), (2, -3, 0), (2, -4, 5000), (2, -5, 10000)]
    assert report["ready"] is True and report["probe_ids"] == [-1, -2, -3, -4, -5]
    assert report["per_partition"]["2"]["msg_id"] == -5
    assert report["waited_ms"] == 10_100


def test_at_the_timeout_it_names_the_partitions_that_never_answered(capsys, monkeypatch):
    from producer import kafka_clients

    clock = SimulatedClock()
    sender = FakeProbeSender(clock)
    consumer = EngineOut(clock, sender, lambda p, m, ns: p == 0)
    monkeypatch.setattr(kafka_clients, "open_probe_producer", lambda *_: sender)
    monkeypatch.setattr(kafka_clients, "open_consumer", lambda *_: consumer)
    monkeypatch.setattr(probe, "SystemClock", lambda: clock)
    code = probe.main(
        ["--bootstrap", "h:9092", "--input-topic", "in", "--result-topic", "out"]
        + ["--timeout-s", "12", "--resend-s", "5"]
    )
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert code == probe.EXIT_TIMEOUT and sender.closed
    assert report["ready"] is False and report["ready_ms"] is None
    assert report["waited_ms"] == 12_000
    assert report["per_partition"]["0"]["recv_ms"] is not None
    # Sends at 0 s (-1, -2, -3), 5 s (-4, -5) and 10 s (-6, -7) to partitions 1 and 2.
    assert report["per_partition"]["1"] == {
        "msg_id": -6,
        "sent_ms": sender.sent[-2][2] // MS,
        "recv_ms": None,
    }
    assert "no answer from the job on in partitions [1, 2] within 12 s" in err


def test_a_refused_probe_is_noted_and_resent():
    report, sender, _ = probe_run(lambda p, m, ns: m["msg_id"] != -2, refuse={-2}, resend_s=1)
    assert report["ready"] is True
    assert report["send_errors"] == ["probe -2: OSError: broker gone"]
    assert report["per_partition"]["1"]["msg_id"] == -4


def test_an_earlier_probe_runs_answer_with_the_same_id_does_not_count():
    stale = [json.dumps({"msg_id": -1, "sent_ms": 5, "engine": "storm"})]
    report, _, _ = probe_run(lambda p, m, ns: p != 0, stale=stale, timeout_s=3, resend_s=10)
    assert report["ready"] is False
    assert report["per_partition"]["0"]["recv_ms"] is None


def test_probe_state_resend_timing_and_ids():
    state = ProbeState([2, 0, 1], resend_ms=5000)
    assert state.due(0) == [0, 1, 2]
    for p in (0, 1, 2):
        state.new_probe(p, 0)
    assert state.due(4999) == []
    assert state.answer(-2, 0, 100) and not state.answer(-2, 0, 200)  # first answer counts
    assert not state.answer(-3, 99, 100)  # sent_ms does not match: not this run's probe
    assert not state.answer(7, None, 100)  # a real message
    assert state.due(5000) == [0, 2]
    assert state.new_probe(0, 5000).msg_id == -4


@pytest.mark.parametrize(
    "value,expected",
    [
        (b'{"msg_id": -3, "sent_ms": 17, "engine": "flink"}', (-3, 17)),
        (b'{"msg_id": -3}', (-3, None)),
        (b'{"msg_id": 0, "sent_ms": "x"}', (0, None)),
        (b'{"msg_id": 12, "sent_ms": 17}', None),
        (b'{"msg_id": true}', None),
        (b'{"malformed": "x"}', None),
        (b"not json", None),
        (None, None),
    ],
)
def test_probe_answers_are_recognized(value, expected):
    assert probe_answer(value) == expected


@pytest.mark.parametrize(
    "args,message",
    [
        (["--timeout-s", "0"], "argument --timeout-s: must be a number of seconds > 0"),
        (["--resend-s", "x"], "argument --resend-s: must be a number of seconds"),
        (["--input-topic", " "], "argument --input-topic: must not be empty"),
    ],
)
def test_bad_probe_arguments_are_refused(capsys, args, message):
    base = {"--bootstrap": "127.0.0.1:9092", "--input-topic": "in", "--result-topic": "out"}
    for key, value in zip(args[::2], args[1::2], strict=True):
        base[key] = value
    with pytest.raises(SystemExit) as exit_info:
        probe.main([item for pair in base.items() for item in pair])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_probe_defaults():
    args = probe.parse_args(
        ["--bootstrap", "h:9092", "--input-topic", "in", "--result-topic", "out"]
    )
    assert (args.timeout_s, args.resend_s) == (120.0, 5.0)


def test_a_result_topic_that_never_appears_ends_with_the_report_and_the_reason():
    class NoTopic(EngineOut):
        def partitions_for_topic(self, topic):
            return set()

    clock = SimulatedClock()
    sender = FakeProbeSender(clock)
    consumer = NoTopic(clock, sender, lambda p, m, ns: True)
    report = ProbeRun(sender, consumer, ProbeSettings("in", "out", 3, 5), clock).run()
    assert report["ready"] is False and report["probe_ids"] == [-1, -2, -3]
    assert report["error"] == "result topic 'out' does not exist"
    assert report["waited_ms"] == 3000
    assert probe.exit_code(report) == probe.EXIT_TIMEOUT
