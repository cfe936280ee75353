"""Record every result the engine writes, and stop once the run has drained.

python -m producer.collect --bootstrap H:9092 --topic RESULT --out DIR/received.jsonl \\
    --produced DIR/produced.jsonl [--input-topic IN --group GROUP] [--lag-out DIR/lag.jsonl] \\
    [--sample-interval-s 1] [--quiet-s 10] [--lost-wait-s 20] [--drain-timeout-s 300] \\
    [--warmup-s 10] \\
    [--timeout-s 600] [--progress-interval 2] [--ready-file DIR/collector.ready]

Start it before the producer: it reads the result topic from the beginning, so nothing
written before it was ready is lost, and it waits for the topic if it does not exist yet.
--ready-file is written once its consumer is open: a caller that waits for it before letting
the producer start has the lag samples and the overload window from message 1 on.
With --input-topic it samples offsets into lag.jsonl every interval; with --group too, the run
is complete only once the group has committed the whole input (see drain.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from producer import arguments, kafka_clients
from producer.clock import NS_PER_MS, NS_PER_S, Clock, SystemClock
from producer.consumer import Consumer, ResultRecord, assign_from_beginning, broker_ms
from producer.drain import DrainSettings, DrainView, Stop, decide
from producer.files import AtomicOutput, new_output_problem, summary_path, write_json
from producer.lagsampler import LagSample, LagSampler, NoSampling, Sampling, ThreadedSampling
from producer.produced_file import ProducedFile
from producer.progress import Progress
from producer.results import parse_result, received_line
from producer.signals import StopSignals
from producer.start import say_ready
from producer.steady import ArrivalTimes, steady_figures
from producer.tally import Tally

__all__ = ["Consumer", "ResultRecord", "assign_from_beginning"]  # re-exported for callers

POLL_MS = 100
TOPIC_RETRY_NS = NS_PER_S
PRODUCED_LINES_PER_POLL = 20_000
MISSING_IDS_SHOWN = 50
EXIT_COMPLETE, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 3
INCOMPLETE_REASONS = ("timeout", "drain_timeout")


@dataclass(frozen=True)
class CollectSettings:
    topic: str
    quiet_s: float
    timeout_s: float
    drain_timeout_s: float = 300.0
    warmup_s: float = 10.0
    input_topic: str | None = None
    group: str | None = None
    sample_interval_s: float = 1.0
    # The overload flag's window ends this long after message 1 was due (at the first fault),
    # not at the producer's end.
    overload_until_s: float | None = None
    lost_wait_s: float = 20.0

    def drain(self) -> DrainSettings:
        return DrainSettings(
            self.quiet_s,
            self.timeout_s,
            self.drain_timeout_s,
            self.group,
            self.input_topic,
            self.lost_wait_s,
        )


def live_status(tally: Tally, partitions: Collection[int], sample: LagSample | None) -> str:
    if not partitions:
        return "waiting for the topic to exist"
    producer = "done" if tally.producer_finished else "running"
    lag = ""
    if sample is not None:
        lag = f" lag={sample.lag} backlog={sample.backlog}"
    return (
        f"received={tally.received} unique={tally.unique} duplicates={tally.duplicates} "
        f"malformed={tally.malformed} missing={tally.missing} producer={producer}{lag}"
    )


class Collector:
    """Polls results into received.jsonl, lag samples into lag.jsonl, until the run drained."""

    def __init__(
        self,
        consumer: Consumer,
        settings: CollectSettings,
        output: AtomicOutput,
        produced: ProducedFile,
        clock: Clock,
        progress: Progress,
        stop: StopSignals,
        sampling: Sampling | None = None,
        lag_output: AtomicOutput | None = None,
    ) -> None:
        self.consumer = consumer
        self.settings = settings
        self.output = output
        self.produced = produced
        self.clock = clock
        self.progress = progress
        self.stop = stop
        self.sampling: Sampling = sampling if sampling is not None else NoSampling()
        self.lag_output = lag_output
        self.tally = Tally()
        self.times = ArrivalTimes()
        self.probe_records = 0
        self.partitions: set[int] = set()
        self.started_ns = clock.now_ns()
        self.quiet_since_ns = self.started_ns
        self.last_recv_ms: int | None = None
        self.producer_done_ns: int | None = None
        self.produced_summary: dict[str, Any] | None = None
        self.samples: list[LagSample] = []  # the successful ones: 3,600 an hour at 1 s
        self.sample_errors = 0
        self.last_sample_error: str | None = None
        self.error: str | None = None

    def run(self) -> Stop:
        """Collect until the run drained, a timeout, an error or a signal."""
        while True:
            if self.stop.received:
                return Stop(self.stop.received.name)
            if self.partitions:
                self._poll_once()
            else:
                self._look_for_topic()
            self.take_samples()
            now_ns = self.clock.now_ns()
            if not self.tally.producer_finished and self.produced.available():
                try:
                    self._load_produced(now_ns)
                except ValueError as error:
                    self.error = str(error)
                    return Stop("error")
            decision = decide(self.view(), now_ns, self.settings.drain())
            if decision is not None:
                return decision
            self.progress.update(self.tally.received, self.status)

    def view(self) -> DrainView:
        return DrainView(
            self.started_ns,
            self.producer_done_ns,
            self.quiet_since_ns,
            self.tally.missing,
            self.samples[-1] if self.samples else None,
            self.last_sample_error,
        )

    def status(self) -> str:
        return live_status(self.tally, self.partitions, self.samples[-1] if self.samples else None)

    def take_samples(self) -> None:
        """Write the lag samples taken since the last call to lag.jsonl (flushed)."""
        samples = self.sampling.take()
        for sample in samples:
            if sample.error is None:
                self.samples.append(sample)
                self.last_sample_error = None
            else:
                self.sample_errors += 1
                self.last_sample_error = sample.error
            if self.lag_output is not None:
                self.lag_output.write(json.dumps(sample.line(), separators=(",", ":")) + "\n")
        if samples and self.lag_output is not None:
            self.lag_output.flush()

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
                arrived = self._record(record, recv_ms) or arrived
        if arrived:
            self.output.flush()  # every poll that wrote: at least every POLL_MS while busy
            self.quiet_since_ns = recv_ns
            self.last_recv_ms = recv_ms

    def _record(self, record: ResultRecord, recv_ms: int) -> bool:
        """Account one record; False for a readiness probe's (msg_id <= 0), which is left out."""
        result = parse_result(record.value)
        msg_id = result.msg_id
        if msg_id is not None and msg_id <= 0:
            self.probe_records += 1
            return False
        line = received_line(result, recv_ms, record.partition, record.offset, broker_ms(record))
        self.output.write(line)
        if self.tally.record(msg_id) and msg_id is not None:
            self.times.first_delivery(msg_id, recv_ms)
        return True

    def _load_produced(self, now_ns: int) -> None:
        acked: list[int] = []
        note = self.times.produced
        for msg_id, intended_ms, is_acked in self.produced.read(PRODUCED_LINES_PER_POLL):
            note(msg_id, intended_ms, is_acked)
            if is_acked:
                acked.append(msg_id)
        self.tally.add_acked(acked)
        if self.produced.done:
            self.tally.finish_producer()
            self.producer_done_ns = now_ns
            self.produced_summary = self.produced.summary()
            # Give late duplicates quiet_s after the producer is known to be done.
            self.quiet_since_ns = max(self.quiet_since_ns, now_ns)

    def summary(self, stop: Stop) -> dict[str, Any]:
        last_sample = self.samples[-1].line() if self.samples else None
        done_ns = self.producer_done_ns
        return {
            "topic": self.settings.topic,
            "partitions": sorted(self.partitions),
            **self.tally.counts(),
            "missing_ids": self.tally.missing_ids(MISSING_IDS_SHOWN),
            "probe_records": self.probe_records,
            "producer_finished": self.tally.producer_finished,
            "produced_lines": self.produced.lines,
            "stop_reason": stop.reason,
            "incomplete_reason": stop.incomplete_reason,
            "error": self.error,
            "start_ms": self.started_ns // NS_PER_MS,
            "end_ms": self.clock.now_ns() // NS_PER_MS,
            "wall_clock_moved_ms": self.clock.wall_moved_ns() / NS_PER_MS,
            "last_recv_ms": self.last_recv_ms,
            "producer_done_ms": done_ns // NS_PER_MS if done_ns is not None else None,
            "quiet_s": self.settings.quiet_s,
            "timeout_s": self.settings.timeout_s,
            "drain_timeout_s": self.settings.drain_timeout_s,
            "lost_wait_s": self.settings.lost_wait_s,
            "input_topic": self.settings.input_topic,
            "group": self.settings.group,
            "sample_interval_s": self.settings.sample_interval_s,
            "lag_samples": len(self.samples),
            "lag_sample_errors": self.sample_errors,
            "last_lag_sample": last_sample,
            **steady_figures(
                self.times,
                self.settings.warmup_s,
                self.produced_summary,
                self.samples,
                self.settings.overload_until_s,
            ),
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
    sampling: Sampling | None = None,
    lag_out: Path | None = None,
) -> dict[str, Any]:
    """Collect into out (and lag samples into lag_out), publish them under their final names
    and write the summary: on every way out, an exception included."""
    output = AtomicOutput(out)
    lag_output = AtomicOutput(lag_out) if lag_out is not None else None
    collector = Collector(
        consumer,
        settings,
        output,
        ProducedFile(produced),
        clock,
        progress,
        stop,
        sampling,
        lag_output,
    )
    decision = Stop("error")
    summary: dict[str, Any] = {}
    try:
        try:
            decision = collector.run()
        except Exception as error:  # recorded in the summary, which is still written
            collector.error = f"{type(error).__name__}: {error}"
    finally:
        collector.sampling.close()
        collector.take_samples()  # the last ones, taken while the loop ended
        _close_quietly(consumer.close, collector)
        output.commit()
        if lag_output is not None:
            lag_output.commit()
        progress.close(collector.tally.received, collector.status())
        summary = collector.summary(decision) | {"client": client or {}}
        write_json(summary_path(out), summary)
    return summary


def _close_quietly(close: Callable[[], None], collector: Collector) -> None:
    try:
        close()
    except Exception as error:  # the results are complete: note it, do not lose them
        collector.error = collector.error or f"closing the consumer: {error!r}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m producer.collect",
        description="Record every record of the result topic until the run has drained.",
    )
    parser.add_argument("--bootstrap", required=True, type=arguments.bootstrap_servers)
    arguments.add_kafka_config(parser)
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
    parser.add_argument(
        "--input-topic",
        help="the job's input topic: sample its offsets (and the result topic's) into lag.jsonl",
    )
    parser.add_argument(
        "--group",
        help="the job's consumer group on --input-topic: complete only once it committed the end",
    )
    parser.add_argument(
        "--lag-out",
        type=arguments.new_output_file,
        help="DIR/lag.jsonl (new; default: lag.jsonl beside --out when --input-topic is given)",
    )
    parser.add_argument("--sample-interval-s", type=arguments.positive_seconds, default=1.0)
    parser.add_argument("--quiet-s", type=arguments.seconds, default=10.0)
    parser.add_argument(
        "--drain-timeout-s",
        type=arguments.positive_seconds,
        default=300.0,
        help="give up this long after the producer finished (default: 300)",
    )
    parser.add_argument(
        "--lost-wait-s",
        type=arguments.seconds,
        default=20.0,
        help="once the group has committed the whole input, wait this long without a record "
        "for acknowledged ids still missing, then end complete and count them lost (default: 20)",
    )
    parser.add_argument(
        "--warmup-s",
        type=arguments.seconds,
        default=10.0,
        help="leave the first messages' latencies out of the steady-state figures (default: 10)",
    )
    parser.add_argument(
        "--timeout-s",
        type=arguments.positive_seconds,
        default=600.0,
        help="give up this long after the start, whatever happens (default: 600)",
    )
    parser.add_argument(
        "--overload-until-s",
        type=arguments.seconds,
        default=None,
        help="end the overload flag's window this many seconds after message 1 was due (the "
        "producer's start_ms), e.g. at the first fault",
    )
    parser.add_argument(
        "--ready-file",
        type=arguments.new_output_file,
        help="write this file (the epoch ms, in one rename) once the consumer is open, before "
        "the first poll: what a caller waits for before it lets the producer start",
    )
    parser.add_argument("--progress-interval", type=arguments.positive_seconds, default=2.0)
    parser.add_argument(
        "--isolation-level",
        choices=["read_uncommitted", "read_committed"],
        default="read_uncommitted",
        help="read_committed hides aborted transactional writes (default: read_uncommitted)",
    )
    args = parser.parse_args(argv)
    for option in ("topic", "input_topic", "group"):
        value = getattr(args, option)
        if value is not None and not value.strip():
            parser.error(f"argument --{option.replace('_', '-')}: must not be empty")
    if args.input_topic is None:
        for option in ("group", "lag_out"):
            if getattr(args, option) is not None:
                parser.error(f"argument --{option.replace('_', '-')}: needs --input-topic")
    elif args.lag_out is None:
        args.lag_out = args.out.with_name("lag.jsonl")
        problem = new_output_problem(args.lag_out)
        if problem is not None:
            parser.error(f"argument --lag-out: {problem}")
    if not args.produced.parent.is_dir():
        parser.error(
            f"argument --produced: directory {args.produced.parent} does not exist; "
            "it must be the directory the producer writes to"
        )
    return args


def exit_code(summary: dict[str, Any], stop: StopSignals) -> int:
    if stop.received:
        return stop.exit_code
    reason = summary["stop_reason"]
    if reason == "complete":
        return EXIT_COMPLETE
    return EXIT_INCOMPLETE if reason in INCOMPLETE_REASONS else EXIT_ERROR


def open_sampling(args: argparse.Namespace, clock: Clock) -> Sampling:
    """Lag sampling on its own thread with its own clients, when there is an input topic."""
    if args.input_topic is None:
        return NoSampling()
    from producer.offsets import REQUEST_TIMEOUT_MS, KafkaOffsets

    bootstrap, security, isolation = args.bootstrap, args.kafka_security, args.isolation_level
    sampler = LagSampler(
        lambda: KafkaOffsets(bootstrap, security, isolation),
        args.input_topic,
        args.topic,
        args.group,
        clock,
    )
    return ThreadedSampling(sampler, args.sample_interval_s, REQUEST_TIMEOUT_MS / 1000 + 1)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = CollectSettings(
        args.topic,
        args.quiet_s,
        args.timeout_s,
        args.drain_timeout_s,
        args.warmup_s,
        args.input_topic,
        args.group,
        args.sample_interval_s,
        args.overload_until_s,
        args.lost_wait_s,
    )
    try:
        consumer = kafka_clients.open_consumer(
            args.bootstrap, args.isolation_level, args.kafka_security
        )
    except kafka_clients.StartupError as error:
        print(f"collect: {error}", file=sys.stderr)
        return EXIT_ERROR
    progress = Progress("collect", None, args.progress_interval)
    client = kafka_clients.describe_consumer(args.isolation_level, args.kafka_security)
    clock = SystemClock()
    with StopSignals() as stop:
        sampling = open_sampling(args, clock)
        if args.ready_file is not None:
            say_ready(args.ready_file, clock)
        summary = run_collector(
            consumer,
            settings,
            args.out,
            args.produced,
            clock,
            progress,
            stop,
            client,
            sampling,
            args.lag_out,
        )
    print(json.dumps(summary, indent=2))
    return exit_code(summary, stop)


if __name__ == "__main__":
    sys.exit(main())
