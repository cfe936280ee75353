"""Per-message delivery record: when each message was handed to Kafka and whether it was acked."""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterator
from typing import Any

from producer.clock import NS_PER_MS
from producer.schedule import Schedule

PENDING, ACKED, FAILED = 0, 1, 2
UNRESOLVED_ERROR = "no acknowledgement before the producer closed"


class DeliveryLog:
    """Send times and outcomes of messages 1..count, compact enough for tens of millions.

    on_ack/on_error are Kafka future callbacks: they run on the client's I/O thread. The
    live counters are for progress display; final numbers come from the status bytes.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.sent = 0
        self.acked_live = 0
        self.failed_live = 0
        self._sent_ns = array("q", [0]) * (count + 1)
        self._status = bytearray(count + 1)
        self._errors: dict[int, str] = {}

    def record_send(self, msg_id: int, sent_ns: int) -> None:
        """Message msg_id was handed to send() at sent_ns; messages are sent in msg_id order."""
        self._sent_ns[msg_id] = sent_ns
        self.sent = msg_id

    def on_ack(self, msg_id: int, _metadata: Any) -> None:
        self._status[msg_id] = ACKED
        self.acked_live += 1

    def on_error(self, msg_id: int, error: BaseException) -> None:
        self._status[msg_id] = FAILED
        self._errors[msg_id] = f"{type(error).__name__}: {error}"
        self.failed_live += 1

    def sent_ns(self, msg_id: int) -> int:
        return self._sent_ns[msg_id]

    def acked(self, msg_id: int) -> bool:
        return self._status[msg_id] == ACKED

    def error(self, msg_id: int) -> str | None:
        """Why msg_id was not acked, or None when it was."""
        if self._status[msg_id] == ACKED:
            return None
        return self._errors.get(msg_id, UNRESOLVED_ERROR)

    def acked_count(self) -> int:
        """Acked messages among those sent (exact, unlike the live counter)."""
        return self._status.count(ACKED, 1, self.sent + 1)

    def first_error(self) -> str | None:
        return self._errors[min(self._errors)] if self._errors else None


def produced_lines(log: DeliveryLog, schedule: Schedule) -> Iterator[str]:
    """produced.jsonl: one compact JSON object per sent message, in msg_id order.

    Formatted by hand (all fields are integers and booleans, the error text goes through
    json.dumps): tens of millions of lines must be written before the collector can finish.
    """
    for msg_id in range(1, log.sent + 1):
        intended_ms = schedule.slot_ns(msg_id) // NS_PER_MS
        sent_ms = log.sent_ns(msg_id) // NS_PER_MS
        head = f'{{"msg_id":{msg_id},"intended_ms":{intended_ms},"sent_ms":{sent_ms},"acked":'
        error = log.error(msg_id)
        if error is None:
            yield head + "true}\n"
        else:
            yield head + f'false,"error":{json.dumps(error)}}}\n'
