"""Lag samples: the lag.jsonl line, failures as error lines, and sampling off the poll thread."""

from __future__ import annotations

import json
import threading
import time

import pytest

from producer.clock import SimulatedClock, SystemClock
from producer.lagsampler import InlineSampling, LagSample, LagSampler, ThreadedSampling

SECOND = 1_000_000_000


class FakeOffsets:
    """An OffsetSource whose offsets are set by the test; `calls` records the order of reads."""

    def __init__(self, inputs=(0, 1, 2), results=(0, 1), delay_s=0.0):
        self.topics = {"in": list(inputs), "out": list(results)}
        self.ends = {"in": [0] * len(inputs), "out": [0] * len(results)}
        self.commits = {}
        self.calls = []
        self.fail = None
        self.delay_s = delay_s
        self.closed = False

    def partitions(self, topic):
        return self.topics.get(topic, [])

    def committed(self, group, topic, partitions):
        self.calls.append("committed")
        if self.fail:
            raise self.fail
        return [self.commits.get(p) for p in partitions]

    def end_offsets(self, topics):
        self.calls.append("end_offsets")
        time.sleep(self.delay_s)
        return {topic: list(self.ends[topic]) for topic in topics}

    def close(self):
        self.closed = True


def test_a_sample_line_has_per_partition_offsets_and_totals():
    source = FakeOffsets()
    source.ends = {"in": [100, 120, 80], "out": [150, 130]}
    source.commits = {0: 90, 1: 120, 2: 60}
    clock = SimulatedClock()
    sampler = LagSampler(lambda: source, "in", "out", "g", clock)
    line = sampler.sample().line()
    assert line == {
        "t_ms": clock.now_ns() // 1_000_000,
        "input_end": [100, 120, 80],
        "committed": [90, 120, 60],
        "result_end": [150, 130],
        "input_end_total": 300,
        "committed_total": 270,
        "lag": 30,
        "result_end_total": 280,
        "backlog": 20,
    }
    # Committed offsets are read before the ends they are compared with.
    assert source.calls == ["committed", "end_offsets"]


def test_a_partition_without_a_commit_leaves_the_totals_null():
    source = FakeOffsets()
    source.ends = {"in": [5, 5, 5], "out": [3, 3]}
    source.commits = {0: 5, 2: 5}
    sample = LagSampler(lambda: source, "in", "out", "g", SimulatedClock()).sample()
    assert sample.committed == (5, None, 5)
    assert (sample.committed_total, sample.lag, sample.backlog) == (None, None, 9)
    assert sample.short_of_end() == {1: None}
    no_group = LagSampler(lambda: source, "in", "out", None, SimulatedClock()).sample()
    assert no_group.line()["committed"] == [None, None, None] and no_group.lag is None


def test_failures_become_error_lines_and_sampling_recovers():
    source = FakeOffsets()
    connects = []

    def connect():
        connects.append(1)
        if len(connects) == 1:
            raise ConnectionError("no broker")
        return source

    clock = SimulatedClock()
    sampler = LagSampler(connect, "in", "out", "g", clock)
    first = sampler.sample()
    assert first.line() == {
        "t_ms": clock.now_ns() // 1_000_000,
        "error": "ConnectionError: no broker",
    }
    source.fail = TimeoutError("coordinator")
    assert sampler.sample().error == "TimeoutError: coordinator"
    # The failed clients are closed; the next sample connects afresh (stale coordinator).
    assert source.closed and len(connects) == 2
    source.fail, source.closed = None, False
    assert sampler.sample().error is None and len(connects) == 3
    missing = LagSampler(lambda: FakeOffsets(results=()), "in", "out", None, clock).sample()
    assert missing.error == "LookupError: topic 'out' has no partitions (yet)"
    sampler.close()
    assert source.closed


def test_inline_sampling_takes_one_sample_per_interval_on_the_clock():
    clock = SimulatedClock()
    sampling = InlineSampling(LagSampler(FakeOffsets, "in", "out", "g", clock), 1.0)
    taken = []
    for _ in range(25):  # 2.5 s in steps of 0.1 s
        taken += sampling.take()
        clock.advance(SECOND // 10)
    assert [s.t_ms - taken[0].t_ms for s in taken] == [0, 1000, 2000]


@pytest.mark.realtime  # the caller never waits 50 ms, on the wall clock
def test_threaded_sampling_never_blocks_the_caller_on_a_slow_broker():
    source = FakeOffsets(delay_s=0.4)  # each sample takes 0.4 s
    sampling = ThreadedSampling(
        LagSampler(lambda: source, "in", "out", "g", SystemClock()), 0.1, join_s=2
    )
    try:
        waits = []
        taken = []
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            started = time.monotonic()
            taken += sampling.take()
            waits.append(time.monotonic() - started)
            time.sleep(0.01)
        assert max(waits) < 0.05
        assert 1 <= len(taken) <= 3  # slow samples are late, not bunched up afterwards
    finally:
        sampling.close()
    assert source.closed
    assert not any(t.name == "lag-sampler" and t.is_alive() for t in threading.enumerate())


def test_lag_sample_error_line_has_only_time_and_error():
    assert LagSample(5, error="x").line() == {"t_ms": 5, "error": "x"}


def test_a_sample_comes_back_from_its_lag_jsonl_line():
    sample = LagSample(1000, (0, 1), (10, 20), (5, None), (8, 19))
    again = LagSample.from_line(json.loads(json.dumps(sample.line())))
    assert again.line() == sample.line() and again.backlog == 3
    failed = LagSample(2000, error="KafkaTimeoutError: late")
    assert LagSample.from_line(failed.line()) == failed
