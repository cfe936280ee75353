"""The collector with lag samples: drain on committed offsets, probe records, broker_ms,
lag.jsonl, steady-state figures, and a summary on every way out."""

from __future__ import annotations

import io
import itertools
import json
import random

import pytest
from kafka.consumer.fetcher import ConsumerRecord
from kafka.structs import TopicPartition
from test_collector import TOPIC, FakeConsumer, result
from test_lagsampler import FakeOffsets

from producer import collect
from producer.clock import SimulatedClock
from producer.collect import CollectSettings, run_collector
from producer.lagsampler import InlineSampling, LagSampler
from producer.progress import Progress
from producer.signals import StopSignals

MS = 1_000_000
SECOND = 1_000_000_000
GROUP = "job-group"


class LogAppendConsumer(FakeConsumer):
    """Records carry the broker's LogAppendTime: the clock when they were polled, minus 3 ms."""

    def poll(self, timeout_ms):
        batches = super().poll(timeout_ms)
        stamp = self.clock.now_ns() // MS - 3
        return {
            tp: [
                ConsumerRecord(*record[:4], stamp, 1, *record[6:])
                if record.partition != 2
                else record  # partition 2's records keep CreateTime: no broker_ms
                for record in records
            ]
            for tp, records in batches.items()
        }


class DrainingOffsets(FakeOffsets):
    """The input topic ends at `ends`; the group commits everything at commit_at_ns, before
    that only `early` (partition -> offset)."""

    def __init__(self, clock, ends, commit_at_ns, early):
        super().__init__()
        self.clock = clock
        self.topics = {"in": list(range(len(ends))), TOPIC: [0, 1, 2]}
        self.ends = {"in": list(ends), TOPIC: [0, 0, 0]}
        self.commit_at_ns = commit_at_ns
        self.early = early

    def committed(self, group, topic, partitions):
        assert (group, topic) == (GROUP, "in")
        if self.clock.now_ns() >= self.commit_at_ns:
            return [self.ends["in"][p] for p in partitions]
        return [self.early.get(p) for p in partitions]


def write_produced_shuffled(directory, start_ms, acked, rate_ms=10, summary=None):
    """produced.jsonl in the order outcomes arrived (shuffled), and its summary."""
    lines = [
        {
            "msg_id": i,
            "intended_ms": start_ms + (i - 1) * rate_ms,
            "sent_ms": start_ms,
            "acked": True,
        }
        for i in acked
    ]
    random.Random(1).shuffle(lines)
    (directory / "produced.summary.json").write_text(json.dumps(summary or {}))
    (directory / "produced.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def run(tmp_path, consumer, clock, source, quiet_s=1.0, drain_timeout_s=300.0, warmup_s=0.0):
    settings = CollectSettings(
        TOPIC,
        quiet_s,
        600.0,
        drain_timeout_s=drain_timeout_s,
        warmup_s=warmup_s,
        input_topic="in",
        group=GROUP,
    )
    sampling = InlineSampling(LagSampler(lambda: source, "in", TOPIC, GROUP, clock), 1.0)
    stop = StopSignals()
    summary = run_collector(
        consumer,
        settings,
        tmp_path / "received.jsonl",
        tmp_path / "produced.jsonl",
        clock,
        Progress("collect", None, 2.0, stream=io.StringIO(), tty=False),
        stop,
        sampling=sampling,
        lag_out=tmp_path / "lag.jsonl",
    )
    rows = [json.loads(line) for line in (tmp_path / "received.jsonl").read_text().splitlines()]
    lag = [json.loads(line) for line in (tmp_path / "lag.jsonl").read_text().splitlines()]
    return summary, rows, lag, stop


def test_the_run_completes_only_once_the_group_committed_the_whole_input(tmp_path):
    clock = SimulatedClock()
    start_ms = clock.now_ns() // MS
    commit_at_ns = clock.now_ns() + 8 * SECOND
    source = DrainingOffsets(clock, ends=(3, 2, 2), commit_at_ns=commit_at_ns, early={0: 1, 1: 2})
    summary_of_producer = {"end_ms": start_ms + 300, "rate": 100.0, "send_lag_ms": {"p50": 0.2}}
    steps = [
        (20, [(0, result(-1)), (1, result(-2))], None),  # the readiness probes' answers
        (30, [(0, result(1)), (1, result(2)), (2, result(3))], None),
        (
            40,
            [(0, result(4)), (1, result(5)), (2, result(6)), (0, result(4))],
            lambda: write_produced_shuffled(
                tmp_path, start_ms, range(1, 7), summary=summary_of_producer
            ),
        ),
    ]
    consumer = LogAppendConsumer(clock, steps)
    summary, rows, lag, stop = run(tmp_path, consumer, clock, source)

    # Every acked id was in after 90 ms and quiet_s is 1 s, but the group had committed only
    # part of the input until 8 s: the run ends at the first sample after that.
    assert summary["stop_reason"] == "complete" and summary["incomplete_reason"] is None
    assert 8000 <= summary["end_ms"] - summary["start_ms"] <= 8100 + collect.POLL_MS
    assert collect.exit_code(summary, stop) == collect.EXIT_COMPLETE
    # Probe records are counted apart, never written or counted as messages.
    assert summary["probe_records"] == 2
    assert [row["msg_id"] for row in rows] == [1, 2, 3, 4, 4, 5, 6]  # a poll is per partition
    assert (summary["received"], summary["unique"], summary["duplicates"]) == (7, 6, 1)
    assert (summary["acked"], summary["missing"], summary["unacked_received"]) == (6, 0, 0)
    # broker_ms: the LogAppendTime of the record; null for CreateTime records (partition 2).
    for row, ret in zip(rows, [consumer.returns[1]] * 3 + [consumer.returns[2]] * 4, strict=True):
        expected = None if row["partition"] == 2 else ret // MS - 3
        assert row["broker_ms"] == expected
    # One lag line a second (at the first check after it is due, polls last 100 ms); the
    # committed offsets reach the end in the last one.
    gaps = [later["t_ms"] - earlier["t_ms"] for earlier, later in itertools.pairwise(lag)]
    assert len(lag) == 9 and all(1000 <= gap <= 1000 + collect.POLL_MS for gap in gaps)
    assert lag[0]["committed"] == [1, 2, None] and lag[0]["lag"] is None
    assert lag[-1] | {"t_ms": 0} == {
        "t_ms": 0,
        "input_end": [3, 2, 2],
        "committed": [3, 2, 2],
        "result_end": [0, 0, 0],
        "input_end_total": 7,
        "committed_total": 7,
        "lag": 0,
        "result_end_total": 0,
        "backlog": 7,
    }
    assert summary["lag_samples"] == 9 and summary["last_lag_sample"] == lag[-1]
    # Latency: first recv_ms - intended_ms of each acked id (warm-up 0 here).
    first_recv = {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 2}
    latencies = sorted(
        consumer.returns[first_recv[i]] // MS - (start_ms + (i - 1) * 10) for i in range(1, 7)
    )
    assert summary["latency_ms"] | {"mean": None} == {
        "warmup_s": 0.0,
        "messages": 6,
        "p50": latencies[2],
        "p90": latencies[5],
        "p99": latencies[5],
        "p99.9": latencies[5],
        "max": latencies[5],
        "mean": None,
        "steady_start_ms": start_ms,
    }
    assert summary["send_lag_ms"] == {"p50": 0.2}
    assert summary["overload"]["overloaded"] is None  # the window holds 1 sample
    for name in ("received.jsonl", "lag.jsonl"):
        assert not (tmp_path / (name + ".part")).exists()


def test_a_group_that_never_catches_up_ends_at_the_drain_timeout_with_the_reason(tmp_path):
    clock = SimulatedClock()
    start_ms = clock.now_ns() // MS
    source = DrainingOffsets(clock, ends=(1, 1, 2), commit_at_ns=2**62, early={0: 1, 1: 1, 2: 1})
    steps = [
        (
            10,
            [(0, result(1)), (1, result(2)), (2, result(3))],
            lambda: write_produced_shuffled(tmp_path, start_ms, [1, 2, 3, 4]),
        )
    ]
    summary, _, lag, stop = run(
        tmp_path, FakeConsumer(clock, steps), clock, source, drain_timeout_s=5
    )
    assert summary["stop_reason"] == "drain_timeout"
    assert summary["incomplete_reason"] == (
        f"1 acknowledged id never arrived; group {GROUP} has committed 1 record short of the "
        "end of in on partitions [2]"
    )
    assert 5000 <= summary["end_ms"] - summary["producer_done_ms"] < 5000 + collect.POLL_MS
    assert summary["missing_ids"] == [4]
    assert collect.exit_code(summary, stop) == collect.EXIT_INCOMPLETE
    assert len(lag) == 6


def test_received_lines_are_on_disk_after_each_poll(tmp_path):
    clock = SimulatedClock()
    part = tmp_path / "received.jsonl.part"
    seen = []

    def look():
        seen.append(len(part.read_text().splitlines()))

    steps = [(10, [(0, result(i))], look) for i in range(1, 6)]
    source = DrainingOffsets(clock, ends=(0, 0, 0), commit_at_ns=0, early={})
    run(tmp_path, FakeConsumer(clock, steps), clock, source, drain_timeout_s=1)
    # At each poll, the lines of every earlier poll (about 10 ms earlier) are on disk.
    assert seen == [0, 1, 2, 3, 4]


def test_an_exception_still_leaves_complete_files_and_a_summary(tmp_path):
    clock = SimulatedClock()

    class Broken(FakeConsumer):
        def poll(self, timeout_ms):
            if len(self.timeouts) == 2:
                raise OSError("connection reset")
            return super().poll(timeout_ms)

    steps = [(10, [(0, result(1))], None), (10, [(0, result(2))], None)]
    source = DrainingOffsets(clock, ends=(0, 0, 0), commit_at_ns=0, early={})
    summary, rows, lag, stop = run(tmp_path, Broken(clock, steps), clock, source)
    assert summary["stop_reason"] == "error"
    assert summary["error"] == "OSError: connection reset"
    assert [row["msg_id"] for row in rows] == [1, 2]
    assert json.loads((tmp_path / "received.summary.json").read_text()) == summary
    assert collect.exit_code(summary, stop) == collect.EXIT_ERROR
    assert len(lag) == 1


def collect_args(tmp_path, *extra):
    return [
        *("--bootstrap", "127.0.0.1:9092", "--topic", TOPIC),
        *("--out", str(tmp_path / "received.jsonl")),
        *("--produced", str(tmp_path / "produced.jsonl")),
        *extra,
    ]


def test_new_options_and_their_defaults(tmp_path):
    args = collect.parse_args(collect_args(tmp_path, "--input-topic", "in", "--group", "g"))
    assert (args.input_topic, args.group, args.lag_out) == ("in", "g", tmp_path / "lag.jsonl")
    assert (args.sample_interval_s, args.drain_timeout_s, args.warmup_s, args.timeout_s) == (
        1.0,
        300.0,
        10.0,
        600.0,
    )
    plain = collect.parse_args(collect_args(tmp_path))
    assert (plain.input_topic, plain.group, plain.lag_out) == (None, None, None)
    assert plain.overload_until_s is None
    # A fault at 0 s (fault_at_s=0 is allowed) ends the overload window at message 1.
    at_once = collect.parse_args(collect_args(tmp_path, "--overload-until-s", "0"))
    assert at_once.overload_until_s == 0.0


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--group", "g"], "argument --group: needs --input-topic"),
        (["--lag-out", "LAG"], "argument --lag-out: needs --input-topic"),
        (["--input-topic", " "], "argument --input-topic: must not be empty"),
        (["--input-topic", "in", "--sample-interval-s", "0"], "must be a number of seconds > 0"),
        (["--drain-timeout-s", "-5"], "argument --drain-timeout-s: must be a number of seconds"),
        (["--warmup-s", "soon"], "argument --warmup-s: must be a number of seconds >= 0"),
        (["--overload-until-s", "-1"], "argument --overload-until-s: must be a number of seconds"),
    ],
)
def test_bad_new_options_are_refused(tmp_path, capsys, extra, message):
    extra = [str(tmp_path / "lag.jsonl") if item == "LAG" else item for item in extra]
    with pytest.raises(SystemExit) as exit_info:
        collect.parse_args(collect_args(tmp_path, *extra))
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_an_existing_lag_file_is_never_overwritten(tmp_path, capsys):
    (tmp_path / "lag.jsonl").write_text("earlier\n")
    with pytest.raises(SystemExit):
        collect.parse_args(collect_args(tmp_path, "--input-topic", "in"))
    assert "lag.jsonl already exists" in capsys.readouterr().err


def test_assign_reads_every_partition_from_the_beginning():
    clock = SimulatedClock()
    consumer = FakeConsumer(clock, [])
    collect.assign_from_beginning(consumer, TOPIC, {2, 0})
    assert consumer.assigned == [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 2)]
