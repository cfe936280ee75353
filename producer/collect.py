"""Record every result the engine writes, and stop once every acked input has come out.

python -m producer.collect --bootstrap H:9092 --topic RESULT --out DIR/received.jsonl \\
    --produced DIR/produced.jsonl [--quiet-s 10] [--timeout-s 600] [--progress-interval 2]

Start it before the producer: it reads the result topic from the beginning, so nothing
written before it was ready is lost, and it waits for the topic if it does not exist yet.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kafka.structs import TopicPartition

from producer import arguments, kafka_clients
from producer.clock import NS_PER_MS, NS_PER_S, Clock, SystemClock
from producer.files import AtomicOutput, summary_path, write_json
from producer.produced_file import ProducedFile
from producer.progress import Progress
from producer.results import parse_result, received_line
from producer.signals import StopSignals
from producer.tally import Tally

POLL_MS = 100
TOPIC_RETRY_NS = NS_PER_S
PRODUCED_LINES_PER_POLL = 20_000
MISSING_IDS_SHOWN = 50
EXIT_COMPLETE, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 3


class ResultRecord(Protocol):
    """The part of kafka-python's ConsumerRecord the collector uses."""

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def value(self) -> bytes | None: ...


class Consumer(Protocol):
    """The part of kafka-python's KafkaConsumer the collector uses."""

    def partitions_for_topic(self, topic: str) -> set[int] | None: ...

    def assign(self, partitions: list[TopicPartition]) -> None: ...

    def seek_to_beginning(self, *partitions: TopicPartition) -> None: ...

    def poll(self, timeout_ms: int) -> Mapping[Any, Sequence[ResultRecord]]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class CollectSettings:
    topic: str
    quiet_s: float
    timeout_s: float


def stop_reason(
    tally: Tally, now_ns: int, started_ns: int, quiet_since_ns: int, settings: CollectSettings
) -> str | None:
    """'complete' when the producer is done, every acked id arrived and then quiet_s passed
    without any record; 'timeout' timeout_s after the start; None to keep collecting."""
    quiet = now_ns - quiet_since_ns >= settings.quiet_s * NS_PER_S
    if tally.producer_finished and tally.missing == 0 and quiet:
        return "complete"
    if now_ns - started_ns >= settings.timeout_s * NS_PER_S:
        return "timeout"
    return None


def assign_from_beginning(consumer: Consumer, topic: str, partitions: Collection[int]) -> None:
    """Read every partition of topic from its first offset (no group, nothing committed)."""
    assigned = [TopicPartition(topic, partition) for partition in sorted(partitions)]
    consumer.assign(assigned)
    consumer.seek_to_beginning(*assigned)


def live_status(tally: Tally, partitions: Collection[int]) -> str:
    if not partitions:
        return "waiting for the topic to exist"
    producer = "done" if tally.producer_finished else "running"
    return (
        f"received={tally.received} unique={tally.unique} duplicates={tally.duplicates} "
        f"malformed={tally.malformed} missing={tally.missing} producer={producer}"
    )


class Collector:
    """Polls results into received.jsonl and the tally until a stop condition holds."""

    def __init__(
        self,
        consumer: Consumer,
        settings: CollectSettings,
        output: AtomicOutput,
        produced: ProducedFile,
        clock: Clock,
        progress: Progress,
        stop: StopSignals,
    ) -> None:
        self.consumer = consumer
        self.settings = settings
        self.output = output
        self.produced = produced
        self.clock = clock
        self.progress = progress
        self.stop = stop
        self.tally = Tally()
        self.partitions: set[int] = set()
        self.started_ns = clock.now_ns()
        self.quiet_since_ns = self.started_ns
        self.last_recv_ms: int | None = None
        self.error: str | None = None

    def run(self) -> str:
        """Collect until complete, timeout, error or a signal; returns the reason."""
        while True:
            if self.stop.received:
                return self.stop.received.name
            if self.partitions:
                self._poll_once()
            else:
                self._look_for_topic()
            now_ns = self.clock.now_ns()
            if not self.tally.producer_finished and self.produced.available():
                try:
                    self._load_produced(now_ns)
                except ValueError as error:
                    self.error = str(error)
                    return "error"
            reason = stop_reason(
                self.tally, now_ns, self.started_ns, self.quiet_since_ns, self.settings
            )
            if reason is not None:
                return reason
            self.progress.update(
                self.tally.received, lambda: live_status(self.tally, self.partitions)
            )

    def _look_for_topic(self) -> None:
        partitions = self.consumer.partitions_for_topic(self.settings.topic)
        if partitions:
            assign_from_beginning(self.consumer, self.settings.topic, partitions)
            self.partitions = set(partitions)
            self.progress.note(
                f"reading {self.settings.topic} partitions {sorted(partitions)} from the beginning"
            )
        else:
            self.clock.sleep_until(self.clock.now_ns() + TOPIC_RETRY_NS)

    def _poll_once(self) -> None:
        # While produced.jsonl loads, poll without waiting: the load is the work to do.
        loading = self.produced.available() and not self.tally.producer_finished
        batches = self.consumer.poll(timeout_ms=0 if loading else POLL_MS)
        recv_ns = self.clock.now_ns()
        recv_ms = recv_ns // NS_PER_MS
        arrived = False
        for records in batches.values():
            for record in records:
                result = parse_result(record.value)
                self.output.write(received_line(result, recv_ms, record.partition, record.offset))
                self.tally.record(result.msg_id)
                arrived = True
        if arrived:
            self.output.flush()
            self.quiet_since_ns = recv_ns
            self.last_recv_ms = recv_ms

    def _load_produced(self, now_ns: int) -> None:
        self.tally.add_acked(self.produced.read_acked(PRODUCED_LINES_PER_POLL))
        if self.produced.done:
            self.tally.finish_producer()
            # Give late duplicates quiet_s after the producer is known to be done.
            self.quiet_since_ns = max(self.quiet_since_ns, now_ns)

    def summary(self, reason: str) -> dict[str, Any]:
        return {
            "topic": self.settings.topic,
            "partitions": sorted(self.partitions),
            **self.tally.counts(),
            "missing_ids": self.tally.missing_ids(MISSING_IDS_SHOWN),
            "producer_finished": self.tally.producer_finished,
            "produced_lines": self.produced.lines,
            "stop_reason": reason,
            "error": self.error,
            "start_ms": self.started_ns // NS_PER_MS,
            "end_ms": self.clock.now_ns() // NS_PER_MS,
            "last_recv_ms": self.last_recv_ms,
            "quiet_s": self.settings.quiet_s,
            "timeout_s": self.settings.timeout_s,
        }


def run_collector(
    consumer: Consumer,
    settings: CollectSettings,
    out: Path,
    produced: Path,
    clock: Clock,
    progress: Progress,
    stop: StopSignals,
    client: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Collect into out (published under its final name at the end) and write the summary."""
    output = AtomicOutput(out)
    collector = Collector(consumer, settings, output, ProducedFile(produced), clock, progress, stop)
    reason = "error"
    try:
        reason = collector.run()
    finally:
        consumer.close()
        output.commit()
        progress.close(collector.tally.received, live_status(collector.tally, collector.partitions))
    summary = collector.summary(reason) | {"client": client or {}}
    write_json(summary_path(out), summary)
    return summary


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m producer.collect",
        description="Record every record of the result topic until every acked input arrived.",
    )
    parser.add_argument("--bootstrap", required=True, type=arguments.bootstrap_servers)
    parser.add_argument("--topic", required=True, help="the engine's result topic")
    parser.add_argument(
        "--out", required=True, type=arguments.new_output_file, help="DIR/received.jsonl (new)"
    )
    parser.add_argument(
        "--produced",
        required=True,
        type=Path,
        help="the producer's produced.jsonl (need not exist yet: its appearance means done)",
    )
    parser.add_argument("--quiet-s", type=arguments.seconds, default=10.0)
    parser.add_argument("--timeout-s", type=arguments.positive_seconds, default=600.0)
    parser.add_argument("--progress-interval", type=arguments.positive_seconds, default=2.0)
    parser.add_argument(
        "--isolation-level",
        choices=["read_uncommitted", "read_committed"],
        default="read_uncommitted",
        help="read_committed hides aborted transactional writes (default: read_uncommitted)",
    )
    args = parser.parse_args(argv)
    if not args.topic.strip():
        parser.error("argument --topic: must not be empty")
    if not args.produced.parent.is_dir():
        parser.error(
            f"argument --produced: directory {args.produced.parent} does not exist; "
            "it must be the directory the producer writes to"
        )
    return args


def exit_code(summary: dict[str, Any], stop: StopSignals) -> int:
    if stop.received:
        return stop.exit_code
    return {"complete": EXIT_COMPLETE, "timeout": EXIT_INCOMPLETE}.get(
        summary["stop_reason"], EXIT_ERROR
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = CollectSettings(args.topic, args.quiet_s, args.timeout_s)
    try:
        consumer = kafka_clients.open_consumer(args.bootstrap, args.isolation_level)
    except kafka_clients.StartupError as error:
        print(f"collect: {error}", file=sys.stderr)
        return EXIT_ERROR
    progress = Progress("collect", None, args.progress_interval)
    client = kafka_clients.describe_consumer(args.isolation_level)
    with StopSignals() as stop:
        summary = run_collector(
            consumer, settings, args.out, args.produced, SystemClock(), progress, stop, client
        )
    print(json.dumps(summary, indent=2))
    return exit_code(summary, stop)


if __name__ == "__main__":
    sys.exit(main())
