"""A set of message ids that stays small for tens of millions of consecutive ids."""

from __future__ import annotations

from collections.abc import Iterator

# Ids 1..DENSE_LIMIT-1 take one byte each; anything else (0, negatives, huge) goes to a set.
DENSE_LIMIT = 1 << 27


class IdSet:
    """Like set[int], but ids 1..N cost one byte each instead of ~70."""

    def __init__(self) -> None:
        self._dense = bytearray()
        self._sparse: set[int] = set()
        self._size = 0

    def add(self, msg_id: int) -> bool:
        """Add msg_id; True if it was not there yet."""
        if 0 < msg_id < DENSE_LIMIT:
            if msg_id >= len(self._dense):
                self._grow(msg_id)
            if self._dense[msg_id]:
                return False
            self._dense[msg_id] = 1
        elif msg_id in self._sparse:
            return False
        else:
            self._sparse.add(msg_id)
        self._size += 1
        return True

    def __contains__(self, msg_id: object) -> bool:
        if isinstance(msg_id, int) and 0 < msg_id < len(self._dense):
            return bool(self._dense[msg_id])
        return msg_id in self._sparse

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[int]:
        """Ids in ascending order."""
        yield from sorted(i for i in self._sparse if i < 1)
        position = self._dense.find(1)
        while position != -1:
            yield position
            position = self._dense.find(1, position + 1)
        yield from sorted(i for i in self._sparse if i >= DENSE_LIMIT)

    def _grow(self, msg_id: int) -> None:
        size = min(DENSE_LIMIT, max(msg_id + 1, 2 * len(self._dense), 1024))
        self._dense.extend(bytes(size - len(self._dense)))
