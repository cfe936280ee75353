"""Collector: accounting, record parsing, stop rule, and received.jsonl on a scripted consumer."""

from __future__ import annotations

import io
import json
import signal

import pytest
from kafka.consumer.fetcher import ConsumerRecord
from kafka.structs import TopicPartition

from producer import collect
from producer.clock import SimulatedClock
from producer.collect import CollectSettings, run_collector
from producer.drain import DrainSettings, DrainView, Stop, decide
from producer.idset import DENSE_LIMIT, IdSet
from producer.produced_file import ProducedFile
from producer.progress import Progress
from producer.results import RAW_LIMIT, ResultValue, parse_result
from producer.signals import StopSignals
from producer.tally import Tally

MS = 1_000_000
SECOND = 1_000_000_000
TOPIC = "results"
RECEIVED_FIELDS = ["msg_id", "recv_ms", "partition", "offset", "processed_ms", "broker_ms"]


def result(msg_id, processed_ms=None):
    value = {"msg_id": msg_id, "avg_temperature": 27.5}
    if processed_ms is not None:
        value["processed_ms"] = processed_ms
    return json.dumps(value).encode()


class FakeConsumer:
    """Mimics KafkaConsumer with real kafka-python ConsumerRecords, following a script.

    Each step is (poll duration in ms, [(partition, value), ...], hook or None); offsets
    count up per partition. Once the script is done, polls wait out their timeout empty.
    """

    def __init__(self, clock, steps, partitions=(0, 1, 2), topic_after_lookups=0):
        self.clock = clock
        self.steps = list(steps)
        self.partitions = set(partitions)
        self.topic_after_lookups = topic_after_lookups
        self.lookups = 0
        self.assigned = self.sought = None
        self.next_offset = dict.fromkeys(partitions, 0)
        self.returns = []  # clock at each poll return that delivered records
        self.timeouts = []
        self.closed = False

    def partitions_for_topic(self, topic):
        assert topic == TOPIC
        self.lookups += 1
        return set(self.partitions) if self.lookups > self.topic_after_lookups else set()

    def assign(self, partitions):
        self.assigned = list(partitions)

    def seek_to_beginning(self, *partitions):
        self.sought = list(partitions)

    def poll(self, timeout_ms):
        assert self.assigned and self.sought == self.assigned, "poll before assign + seek"
        self.timeouts.append(timeout_ms)
        if not self.steps:
            self.clock.advance(timeout_ms * MS)
            return {}
        duration_ms, values, hook = self.steps.pop(0)
        self.clock.advance(duration_ms * MS)
        if hook is not None:
            hook()
        batches = {}
        for partition, value in values:
            offset = self.next_offset[partition]
            self.next_offset[partition] += 1
            record = ConsumerRecord(
                TOPIC, partition, 0, offset, 0, 0, None, value, [], None, -1, len(value), -1
            )
            batches.setdefault(TopicPartition(TOPIC, partition), []).append(record)
        if batches:
            self.returns.append(self.clock.now_ns())
        return batches

    def close(self):
        self.closed = True


def write_produced(path, acked, failed=()):
    lines = [
        {"msg_id": i, "intended_ms": 1000 + i, "sent_ms": 1000 + i, "acked": i in acked}
        | ({} if i in acked else {"error": "KafkaTimeoutError: expired"})
        for i in sorted(set(acked) | set(failed))
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def collect_run(
    tmp_path, consumer, clock, quiet_s=5.0, timeout_s=60.0, stop=None, lost_wait_s=20.0
):
    stop = stop or StopSignals()
    progress = Progress("collect", None, 2.0, stream=io.StringIO(), tty=False)
    summary = run_collector(
        consumer,
        CollectSettings(TOPIC, quiet_s, timeout_s, lost_wait_s=lost_wait_s),
        tmp_path / "received.jsonl",
        tmp_path / "produced.jsonl",
        clock,
        progress,
        stop,
    )
    lines = (tmp_path / "received.jsonl").read_text().splitlines()
    return summary, [json.loads(line) for line in lines], stop


# --- accounting -------------------------------------------------------------------------


def test_tally_counts_duplicates_gaps_malformed_and_late_arrivals_exactly():
    tally = Tally()
    for msg_id in [1, 2, 2, 4, None, 5, 5, 5, 9, 6]:
        tally.record(msg_id)
    # Producer still running: missing = ids up to the highest seen that have not arrived.
    assert tally.counts() == {
        "received": 10,
        "unique": 6,
        "duplicates": 3,
        "malformed": 1,
        "acked": None,
        "missing": 3,
        "unacked_received": None,
    }
    assert tally.missing_ids(10) == [3, 7, 8]
    # The producer's acks come in two parts; 7 and 10 were never acked, 6 arrived anyway.
    tally.add_acked([1, 2, 3, 4, 5])
    tally.record(3)  # arrives while the acked ids are loading
    tally.add_acked([8, 9, 11, 12])
    tally.finish_producer()
    assert (tally.acked, tally.missing, tally.missing_ids(10)) == (9, 3, [8, 11, 12])
    assert tally.unacked_received() == 1  # id 6
    for late in [11, 12, 12, None, 8, 0]:
        tally.record(late)
    assert tally.counts() == {
        "received": 17,
        "unique": 11,
        "duplicates": 4,
        "malformed": 2,
        "acked": 9,
        "missing": 0,
        "unacked_received": 2,  # 6 and 0
    }
    assert tally.missing_ids(10) == []
    assert tally.received == tally.unique + tally.duplicates + tally.malformed


def test_tally_missing_ids_are_listed_in_order_and_limited():
    tally = Tally()
    tally.add_acked(range(1, 1001))
    tally.finish_producer()
    for msg_id in range(1, 1001, 2):
        tally.record(msg_id)
    assert tally.missing == 500
    assert tally.missing_ids(50) == list(range(2, 101, 2))


def test_id_set_keeps_consecutive_ids_compact_and_odd_ones_apart():
    ids = IdSet()
    assert [ids.add(i) for i in (3, 1, 3, 0, -7, DENSE_LIMIT, 2**40, 2**40)] == [
        True,
        True,
        False,
        True,
        True,
        True,
        True,
        False,
    ]
    assert len(ids) == 6
    assert list(ids) == [-7, 0, 1, 3, DENSE_LIMIT, 2**40]
    assert 3 in ids and 2 not in ids and 2**40 in ids and 5_000 not in ids
    jump = IdSet()
    assert jump.add(1) and jump.add(100_000) and jump.add(50_000) and not jump.add(100_000)
    assert list(jump) == [1, 50_000, 100_000]
    big = IdSet()
    for i in range(1, 2_000_001):
        big.add(i)
    assert len(big) == 2_000_000 and 2_000_000 in big and 2_000_001 not in big


# --- result records ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,expected",
    [
        (b'{"msg_id": 12, "processed_ms": 1734258123999}', ResultValue(12, 1734258123999)),
        (b'{"msg_id": 12, "processed_ms": 1734258123999.7}', ResultValue(12, 1734258123999)),
        (b'{"msg_id": 12, "content": {"temperature": 20.5}}', ResultValue(12, None)),
        (b'{"msg_id": 12, "processed_ms": "soon"}', ResultValue(12, None)),
        (b'{"msg_id": 12, "processed_ms": NaN}', ResultValue(12, None)),
        (b"not json", ResultValue(None, None, "not json")),
        (b"[1, 2]", ResultValue(None, None, "[1, 2]")),
        (b'{"id": 12}', ResultValue(None, None, '{"id": 12}')),
        (b'{"msg_id": "12"}', ResultValue(None, None, '{"msg_id": "12"}')),
        (b'{"msg_id": true}', ResultValue(None, None, '{"msg_id": true}')),
        (b"\xff\xfe{", ResultValue(None, None, "\ufffd\ufffd{")),
        (None, ResultValue(None, None, "")),
    ],
)
def test_result_values_are_parsed_or_kept_as_malformed(value, expected):
    assert parse_result(value) == expected


def test_a_long_malformed_value_is_truncated():
    assert parse_result(b"x" * 5000).raw == "x" * RAW_LIMIT


# --- stop rule (without a consumer group: the rule before lag samples) --------------------


def view(done_s=None, quiet_since_s=0, missing=0):
    done_ns = None if done_s is None else done_s * SECOND
    return DrainView(0, done_ns, quiet_since_s * SECOND, missing)


@pytest.mark.parametrize(
    "state,now_s,expected",
    [
        (view(done_s=5, quiet_since_s=10), 20, Stop("complete")),
        (view(done_s=5, quiet_since_s=10), 19.9, None),  # quiet for 9.9 s only
        (view(done_s=5, quiet_since_s=10, missing=1), 20, None),  # an acked id has not arrived
        (view(quiet_since_s=0), 20, None),  # producer still running
        (
            view(done_s=590, quiet_since_s=590, missing=1),
            600,
            Stop("timeout", "1 acknowledged id never arrived"),
        ),
        (
            view(quiet_since_s=599),
            600,
            Stop("timeout", "the producer never finished (produced.jsonl did not appear)"),
        ),
        # Missing ids keep an otherwise complete run open for lost_wait_s (20 s) of quiet only.
        (view(done_s=5, quiet_since_s=10, missing=2), 29.9, None),
        (view(done_s=5, quiet_since_s=10, missing=2), 30, Stop("complete")),
        (
            view(done_s=5, quiet_since_s=304, missing=2),
            305,
            Stop(
                "drain_timeout",
                "2 acknowledged ids never arrived; records were still arriving "
                "(1.0 s without one, quiet_s is 10 s)",
            ),
        ),
    ],
)
def test_stop_rule(state, now_s, expected):
    settings = DrainSettings(quiet_s=10, timeout_s=600, drain_timeout_s=300)
    assert decide(state, int(now_s * SECOND), settings) == expected


# --- the collector on a scripted consumer -----------------------------------------------


def test_collector_records_everything_and_stops_once_all_acked_ids_arrived(tmp_path):
    clock = SimulatedClock()
    start_ns = clock.now_ns()
    produced = tmp_path / "produced.jsonl"
    acked = [i for i in range(1, 11) if i != 7]
    steps = [
        (50, [(0, result(1, 111)), (0, result(2)), (1, result(3)), (2, b"garbage")], None),
        (80, [(0, result(2)), (0, result(4)), (1, result(5))], None),
        (20, [(2, result(7))], lambda: write_produced(produced, acked, failed=[7])),
        (900, [(1, result(6)), (2, result(8)), (0, result(9))], None),  # late arrivals
        (10, [(1, result(10)), (1, result(10))], None),
    ]
    consumer = FakeConsumer(clock, steps, topic_after_lookups=2)
    summary, rows, _ = collect_run(tmp_path, consumer, clock, quiet_s=5)

    assert consumer.lookups == 3 and consumer.closed
    assert consumer.assigned == consumer.sought == [TopicPartition(TOPIC, p) for p in (0, 1, 2)]
    # Every record is in received.jsonl, in arrival order, stamped with its poll's return.
    per_poll = [4, 3, 1, 3, 2]
    recv_ms = [
        ret // MS for ret, n in zip(consumer.returns, per_poll, strict=True) for _ in range(n)
    ]
    assert [row["recv_ms"] for row in rows] == recv_ms
    assert recv_ms[0] == (start_ns + 2 * SECOND + 50 * MS) // MS  # after two topic lookups
    assert [row["msg_id"] for row in rows] == [1, 2, 3, None, 2, 4, 5, 7, 6, 8, 9, 10, 10]
    assert [(row["partition"], row["offset"]) for row in rows[:5]] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (2, 0),
        (0, 2),
    ]
    assert all(list(row) == RECEIVED_FIELDS for row in rows if row["msg_id"] is not None)
    assert rows[3] == {
        "msg_id": None,
        "recv_ms": recv_ms[3],
        "partition": 2,
        "offset": 0,
        "processed_ms": None,
        "broker_ms": None,  # the fake's records carry CreateTime 0, not a broker timestamp
        "raw": "garbage",
    }
    assert rows[0]["processed_ms"] == 111 and rows[1]["processed_ms"] is None

    assert summary["stop_reason"] == "complete"
    assert {key: summary[key] for key in ("received", "unique", "duplicates", "malformed")} == {
        "received": 13,
        "unique": 10,
        "duplicates": 2,
        "malformed": 1,
    }
    assert (summary["acked"], summary["missing"], summary["missing_ids"]) == (9, 0, [])
    assert summary["unacked_received"] == 1 and summary["produced_lines"] == 10
    # It waited quiet_s after the last record, and not much longer.
    assert summary["last_recv_ms"] == recv_ms[-1]
    assert 5000 <= summary["end_ms"] - summary["last_recv_ms"] <= 5100
    assert summary["wall_clock_moved_ms"] == 0.0  # the simulated wall clock was never stepped
    assert json.loads((tmp_path / "received.summary.json").read_text()) == summary
    assert not (tmp_path / "received.jsonl.part").exists()
    assert collect.exit_code(summary, StopSignals()) == collect.EXIT_COMPLETE


def test_collector_times_out_and_reports_what_is_missing(tmp_path):
    clock = SimulatedClock()
    produced = tmp_path / "produced.jsonl"
    steps = [
        (10, [(0, result(1)), (1, result(2))], lambda: write_produced(produced, [1, 2, 3, 4, 5])),
        (10, [(2, result(4))], None),
    ]
    summary, rows, stop = collect_run(
        tmp_path, FakeConsumer(clock, steps), clock, timeout_s=30, lost_wait_s=60
    )
    assert summary["stop_reason"] == "timeout"
    # Checked after every poll: it stops within one poll timeout of timeout_s.
    assert 30_000 <= summary["end_ms"] - summary["start_ms"] < 30_000 + collect.POLL_MS
    assert (summary["missing"], summary["missing_ids"]) == (2, [3, 5])
    assert len(rows) == 3
    assert collect.exit_code(summary, stop) == collect.EXIT_INCOMPLETE


def test_collector_waits_for_the_producer_however_complete_the_results_look(tmp_path):
    clock = SimulatedClock()
    steps = [(10, [(0, result(1)), (0, result(2))], None)]
    summary, _, _ = collect_run(tmp_path, FakeConsumer(clock, steps), clock, timeout_s=20)
    assert summary["stop_reason"] == "timeout"
    assert summary["producer_finished"] is False
    assert (summary["acked"], summary["missing"]) == (None, 0)


def test_an_empty_result_topic_completes_when_the_producer_had_nothing_acked(tmp_path):
    clock = SimulatedClock()
    write_produced(tmp_path / "produced.jsonl", acked=[], failed=[1, 2, 3])
    summary, rows, _ = collect_run(tmp_path, FakeConsumer(clock, []), clock, quiet_s=3)
    assert rows == []
    assert summary["stop_reason"] == "complete"
    assert (summary["received"], summary["acked"], summary["missing"]) == (0, 0, 0)
    # quiet_s counts from the moment the producer's file was read.
    assert 3000 <= summary["end_ms"] - summary["start_ms"] <= 3100


def test_quiet_s_also_counts_from_when_the_producer_finished(tmp_path):
    # Every result is in after 0.1 s, but the producer's file appears only at 4.1 s: the
    # collector still waits quiet_s after that, for duplicates the engine may yet write.
    clock = SimulatedClock()
    produced = tmp_path / "produced.jsonl"
    steps = [
        (100, [(0, result(1)), (1, result(2))], None),
        (4000, [], lambda: write_produced(produced, [1, 2])),
    ]
    summary, _, _ = collect_run(tmp_path, FakeConsumer(clock, steps), clock, quiet_s=3)
    assert summary["stop_reason"] == "complete"
    assert 7100 <= summary["end_ms"] - summary["start_ms"] <= 7200


def test_a_large_produced_file_is_loaded_in_pieces_while_polling_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(collect, "PRODUCED_LINES_PER_POLL", 2)
    clock = SimulatedClock()
    write_produced(tmp_path / "produced.jsonl", acked=[1, 2, 3, 4, 5, 6, 7])
    steps = [(1, [(0, result(i))], None) for i in (7, 1, 2, 3, 4, 5, 6)]
    consumer = FakeConsumer(clock, steps)
    summary, _, _ = collect_run(tmp_path, consumer, clock, quiet_s=1)
    # 7 lines at 2 a pass (the first pass looked the topic up): polls do not wait meanwhile.
    assert consumer.timeouts[:4] == [0, 0, 0, collect.POLL_MS]
    assert summary["stop_reason"] == "complete"
    assert (summary["acked"], summary["unique"], summary["missing"]) == (7, 7, 0)


def test_a_signal_stops_the_collector_with_its_files_complete(tmp_path):
    clock = SimulatedClock()
    stop = StopSignals()

    def sigterm():
        stop.received = signal.SIGTERM

    steps = [(10, [(0, result(1))], None), (10, [(0, result(2))], sigterm)]
    summary, rows, _ = collect_run(tmp_path, FakeConsumer(clock, steps), clock, stop=stop)
    assert summary["stop_reason"] == "SIGTERM"
    assert [row["msg_id"] for row in rows] == [1, 2]
    assert (tmp_path / "received.summary.json").exists()
    assert collect.exit_code(summary, stop) == 128 + signal.SIGTERM


def test_a_corrupt_produced_file_stops_with_an_error_naming_the_line(tmp_path):
    clock = SimulatedClock()
    (tmp_path / "produced.jsonl").write_text('{"msg_id": 1, "acked": true}\n{"msg_id": 2}\n')
    summary, _, stop = collect_run(tmp_path, FakeConsumer(clock, []), clock)
    assert summary["stop_reason"] == "error"
    assert f"{tmp_path / 'produced.jsonl'}:2: not a produced.jsonl line" in summary["error"]
    assert collect.exit_code(summary, stop) == collect.EXIT_ERROR


def test_produced_file_yields_only_acked_ids_and_counts_lines(tmp_path):
    path = tmp_path / "produced.jsonl"
    produced = ProducedFile(path)
    assert not produced.available()
    write_produced(path, acked=[1, 2, 4], failed=[3, 5])
    assert produced.available()
    assert produced.read_acked(3) == [1, 2] and not produced.done
    assert produced.read_acked(3) == [4] and produced.done
    assert produced.read_acked(3) == [] and produced.lines == 5


# --- command line -----------------------------------------------------------------------


def collect_args(tmp_path, **overrides):
    values = {
        "--bootstrap": "127.0.0.1:9092",
        "--topic": TOPIC,
        "--out": str(tmp_path / "received.jsonl"),
        "--produced": str(tmp_path / "produced.jsonl"),
    } | overrides
    return [item for pair in values.items() for item in pair]


@pytest.mark.parametrize(
    "override,message",
    [
        ({"--quiet-s": "-1"}, "argument --quiet-s: must be a number of seconds >= 0"),
        ({"--timeout-s": "0"}, "argument --timeout-s: must be a number of seconds > 0"),
        ({"--timeout-s": "inf"}, "argument --timeout-s: must be a number of seconds >= 0"),
        ({"--bootstrap": "h:port"}, "'h:port' is not HOST:PORT"),
        ({"--produced": "/nonexistent/dir/produced.jsonl"}, "directory /nonexistent/dir does not"),
        ({"--isolation-level": "dirty"}, "argument --isolation-level: invalid choice"),
    ],
)
def test_bad_collector_arguments_are_refused(tmp_path, capsys, override, message):
    with pytest.raises(SystemExit) as exit_info:
        collect.main(collect_args(tmp_path, **override))
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_collector_never_overwrites_an_earlier_result(tmp_path, capsys):
    (tmp_path / "received.summary.json").write_text("{}")
    with pytest.raises(SystemExit):
        collect.main(collect_args(tmp_path))
    assert "received.summary.json already exists" in capsys.readouterr().err


def test_the_ready_file_is_written_once_the_consumer_is_open_and_before_the_first_poll(
    tmp_path, monkeypatch, capsys
):
    ready = tmp_path / "collector.ready"
    seen_at_first_poll = []
    consumer = FakeConsumer(
        SimulatedClock(), [(1, [], lambda: seen_at_first_poll.append(ready.exists()))]
    )
    monkeypatch.setattr(collect.kafka_clients, "open_consumer", lambda *_: consumer)
    write_produced(tmp_path / "produced.jsonl", acked=[])
    arguments = collect_args(tmp_path, **{"--ready-file": str(ready), "--timeout-s": "0.5"})
    collect.main(arguments)
    assert seen_at_first_poll == [True]
    assert ready.read_text().strip().isdigit() and consumer.closed
    assert not (tmp_path / "collector.ready.part").exists()


def test_a_ready_file_left_by_an_earlier_run_is_refused(tmp_path, capsys):
    (tmp_path / "collector.ready").write_text("1\n")
    with pytest.raises(SystemExit) as exit_info:
        collect.main(collect_args(tmp_path, **{"--ready-file": str(tmp_path / "collector.ready")}))
    assert exit_info.value.code == 2
    assert "collector.ready already exists" in capsys.readouterr().err


def test_a_lossy_run_ends_complete_after_lost_wait_s_with_the_lost_ids_named(tmp_path):
    clock = SimulatedClock()
    produced = tmp_path / "produced.jsonl"
    steps = [
        (10, [(0, result(1)), (1, result(2))], lambda: write_produced(produced, [1, 2, 3, 4, 5])),
        (10, [(2, result(4))], None),
    ]
    summary, _, stop = collect_run(
        tmp_path, FakeConsumer(clock, steps), clock, timeout_s=600, lost_wait_s=15
    )
    assert summary["stop_reason"] == "complete"
    assert (summary["missing"], summary["missing_ids"]) == (2, [3, 5])
    # Ended lost_wait_s after the last record, not at the drain or absolute timeout.
    assert 15_000 <= summary["end_ms"] - summary["last_recv_ms"] < 15_000 + collect.POLL_MS
    assert summary["lost_wait_s"] == 15
    assert collect.exit_code(summary, stop) == collect.EXIT_COMPLETE
