"""The send schedule: slot i at start + (i - 1) / rate, in exact integer nanoseconds."""

from __future__ import annotations

from fractions import Fraction

from producer.clock import NS_PER_S


def exact_rate(rate: float | int | str | Fraction) -> Fraction:
    """The rate as an exact fraction: 2.5 -> 5/2, "0.1" -> 1/10 (not the nearest binary float)."""
    value = rate if isinstance(rate, Fraction) else Fraction(str(rate))
    if value <= 0:
        raise ValueError(f"rate must be > 0 messages per second, got {rate}")
    return value


class Schedule:
    """Intended send times of messages 1, 2, ... at a fixed rate, without cumulative drift.

    Each slot is computed from the start on its own (floor of an exact fraction), so slot
    1,000,001 at rate 3 is exactly 333,333.333333333 s after slot 1, never off by the sum of
    a million rounding errors.
    """

    def __init__(self, start_ns: int, rate: float | int | str | Fraction) -> None:
        self.start_ns = start_ns
        self.rate = exact_rate(rate)
        # slot offset = (i - 1) * NS_PER_S / rate = (i - 1) * _ns_numerator // _ns_denominator
        self._ns_numerator = NS_PER_S * self.rate.denominator
        self._ns_denominator = self.rate.numerator

    def slot_ns(self, msg_id: int) -> int:
        """Intended send time of message msg_id (1-based) in epoch nanoseconds."""
        return self.start_ns + (msg_id - 1) * self._ns_numerator // self._ns_denominator
