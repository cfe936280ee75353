"""Clocks in epoch nanoseconds: the system clock for runs, a simulated one for tests."""

from __future__ import annotations

import time
from typing import Protocol

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


class Clock(Protocol):
    """What the producer and collector need from time."""

    def now_ns(self) -> int:
        """Current time in epoch nanoseconds."""
        ...

    def sleep_until(self, deadline_ns: int) -> None:
        """Return at or after deadline_ns (at once if it has passed)."""
        ...

    def wall_moved_ns(self) -> int:
        """How far the wall clock has moved against this clock since it was anchored: 0, to
        within a few ms, unless the wall clock was stepped meanwhile (NTP, a VM's clock set from
        its host)."""
        ...


class SystemClock:
    """Epoch time that never jumps: anchored to the wall clock once, then advanced monotonically.

    A wall-clock step (NTP) during a run would otherwise distort pacing and this tool's own
    intervals; wall_moved_ns says how far the wall clock moved against it meanwhile.
    """

    def __init__(self) -> None:
        self._epoch_ns = time.time_ns()
        self._mono_ns = time.monotonic_ns()

    def now_ns(self) -> int:
        return self._epoch_ns + time.monotonic_ns() - self._mono_ns

    def wall_moved_ns(self) -> int:
        # Other hosts' timestamps (the engine's, a fault's) are wall-clock ones: comparing them
        # with this clock's is off by this much.
        return time.time_ns() - self.now_ns()

    def sleep_until(self, deadline_ns: int) -> None:
        # Plain sleep, no spinning: a spin steals the CPU Kafka's I/O thread and the brokers
        # need, and an overshoot costs nothing lasting, because slots are absolute and a late
        # message is sent at once (its lag is recorded).
        remaining = deadline_ns - self.now_ns()
        if remaining > 0:
            time.sleep(remaining / NS_PER_S)


class SimulatedClock:
    """A clock that moves only when slept on or advanced: deterministic tests and dry runs."""

    def __init__(self, start_ns: int = 1_734_258_123_000_000_000) -> None:
        self._now_ns = start_ns
        self._wall_moved_ns = 0

    def wall_moved_ns(self) -> int:
        return self._wall_moved_ns

    def step_wall(self, ns: int) -> None:
        """Step the simulated wall clock by ns against this clock (as NTP would)."""
        self._wall_moved_ns += ns

    def now_ns(self) -> int:
        return self._now_ns

    def sleep_until(self, deadline_ns: int) -> None:
        self._now_ns = max(self._now_ns, deadline_ns)

    def advance(self, ns: int) -> None:
        """Let ns nanoseconds pass (work that takes time)."""
        if ns < 0:
            raise ValueError(f"a clock cannot go back ({ns} ns)")
        self._now_ns += ns
