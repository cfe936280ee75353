"""The experiment's input messages: reproducible sensor readings stamped with their slot."""

from __future__ import annotations

import random
import time

from producer.clock import NS_PER_MS, NS_PER_S

TEMPERATURE_RANGE = (20.0, 35.0)
HUMIDITY_RANGE = (30.0, 80.0)


class SensorMessages:
    """Builds message n from the n-th reading of random.Random(seed): same seed, same content.

    Call encode() in msg_id order; the readings do not depend on the rate or on timing.
    """

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)
        self._cached_second: int | None = None
        self._cached_second_text = ""

    def next_reading(self) -> tuple[float, float]:
        """The next (temperature, humidity) pair, rounded to 2 decimals."""
        temperature = round(self._random.uniform(*TEMPERATURE_RANGE), 2)
        humidity = round(self._random.uniform(*HUMIDITY_RANGE), 2)
        return temperature, humidity

    def encode(self, msg_id: int, intended_ns: int) -> bytes:
        """Kafka value of message msg_id, whose slot is intended_ns (messages have no key)."""
        temperature, humidity = self.next_reading()
        intended_ms = intended_ns // NS_PER_MS
        # Formatted by hand: json.dumps costs several times more, and this runs 20,000 times a
        # second. Floats use repr(), as json does; the timestamp text needs no escaping.
        value = (
            f'{{"msg_id":{msg_id},"content":{{"temperature":{temperature!r},'
            f'"humidity":{humidity!r},"timestamp":{intended_ns // NS_PER_S}}},'
            f'"timestamp":"{self.local_time_text(intended_ms)}","sent_ms":{intended_ms}}}'
        )
        return value.encode()

    def local_time_text(self, epoch_ms: int) -> str:
        """Local time as 'YYYY-MM-DD HH:MM:SS.mmm' (the seconds part is formatted once a second)."""
        second, millis = divmod(epoch_ms, 1000)
        if second != self._cached_second:
            self._cached_second = second
            self._cached_second_text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        return f"{self._cached_second_text}.{millis:03d}"
