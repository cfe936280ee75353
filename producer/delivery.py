"""Per-message delivery record: when each message was handed to Kafka and whether it was acked."""

from __future__ import annotations

import json
from array import array
from collections import deque
from collections.abc import Iterator
from typing import Any

from producer.clock import NS_PER_MS
from producer.schedule import Schedule

PENDING, ACKED, FAILED = 0, 1, 2
UNRESOLVED_ERROR = "no acknowledgement before the producer closed"


class DeliveryLog:
    """Send times and outcomes of messages 1..count, compact enough for tens of millions.

    on_ack/on_error are Kafka future callbacks: they run on the client's I/O thread, so they
    do O(1) work only: note the outcome and append the id to `resolved`, from which the main
    thread writes produced.jsonl lines. The live counters are for progress display; final
    numbers come from the status bytes.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.sent = 0
        self.acked_live = 0
        self.failed_live = 0
        self._sent_ns = array("q", [0]) * (count + 1)
        self._status = bytearray(count + 1)
        # The input partition Kafka acknowledged each message in (-1: unknown), so the analysis
        # can see one partition's outage while the others flow.
        self._partition = array("i", [-1]) * (count + 1)
        self._errors: dict[int, str] = {}
        # Ids whose outcome arrived, in arrival order (deque appends are thread-safe).
        self.resolved: deque[int] = deque()

    def record_send(self, msg_id: int, sent_ns: int) -> None:
        """Message msg_id was handed to send() at sent_ns; messages are sent in msg_id order."""
        self._sent_ns[msg_id] = sent_ns
        self.sent = msg_id

    def on_ack(self, msg_id: int, metadata: Any) -> None:
        partition = getattr(metadata, "partition", None)
        if isinstance(partition, int):
            self._partition[msg_id] = partition
        self._status[msg_id] = ACKED
        self.acked_live += 1
        self.resolved.append(msg_id)

    def on_error(self, msg_id: int, error: BaseException) -> None:
        self._errors[msg_id] = f"{type(error).__name__}: {error}"
        self._status[msg_id] = FAILED
        self.failed_live += 1
        self.resolved.append(msg_id)

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

    def take_resolved_lines(self, schedule: Schedule) -> list[str]:
        """produced.jsonl lines of the messages resolved since the last call, in arrival order.

        Runs on the main thread while callbacks may append: takes only what was there when it
        started. The hot path of the writer, hence the locals and the inlined line format.
        """
        resolved = self.resolved
        popleft, status, sent_ns = resolved.popleft, self._status, self._sent_ns
        partitions = self._partition
        slot_ns = schedule.slot_ns
        lines: list[str] = []
        append = lines.append
        for _ in range(len(resolved)):
            msg_id = popleft()
            if status[msg_id] == ACKED:
                partition = partitions[msg_id]
                where = f',"partition":{partition}' if partition >= 0 else ""
                append(
                    f'{{"msg_id":{msg_id},"intended_ms":{slot_ns(msg_id) // NS_PER_MS},'
                    f'"sent_ms":{sent_ns[msg_id] // NS_PER_MS},"acked":true{where}}}\n'
                )
            else:
                intended_ms = slot_ns(msg_id) // NS_PER_MS
                error = self.error(msg_id)
                append(produced_line(msg_id, intended_ms, sent_ns[msg_id] // NS_PER_MS, error))
        return lines

    def unresolved(self) -> Iterator[int]:
        """Sent ids with no outcome yet, ascending."""
        position = self._status.find(PENDING, 1, self.sent + 1)
        while position != -1:
            yield position
            position = self._status.find(PENDING, position + 1, self.sent + 1)


def produced_line(
    msg_id: int, intended_ms: int, sent_ms: int, error: str | None, partition: int | None = None
) -> str:
    """One produced.jsonl line: a compact JSON object; partition only on an acknowledged one.

    Formatted by hand (all fields are integers and booleans, the error text goes through
    json.dumps): the producer writes one per message while it sends tens of thousands a second.
    """
    head = f'{{"msg_id":{msg_id},"intended_ms":{intended_ms},"sent_ms":{sent_ms},"acked":'
    if error is None:
        where = f',"partition":{partition}' if partition is not None and partition >= 0 else ""
        return head + f"true{where}}}\n"
    return head + f'false,"error":{json.dumps(error)}}}\n'
