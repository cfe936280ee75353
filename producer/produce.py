"""Produce messages 1..count to Kafka at a fixed rate and record what the broker acknowledged.

python -m producer.produce --bootstrap H:9092 --topic T --count N --rate R --seed S \\
    --out DIR/produced.jsonl [--start-at-ms EPOCH_MS | --start-file F [--start-wait-s 600]]
    [--progress-interval 2] [--no-idempotence]

--start-at-ms fixes when message 1 is due (epoch ms on this host's clock), so other steps of a
run (faults) can be scheduled against the same instant; by default it is due at once.
--start-file F: once connected, write F.ready and wait for F, which `python -m producer.start`
writes with the instant (start.py): the instant is then fixed after the producer has started.

Each message's line goes to DIR/produced.jsonl.part as soon as its outcome is known (see
outcomes.py); at the end the file is renamed to produced.jsonl, after produced.summary.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from producer import arguments, start
from producer.clock import NS_PER_MS, NS_PER_S, Clock, SystemClock
from producer.delivery import DeliveryLog
from producer.files import summary_path, write_json
from producer.messages import SensorMessages
from producer.outcomes import NoWriter, PeriodicWriter, ProducedWriter, flush_while_writing
from producer.progress import Progress
from producer.schedule import Schedule
from producer.signals import StopSignals
from producer.stats import lag_summary_ms

# A long wait for a slot is cut into pieces so that SIGTERM is noticed promptly.
MAX_SLEEP_NS = NS_PER_S // 5
EXIT_OK, EXIT_CANNOT_RUN, EXIT_UNACKED = 0, 1, 3
NO_WRITER = NoWriter()


class SendFuture(Protocol):
    """The part of kafka-python's FutureRecordMetadata the producer uses."""

    def add_callback(self, fn: Callable[..., Any], *args: Any) -> Any: ...

    def add_errback(self, fn: Callable[..., Any], *args: Any) -> Any: ...


class Sender(Protocol):
    """The part of kafka-python's KafkaProducer the producer uses."""

    def send(self, topic: str, value: bytes) -> SendFuture: ...

    def flush(self, timeout: float | None = None) -> None: ...

    def close(self, timeout: float | None = None) -> None: ...


@dataclass(frozen=True)
class ProduceSettings:
    topic: str
    count: int
    rate: Fraction
    seed: int
    # When message 1 is due (epoch ns); None: at once.
    start_ns: int | None = None


def wait_for_slot(
    clock: Clock, slot_ns: int, stop: StopSignals, writer: PeriodicWriter = NO_WRITER
) -> None:
    """Sleep until slot_ns, or return early on a stop signal; at once when behind schedule.

    While it waits, the writer still writes resolved lines when it is due.
    """
    while not stop.received:
        now = clock.now_ns()
        if now >= slot_ns:
            return
        if now >= writer.due_ns:
            writer.write_resolved(now)
        clock.sleep_until(min(slot_ns, now + MAX_SLEEP_NS, writer.due_ns))


def send_on_schedule(
    sender: Sender,
    settings: ProduceSettings,
    schedule: Schedule,
    log: DeliveryLog,
    clock: Clock,
    progress: Progress,
    stop: StopSignals,
    writer: PeriodicWriter = NO_WRITER,
) -> None:
    """Send messages 1..count, each at its slot or, when behind, as soon as possible.

    Nothing is skipped and the slots never move: a stall shows up as send lag
    (sent - intended) of the messages after it, not as a shifted schedule. Messages carry no
    key, so kafka-python's sticky partitioner fills one batch at a time instead of hashing
    each key, for more throughput (docs/experiments.md). The writer gets a turn
    whenever it is due, between sends and while waiting for a slot.
    """
    messages = SensorMessages(settings.seed)
    describe = partial(live_status, log, schedule, clock)
    for msg_id in range(1, settings.count + 1):
        slot_ns = schedule.slot_ns(msg_id)
        value = messages.encode(msg_id, slot_ns)
        wait_for_slot(clock, slot_ns, stop, writer)
        if stop.received:
            return
        sent_ns = clock.now_ns()
        if sent_ns >= writer.due_ns:
            writer.write_resolved(sent_ns)
        log.record_send(msg_id, sent_ns)
        try:
            future = sender.send(settings.topic, value=value)
        except Exception as error:  # the client refused the message: it is not acked
            log.on_error(msg_id, error)
        else:
            future.add_callback(log.on_ack, msg_id)
            future.add_errback(log.on_error, msg_id)
        progress.update(msg_id, describe)


def live_status(log: DeliveryLog, schedule: Schedule, clock: Clock) -> str:
    elapsed_s = max(clock.now_ns() - schedule.start_ns, 1) / NS_PER_S
    lag_ms = (log.sent_ns(log.sent) - schedule.slot_ns(log.sent)) / NS_PER_MS if log.sent else 0
    return (
        f"rate={log.sent / elapsed_s:.0f}/s sent={log.sent} acked={log.acked_live} "
        f"errors={log.failed_live} lag={lag_ms:.1f}ms"
    )


def summarize(
    settings: ProduceSettings,
    schedule: Schedule,
    log: DeliveryLog,
    end_ns: int,
    stop: StopSignals,
) -> dict[str, Any]:
    sent = log.sent
    acked = log.acked_count()
    achieved_rate = None
    if sent >= 2 and log.sent_ns(sent) > log.sent_ns(1):
        achieved_rate = round((sent - 1) * NS_PER_S / (log.sent_ns(sent) - log.sent_ns(1)), 3)
    lags = (log.sent_ns(i) - schedule.slot_ns(i) for i in range(1, sent + 1))
    return {
        "topic": settings.topic,
        "count": settings.count,
        "rate": float(settings.rate),
        "seed": settings.seed,
        "start_ms": schedule.start_ns // NS_PER_MS,
        "end_ms": end_ns // NS_PER_MS,
        "sent": sent,
        "acked": acked,
        "errors": sent - acked,
        "first_error": log.first_error(),
        "achieved_rate": achieved_rate,
        "send_lag_ms": lag_summary_ms(lags),
        "stopped_by": stop.received.name if stop.received else None,
    }


def run_producer(
    settings: ProduceSettings,
    sender: Sender,
    out: Path,
    clock: Clock,
    progress: Progress,
    stop: StopSignals,
    client: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Send, wait for every acknowledgement, then publish produced.jsonl beside its summary.

    produced.jsonl.part grows as outcomes arrive (see outcomes.py); at the end it gets a line
    for every message never resolved. client describes the Kafka client for the summary.
    """
    log = DeliveryLog(settings.count)
    start_ns = clock.now_ns() if settings.start_ns is None else settings.start_ns
    schedule = Schedule(start_ns, settings.rate)
    writer = ProducedWriter(out, log, schedule, clock)
    try:
        send_on_schedule(sender, settings, schedule, log, clock, progress, stop, writer)
    finally:
        flush_while_writing(sender, writer)
        sender.close()
    end_ns = clock.now_ns()
    progress.close(log.sent, live_status(log, schedule, clock))
    writer.write_unresolved()
    summary = summarize(settings, schedule, log, end_ns, stop) | {
        "wall_clock_moved_ms": clock.wall_moved_ns() / NS_PER_MS,
        "client": client or {},
    }
    write_json(summary_path(out), summary)
    writer.commit()  # last: the collector takes the final name as "the producer is done"
    return summary


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m producer.produce",
        description="Send messages 1..COUNT at RATE msg/s and record which ones Kafka acked.",
    )
    parser.add_argument("--bootstrap", required=True, type=arguments.bootstrap_servers)
    arguments.add_kafka_config(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", required=True, type=arguments.positive_int)
    parser.add_argument("--rate", required=True, type=arguments.positive_rate, help="msg/s")
    parser.add_argument("--seed", required=True, type=int, help="seed of the sensor readings")
    parser.add_argument(
        "--out", required=True, type=arguments.new_output_file, help="DIR/produced.jsonl (new)"
    )
    due = parser.add_mutually_exclusive_group()
    due.add_argument(
        "--start-at-ms",
        type=arguments.positive_int,
        default=None,
        help="epoch ms at which message 1 is due (default: at once)",
    )
    due.add_argument(
        "--start-file",
        type=arguments.new_output_file,
        default=None,
        help="once connected, write START_FILE.ready and wait for START_FILE: the epoch ms at "
        "which message 1 is due (python -m producer.start writes it)",
    )
    parser.add_argument(
        "--start-wait-s",
        type=arguments.positive_seconds,
        default=600.0,
        help="give up when --start-file has not come within this many seconds (default: 600)",
    )
    parser.add_argument("--progress-interval", type=arguments.positive_seconds, default=2.0)
    parser.add_argument(
        "--idempotence",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="idempotent producer: retries add no duplicates to the input (default: on)",
    )
    args = parser.parse_args(argv)
    if not args.topic.strip():
        parser.error("argument --topic: must not be empty")
    return args


def exit_code(summary: dict[str, Any], stop: StopSignals) -> int:
    if stop.received:
        return stop.exit_code
    return EXIT_OK if summary["errors"] == 0 else EXIT_UNACKED


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from producer import kafka_clients  # kafka is needed only from here on

    try:
        sender = kafka_clients.open_producer(
            args.bootstrap, args.topic, args.idempotence, args.kafka_security
        )
    except kafka_clients.StartupError as error:
        print(f"produce: {error}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    start_ms = args.start_at_ms
    if args.start_file is not None:
        try:
            start_ms = start.wait_for_start(args.start_file, SystemClock(), args.start_wait_s)
        except start.NoStart as error:
            print(f"produce: {error}; nothing was sent", file=sys.stderr)
            sender.close(timeout=0)
            return EXIT_CANNOT_RUN
    start_ns = None if start_ms is None else start_ms * NS_PER_MS
    settings = ProduceSettings(args.topic, args.count, args.rate, args.seed, start_ns)
    progress = Progress("produce", settings.count, args.progress_interval)
    with StopSignals() as stop:
        client = kafka_clients.describe_producer(args.idempotence, args.kafka_security)
        summary = run_producer(settings, sender, args.out, SystemClock(), progress, stop, client)
    print(json.dumps(summary, indent=2))
    return exit_code(summary, stop)


if __name__ == "__main__":
    sys.exit(main())
