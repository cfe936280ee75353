"""Accounting of received results against produced input: pure, no Kafka."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from producer.idset import IdSet


class Tally:
    """Counts what arrived and what is still missing.

    received = unique + duplicates + malformed. While the producer runs, missing means ids
    in 1..max_seen not seen yet; once its acked ids are loaded (add_acked, then
    finish_producer), missing means acked ids not seen yet.
    """

    def __init__(self) -> None:
        self.received = 0
        self.malformed = 0
        self.duplicates = 0
        self.max_seen = 0
        self.producer_finished = False
        self._seen = IdSet()
        self._positive_seen = 0
        self._acked = IdSet()
        self._acked_missing = 0

    def record(self, msg_id: int | None) -> bool:
        """Count one received record (msg_id None: malformed); True if its id is new."""
        self.received += 1
        if msg_id is None:
            self.malformed += 1
            return False
        if not self._seen.add(msg_id):
            self.duplicates += 1
            return False
        if msg_id > 0:
            self._positive_seen += 1
            self.max_seen = max(self.max_seen, msg_id)
        if msg_id in self._acked:
            self._acked_missing -= 1
        return True

    def add_acked(self, msg_ids: Iterable[int]) -> None:
        """Ids the broker acknowledged to the producer (may come in several parts)."""
        for msg_id in msg_ids:
            if self._acked.add(msg_id) and msg_id not in self._seen:
                self._acked_missing += 1

    def finish_producer(self) -> None:
        """Every acked id has been added: missing is now measured against them."""
        self.producer_finished = True

    @property
    def unique(self) -> int:
        return len(self._seen)

    @property
    def acked(self) -> int | None:
        return len(self._acked) if self.producer_finished else None

    @property
    def missing(self) -> int:
        if self.producer_finished:
            return self._acked_missing
        return self.max_seen - self._positive_seen

    def missing_ids(self, limit: int) -> list[int]:
        """The first `limit` missing ids, ascending."""
        return list(islice(self._iter_missing(), limit))

    def _iter_missing(self) -> Iterator[int]:
        expected: Iterable[int] = (
            self._acked if self.producer_finished else range(1, self.max_seen + 1)
        )
        return (msg_id for msg_id in expected if msg_id not in self._seen)

    def unacked_received(self) -> int | None:
        """Distinct ids received that the producer did not see acked (ack lost, or foreign)."""
        if not self.producer_finished:
            return None
        return self.unique - (len(self._acked) - self._acked_missing)

    def counts(self) -> dict[str, Any]:
        return {
            "received": self.received,
            "unique": self.unique,
            "duplicates": self.duplicates,
            "malformed": self.malformed,
            "acked": self.acked,
            "missing": self.missing,
            "unacked_received": self.unacked_received(),
        }
