"""Readiness probe: wait until the engine job answers on every partition of the input topic.

python -m producer.probe --bootstrap H:9092 --input-topic IN --result-topic OUT \\
    [--timeout-s 120] [--resend-s 5]

Sends one probe message to each partition of IN (shaped like a real message, with a negative
msg_id: -1, -2, ...; a resend takes a new id) and reads OUT from the beginning until, for every
input partition, one of its probes has come out. Prints one JSON object (see docs/results.md);
exit 0 when ready, 3 at the timeout, naming the partitions that never answered.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from producer import arguments
from producer.clock import NS_PER_MS, NS_PER_S, Clock, SystemClock
from producer.consumer import Consumer, assign_from_beginning
from producer.messages import SensorMessages
from producer.produce import SendFuture

POLL_MS = 100
TOPIC_RETRY_NS = NS_PER_S // 2
PROBE_SEED = 0
EXIT_READY, EXIT_CANNOT_RUN, EXIT_TIMEOUT = 0, 1, 3


class ProbeSender(Protocol):
    """The part of kafka-python's KafkaProducer the probe uses."""

    def partitions_for(self, topic: str) -> set[int]: ...

    def send(self, topic: str, value: bytes, partition: int) -> SendFuture: ...

    def close(self, timeout: float | None = None) -> None: ...


@dataclass(frozen=True)
class ProbeSettings:
    input_topic: str
    result_topic: str
    timeout_s: float
    resend_s: float


@dataclass(frozen=True)
class Probe:
    msg_id: int
    partition: int
    sent_ms: int


class ProbeState:
    """Which probes went to which partition, and which partitions have answered: pure."""

    def __init__(self, partitions: Sequence[int], resend_ms: int) -> None:
        self.partitions = sorted(partitions)
        self.resend_ms = resend_ms
        self.probes: dict[int, Probe] = {}  # msg_id -> probe, in send order
        self.answers: dict[int, tuple[Probe, int]] = {}  # partition -> (probe, recv_ms)
        self._last_sent_ms: dict[int, int] = {}

    def due(self, now_ms: int) -> list[int]:
        """Partitions to send a probe to now: never sent, or unanswered for resend_ms."""
        return [
            p
            for p in self.partitions
            if p not in self.answers
            and (p not in self._last_sent_ms or now_ms - self._last_sent_ms[p] >= self.resend_ms)
        ]

    def new_probe(self, partition: int, now_ms: int) -> Probe:
        """The next probe for partition: ids -1, -2, ... never reused."""
        probe = Probe(-(len(self.probes) + 1), partition, now_ms)
        self.probes[probe.msg_id] = probe
        self._last_sent_ms[partition] = now_ms
        return probe

    def answer(self, msg_id: int, sent_ms: int | None, recv_ms: int) -> bool:
        """A result came out; True if it is the first answer of its partition.

        sent_ms (the result's copy of the message's sent_ms, if it kept it) must match the
        probe's: a result of an earlier probe run with the same id does not count.
        """
        probe = self.probes.get(msg_id)
        if probe is None or (sent_ms is not None and sent_ms != probe.sent_ms):
            return False
        if probe.partition in self.answers:
            return False
        self.answers[probe.partition] = (probe, recv_ms)
        return True

    @property
    def ready(self) -> bool:
        return len(self.answers) == len(self.partitions)

    def _last_probe(self, partition: int) -> Probe | None:
        sent = [probe for probe in self.probes.values() if probe.partition == partition]
        return sent[-1] if sent else None

    def report(self, end_ms: int) -> dict[str, Any]:
        """The probe's JSON output; end_ms is when it gave up (used when not ready)."""
        sent_ms = min((probe.sent_ms for probe in self.probes.values()), default=None)
        ready_ms = max((recv for _, recv in self.answers.values()), default=None)
        if not self.ready:
            ready_ms = None
        per_partition: dict[str, dict[str, int | None]] = {}
        for partition in self.partitions:
            probe: Probe | None
            recv_ms: int | None
            if partition in self.answers:
                probe, recv_ms = self.answers[partition]
            else:
                probe, recv_ms = self._last_probe(partition), None
            per_partition[str(partition)] = {
                "msg_id": probe.msg_id if probe else None,
                "sent_ms": probe.sent_ms if probe else None,
                "recv_ms": recv_ms,
            }
        waited_ms = None
        if sent_ms is not None:
            waited_ms = (ready_ms if ready_ms is not None else end_ms) - sent_ms
        return {
            "probe_ids": list(self.probes),
            "partitions": len(self.partitions),
            "ready": self.ready,
            "sent_ms": sent_ms,
            "ready_ms": ready_ms,
            "waited_ms": waited_ms,
            "per_partition": per_partition,
        }


def probe_answer(value: bytes | None) -> tuple[int, int | None] | None:
    """(msg_id, sent_ms) of a result that may answer a probe (msg_id <= 0), else None."""
    try:
        data = json.loads(value) if value is not None else None
    except (ValueError, TypeError):
        return None
    if not isinstance(data, dict):
        return None
    msg_id, sent_ms = data.get("msg_id"), data.get("sent_ms")
    if not isinstance(msg_id, int) or isinstance(msg_id, bool) or msg_id > 0:
        return None
    if not isinstance(sent_ms, int) or isinstance(sent_ms, bool):
        sent_ms = None
    return msg_id, sent_ms


class ProbeRun:
    """Sends probes and reads answers until every input partition answered or time is up."""

    def __init__(
        self, sender: ProbeSender, consumer: Consumer, settings: ProbeSettings, clock: Clock
    ) -> None:
        self.sender = sender
        self.consumer = consumer
        self.settings = settings
        self.clock = clock
        self.messages = SensorMessages(PROBE_SEED)
        self.send_errors: list[str] = []
        self.started_ns = clock.now_ns()

    def run(self) -> dict[str, Any]:
        partitions = sorted(self.sender.partitions_for(self.settings.input_topic))
        state = ProbeState(partitions, int(self.settings.resend_s * 1000))
        reading = False
        while not state.ready and not self._expired():
            for partition in state.due(self.clock.now_ns() // NS_PER_MS):
                self._send(state, partition)
            if reading:
                self._read(state)
            else:
                reading = self._assign_results()
        report = state.report(self.clock.now_ns() // NS_PER_MS)
        report["send_errors"] = self.send_errors
        if not reading:
            report["error"] = f"result topic {self.settings.result_topic!r} does not exist"
        return report

    def _expired(self) -> bool:
        return self.clock.now_ns() - self.started_ns >= self.settings.timeout_s * NS_PER_S

    def _assign_results(self) -> bool:
        """Read the result topic from the beginning if it exists; else wait a little, False."""
        topic = self.settings.result_topic
        partitions = self.consumer.partitions_for_topic(topic)
        if not partitions:
            self.clock.sleep_until(self.clock.now_ns() + TOPIC_RETRY_NS)
            return False
        assign_from_beginning(self.consumer, topic, partitions)
        return True

    def _send(self, state: ProbeState, partition: int) -> None:
        now_ns = self.clock.now_ns()
        probe = state.new_probe(partition, now_ns // NS_PER_MS)
        value = self.messages.encode(probe.msg_id, now_ns)
        try:
            future = self.sender.send(self.settings.input_topic, value=value, partition=partition)
        except Exception as error:  # the client refused it: the resend will try again
            self._note_error(probe.msg_id, error)
        else:
            future.add_errback(self._note_error, probe.msg_id)

    def _note_error(self, msg_id: int, error: BaseException) -> None:
        self.send_errors.append(f"probe {msg_id}: {type(error).__name__}: {error}")

    def _read(self, state: ProbeState) -> None:
        batches = self.consumer.poll(timeout_ms=POLL_MS)
        recv_ms = self.clock.now_ns() // NS_PER_MS
        for records in batches.values():
            for record in records:
                answer = probe_answer(record.value)
                if answer is not None:
                    state.answer(answer[0], answer[1], recv_ms)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m producer.probe",
        description="Wait until the engine job answers a probe on every input partition.",
    )
    parser.add_argument("--bootstrap", required=True, type=arguments.bootstrap_servers)
    arguments.add_kafka_config(parser)
    parser.add_argument("--input-topic", required=True, help="the job's input topic")
    parser.add_argument("--result-topic", required=True, help="the job's result topic")
    parser.add_argument("--timeout-s", type=arguments.positive_seconds, default=120.0)
    parser.add_argument(
        "--resend-s",
        type=arguments.positive_seconds,
        default=5.0,
        help="send a new probe to a partition that has not answered for this long (default: 5)",
    )
    parser.add_argument(
        "--isolation-level",
        choices=["read_uncommitted", "read_committed"],
        default="read_uncommitted",
        help="read_committed: the answer counts only once its transaction committed, as the "
        "collector will read it (default: read_uncommitted)",
    )
    args = parser.parse_args(argv)
    for option in ("input_topic", "result_topic"):
        if not getattr(args, option).strip():
            parser.error(f"argument --{option.replace('_', '-')}: must not be empty")
    return args


def exit_code(report: dict[str, Any]) -> int:
    return EXIT_READY if report["ready"] else EXIT_TIMEOUT


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from producer import kafka_clients  # kafka is needed only from here on

    settings = ProbeSettings(args.input_topic, args.result_topic, args.timeout_s, args.resend_s)
    try:
        sender = kafka_clients.open_probe_producer(
            args.bootstrap, args.input_topic, args.kafka_security
        )
        consumer = kafka_clients.open_consumer(
            args.bootstrap, args.isolation_level, args.kafka_security
        )
    except kafka_clients.StartupError as error:
        print(f"probe: {error}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    try:
        report = ProbeRun(sender, consumer, settings, SystemClock()).run()
    finally:
        consumer.close()
        sender.close(timeout=5)
    print(json.dumps(report))
    if not report["ready"]:
        rows = report["per_partition"].items()
        unanswered = sorted(int(p) for p, row in rows if row["recv_ms"] is None)
        print(
            f"probe: no answer from the job on {args.input_topic} partitions {unanswered} "
            f"within {args.timeout_s:.0f} s"
            + (f" ({report['error']})" if "error" in report else ""),
            file=sys.stderr,
        )
    return exit_code(report)


if __name__ == "__main__":
    sys.exit(main())
