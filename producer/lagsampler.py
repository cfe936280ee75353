"""Lag samples: the input topic's end offsets, the job's committed offsets and the result
topic's end offsets, read together every interval on a thread of their own.

Pure sample arithmetic (LagSample), one sampler over an injected OffsetSource, and two ways to
run it: on a background thread (runs), or inline when due (tests on a simulated clock).
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from producer.clock import NS_PER_MS, NS_PER_S, Clock


class OffsetSource(Protocol):
    """Offsets as Kafka reports them (see offsets.py for the kafka-python one)."""

    def partitions(self, topic: str) -> list[int]:
        """The topic's partitions, ascending; [] if the topic is not known (yet)."""
        ...

    def committed(self, group: str, topic: str, partitions: Sequence[int]) -> list[int | None]:
        """The group's committed offset of each partition, None where it has none."""
        ...

    def end_offsets(self, topics: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
        """The end offset (offset of the next record) of each partition of each topic."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class LagSample:
    """One reading; lists are indexed like `partitions` (partition numbers, ascending)."""

    t_ms: int
    partitions: tuple[int, ...] = ()
    input_end: tuple[int, ...] = ()
    committed: tuple[int | None, ...] = ()
    result_end: tuple[int, ...] = ()
    error: str | None = None

    @property
    def input_end_total(self) -> int:
        return sum(self.input_end)

    @property
    def committed_total(self) -> int | None:
        if not self.committed or any(offset is None for offset in self.committed):
            return None
        return sum(offset for offset in self.committed if offset is not None)

    @property
    def lag(self) -> int | None:
        committed = self.committed_total
        return None if committed is None else self.input_end_total - committed

    @property
    def result_end_total(self) -> int:
        return sum(self.result_end)

    @property
    def backlog(self) -> int:
        """Input records not (yet) matched by a result record: input_end - result_end."""
        return self.input_end_total - self.result_end_total

    def short_of_end(self) -> dict[int, int | None]:
        """Partition -> records its committed offset is short of its end (None: none committed)."""
        short: dict[int, int | None] = {}
        for index, partition in enumerate(self.partitions):  # no zip(strict=): Python 3.9
            end, committed = self.input_end[index], self.committed[index]
            if committed is None:
                short[partition] = None
            elif committed < end:
                short[partition] = end - committed
        return short

    @classmethod
    def from_line(cls, line: Mapping[str, Any]) -> LagSample:
        """A sample back from its lag.jsonl object (the inverse of line())."""
        if line.get("error") is not None:
            return cls(int(line["t_ms"]), error=str(line["error"]))
        return cls(
            int(line["t_ms"]),
            tuple(range(len(line["input_end"]))),
            tuple(line["input_end"]),
            tuple(line["committed"]),
            tuple(line["result_end"]),
        )

    def line(self) -> dict[str, Any]:
        """The lag.jsonl object."""
        if self.error is not None:
            return {"t_ms": self.t_ms, "error": self.error}
        return {
            "t_ms": self.t_ms,
            "input_end": list(self.input_end),
            "committed": list(self.committed),
            "result_end": list(self.result_end),
            "input_end_total": self.input_end_total,
            "committed_total": self.committed_total,
            "lag": self.lag,
            "result_end_total": self.result_end_total,
            "backlog": self.backlog,
        }


class LagSampler:
    """Takes samples through an OffsetSource it connects lazily, and afresh after any failure."""

    def __init__(
        self,
        connect: Callable[[], OffsetSource],
        input_topic: str,
        result_topic: str,
        group: str | None,
        clock: Clock,
    ) -> None:
        self._connect = connect
        self.input_topic = input_topic
        self.result_topic = result_topic
        self.group = group
        self.clock = clock
        self._source: OffsetSource | None = None
        self._partitions: dict[str, list[int]] = {}

    def sample(self) -> LagSample:
        """Committed offsets first, then both topics' ends in one request: a committed offset
        at or past the end it is compared with really covers that end. Never raises."""
        t_ms = self.clock.now_ns() // NS_PER_MS
        try:
            if self._source is None:
                self._source = self._connect()
            inputs = self._topic_partitions(self._source, self.input_topic)
            results = self._topic_partitions(self._source, self.result_topic)
            committed: list[int | None] = [None] * len(inputs)
            if self.group is not None:
                committed = self._source.committed(self.group, self.input_topic, inputs)
            ends = self._source.end_offsets({self.input_topic: inputs, self.result_topic: results})
            return LagSample(
                t_ms,
                tuple(inputs),
                tuple(ends[self.input_topic]),
                tuple(committed),
                tuple(ends[self.result_topic]),
            )
        except Exception as error:  # a failed sample is recorded, and sampling goes on
            # with fresh clients: kafka-python caches a group's coordinator and never forgets
            # it, so after a NotCoordinatorError the same client would ask the same broker
            # until the run's drain timed out (seen in CI after a redeploy).
            self.close_quietly()
            return LagSample(t_ms, error=f"{type(error).__name__}: {error}")

    def _topic_partitions(self, source: OffsetSource, topic: str) -> list[int]:
        if topic not in self._partitions:
            partitions = source.partitions(topic)
            if not partitions:
                raise LookupError(f"topic {topic!r} has no partitions (yet)")
            self._partitions[topic] = partitions
        return self._partitions[topic]

    def close(self) -> None:
        if self._source is not None:
            source, self._source = self._source, None
            source.close()

    def close_quietly(self) -> None:
        """Drop the clients after a failure; an error while closing them changes nothing
        (close() lets go of them first, and the sample's own error is the one reported)."""
        with contextlib.suppress(Exception):
            self.close()


class Sampling(Protocol):
    """Samples taken since the last take(); close() stops sampling."""

    def take(self) -> list[LagSample]: ...

    def close(self) -> None: ...


class NoSampling:
    """No input topic given: nothing to sample."""

    def take(self) -> list[LagSample]:
        return []

    def close(self) -> None:
        return None


class InlineSampling:
    """Takes a sample on the caller's thread whenever take() finds one due (simulated clocks)."""

    def __init__(self, sampler: LagSampler, interval_s: float) -> None:
        self.sampler = sampler
        self.interval_ns = int(interval_s * NS_PER_S)
        self._due_ns = sampler.clock.now_ns()

    def take(self) -> list[LagSample]:
        now_ns = self.sampler.clock.now_ns()
        if now_ns < self._due_ns:
            return []
        self._due_ns = max(self._due_ns + self.interval_ns, now_ns)
        return [self.sampler.sample()]

    def close(self) -> None:
        self.sampler.close()


class ThreadedSampling:
    """Samples every interval on a daemon thread: a slow or unreachable broker delays the
    samples, never the poll loop (and with it the recv_ms of results)."""

    def __init__(self, sampler: LagSampler, interval_s: float, join_s: float) -> None:
        self.sampler = sampler
        self.interval_ns = int(interval_s * NS_PER_S)
        self.join_s = join_s
        self._samples: deque[LagSample] = deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        clock = self.sampler.clock
        due_ns = clock.now_ns()
        try:
            while not self._stop.is_set():
                self._samples.append(self.sampler.sample())
                # The next slot; slots missed during a slow sample are skipped, not bunched.
                due_ns = max(due_ns + self.interval_ns, clock.now_ns())
                self._stop.wait((due_ns - clock.now_ns()) / NS_PER_S)
        finally:
            self.sampler.close()

    def take(self) -> list[LagSample]:
        samples = []
        while self._samples:
            samples.append(self._samples.popleft())
        return samples

    def close(self) -> None:
        """Stop; a sample still waiting on Kafka is left to its own timeout (daemon thread)."""
        self._stop.set()
        self._thread.join(self.join_s)
