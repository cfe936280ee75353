"""produced.jsonl.part grows as outcomes arrive: batches, timing, the final flush, the end."""

from __future__ import annotations

import json
import os
import threading
import time
from fractions import Fraction

import pytest
from kafka.future import Future
from test_producer import FakeSender, quiet_progress

from producer import files
from producer.clock import SimulatedClock
from producer.delivery import UNRESOLVED_ERROR, DeliveryLog, produced_line
from producer.outcomes import WRITE_INTERVAL_NS, ProducedWriter
from producer.produce import ProduceSettings, run_producer
from producer.schedule import Schedule
from producer.signals import StopSignals

MS = 1_000_000
SECOND = 1_000_000_000


class LaggingSender(FakeSender):
    """Acks each message `delay_ns` after its send(), as a broker would (on the simulated
    clock: resolved at the next send() that finds it due, or at flush)."""

    def __init__(self, clock, delay_ns, **options):
        super().__init__(clock, **options)
        self.delay_ns = delay_ns
        self.acked_at = {}  # msg_id -> clock when its callback ran

    def send(self, topic, value):
        self._resolve_due()
        future = super().send(topic, value)
        self.pending[-1] = (*self.pending[-1], self.clock.now_ns())
        return future

    def _resolve_due(self):
        now = self.clock.now_ns()
        while self.pending and self.pending[0][3] + self.delay_ns <= now:
            future, _, msg_id, _ = self.pending.pop(0)
            future.success({"offset": msg_id})
            self.acked_at[msg_id] = now

    def flush(self, timeout=None):
        for future, _, msg_id, _ in self.pending:
            future.success({"offset": msg_id})
            self.acked_at[msg_id] = self.clock.now_ns()
        self.pending = []
        self.flushed = True


@pytest.fixture
def writes(monkeypatch):
    """Every OS write() to a result file: (bytes, clock reading or None)."""
    seen = []
    real_write = os.write

    def spy(fd, data):
        seen.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(files.os, "write", spy)
    return seen


def rows_of(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_lines_reach_the_part_file_within_an_interval_of_their_ack(tmp_path, writes):
    clock = SimulatedClock()
    sender = LaggingSender(clock, delay_ns=30 * MS)
    out = tmp_path / "produced.jsonl"
    snapshots = []  # (clock, ids on disk, ids acked by then)

    def look(msg_id):
        if msg_id % 50 == 0:
            on_disk = {row["msg_id"] for row in rows_of(tmp_path / "produced.jsonl.part")}
            snapshots.append((clock.now_ns(), on_disk, dict(sender.acked_at)))

    sender.on_send = look
    settings = ProduceSettings("in", 1000, Fraction(1000), 1)  # 1 s of sending
    run_producer(settings, sender, out, clock, quiet_progress(), StopSignals())

    assert len(snapshots) == 20
    for now, on_disk, acked_at in snapshots:
        settled = {i for i, at in acked_at.items() if at <= now - WRITE_INTERVAL_NS}
        assert settled <= on_disk, f"acked over 200 ms ago but not on disk at {now}"
        assert on_disk <= set(acked_at)
    # One write() per batch of whole lines, about one batch per interval (5 in 1 s) + the end.
    assert all(chunk.endswith(b"\n") for chunk in writes[:-1])
    assert 5 <= len(writes) <= 8
    rows = rows_of(out)
    assert sorted(row["msg_id"] for row in rows) == list(range(1, 1001))
    assert all(row["acked"] for row in rows)


def test_lines_are_written_while_the_producer_waits_for_a_slow_slot(tmp_path):
    clock = SimulatedClock()
    start = clock.now_ns()
    part = tmp_path / "produced.jsonl.part"
    seen = {}

    def look(msg_id):  # message 2 goes 10 s after message 1, which was acked at once
        seen[msg_id] = (clock.now_ns() - start, part.read_text())

    sender = FakeSender(clock, outcome=lambda i: "ack-at-once", on_send=look)
    settings = ProduceSettings("in", 2, Fraction("0.1"), 1)
    run_producer(
        settings, sender, tmp_path / "produced.jsonl", clock, quiet_progress(), StopSignals()
    )
    assert seen[1] == (0, "")
    elapsed, text = seen[2]
    assert elapsed == 10 * SECOND
    assert [json.loads(line)["msg_id"] for line in text.splitlines()] == [1]


@pytest.mark.realtime  # a real 0.6 s flush
def test_a_long_final_flush_does_not_hold_lines_back(tmp_path):
    clock = SimulatedClock()
    part = tmp_path / "produced.jsonl.part"
    on_disk_during_flush = []

    class SlowFlush(FakeSender):
        def flush(self, timeout=None):
            # The broker acks half at once, the rest 0.6 s (real time) later.
            half = len(self.pending) // 2
            for future, _, msg_id in self.pending[:half]:
                future.success({"offset": msg_id})
            time.sleep(0.6)
            on_disk_during_flush.append(len(part.read_text().splitlines()))
            for future, _, msg_id in self.pending[half:]:
                future.success({"offset": msg_id})
            self.flushed = True

    sender = SlowFlush(clock)
    settings = ProduceSettings("in", 100, Fraction(1000), 1)
    summary = run_producer(
        settings, sender, tmp_path / "produced.jsonl", clock, quiet_progress(), StopSignals()
    )
    assert on_disk_during_flush == [50]
    assert summary["acked"] == 100 and len(rows_of(tmp_path / "produced.jsonl")) == 100


def test_a_flush_that_fails_still_raises_on_the_main_thread(tmp_path):
    class BrokenFlush(FakeSender):
        def flush(self, timeout=None):
            raise RuntimeError("flush broke")

    clock = SimulatedClock()
    settings = ProduceSettings("in", 5, Fraction(100), 1)
    with pytest.raises(RuntimeError, match="flush broke"):
        run_producer(
            settings,
            BrokenFlush(clock),
            tmp_path / "produced.jsonl",
            clock,
            quiet_progress(),
            StopSignals(),
        )
    assert not (tmp_path / "produced.jsonl").exists()


def test_a_producer_that_dies_leaves_the_lines_written_so_far(tmp_path):
    class Dies(BaseException):  # not a refused send(): the process is going down
        pass

    clock = SimulatedClock()

    def die_at_500(msg_id):
        if msg_id == 500:
            raise Dies

    sender = LaggingSender(clock, delay_ns=10 * MS, on_send=die_at_500)
    settings = ProduceSettings("in", 1000, Fraction(1000), 1)
    with pytest.raises(Dies):
        run_producer(
            settings, sender, tmp_path / "produced.jsonl", clock, quiet_progress(), StopSignals()
        )
    assert not (tmp_path / "produced.jsonl").exists()
    rows = rows_of(tmp_path / "produced.jsonl.part")
    # Everything acked up to the last interval is there (the finally's flush added the rest).
    assert {row["msg_id"] for row in rows} == set(range(1, 500))


def test_the_summary_is_written_before_produced_jsonl_appears(tmp_path, monkeypatch):
    renames = []
    real_replace = os.replace

    def spy(source, target):
        renames.append((os.path.basename(target), (tmp_path / "produced.summary.json").exists()))
        real_replace(source, target)

    monkeypatch.setattr(files.os, "replace", spy)
    clock = SimulatedClock()
    settings = ProduceSettings("in", 10, Fraction(100), 1)
    run_producer(
        settings,
        FakeSender(clock),
        tmp_path / "produced.jsonl",
        clock,
        quiet_progress(),
        StopSignals(),
    )
    assert renames == [("produced.summary.json", False), ("produced.jsonl", True)]


def test_callbacks_only_queue_ids_and_the_writer_formats_them_on_its_thread(tmp_path):
    clock = SimulatedClock()
    log = DeliveryLog(6)
    schedule = Schedule(clock.now_ns(), 10)
    for msg_id in range(1, 7):
        log.record_send(msg_id, schedule.slot_ns(msg_id) + msg_id * MS)
    writer = ProducedWriter(tmp_path / "produced.jsonl", log, schedule, clock)
    futures = {msg_id: Future() for msg_id in range(1, 7)}
    for msg_id, future in futures.items():
        future.add_callback(log.on_ack, msg_id)
        future.add_errback(log.on_error, msg_id)
    # Outcomes arrive on another thread, out of order; 6 never resolves.
    resolver = threading.Thread(
        target=lambda: [
            futures[4].success(None),
            futures[2].failure(TimeoutError("expired")),
            futures[1].success(None),
            futures[5].success(None),
            futures[3].success(None),
        ]
    )
    resolver.start()
    resolver.join()
    assert list(log.resolved) == [4, 2, 1, 5, 3]
    writer.write_resolved(clock.now_ns())
    assert writer.write_unresolved() == 1
    writer.commit()
    text = (tmp_path / "produced.jsonl").read_text()
    ms = [schedule.slot_ns(i) // MS for i in range(7)]
    expected = [
        produced_line(4, ms[4], ms[4] + 4, None),
        produced_line(2, ms[2], ms[2] + 2, "TimeoutError: expired"),
        produced_line(1, ms[1], ms[1] + 1, None),
        produced_line(5, ms[5], ms[5] + 5, None),
        produced_line(3, ms[3], ms[3] + 3, None),
        produced_line(6, ms[6], ms[6] + 6, UNRESOLVED_ERROR),
    ]
    assert text == "".join(expected)
    for line in text.splitlines():  # the hand-made format is compact JSON
        assert line == json.dumps(json.loads(line), separators=(",", ":"))


def test_an_acknowledged_line_names_the_partition_kafka_acknowledged_it_in(tmp_path):
    clock = SimulatedClock()
    log = DeliveryLog(3)
    schedule = Schedule(clock.now_ns(), 10)
    for msg_id in range(1, 4):
        log.record_send(msg_id, schedule.slot_ns(msg_id))

    class Metadata:
        def __init__(self, partition):
            self.partition = partition

    log.on_ack(1, Metadata(2))
    log.on_ack(2, None)  # a client that gives no metadata: the partition is left out
    log.on_error(3, TimeoutError("expired"))
    lines = [json.loads(line) for line in log.take_resolved_lines(schedule)]
    assert lines[0]["partition"] == 2
    assert "partition" not in lines[1] and "partition" not in lines[2]
    ms = schedule.slot_ns(1) // MS
    assert produced_line(1, ms, ms, None, 2) == (
        f'{{"msg_id":1,"intended_ms":{ms},"sent_ms":{ms},"acked":true,"partition":2}}\n'
    )
