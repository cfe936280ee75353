"""Reading the producer's produced.jsonl a piece at a time, in whatever order its lines are."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from producer.files import summary_path

# The line of an acked message exactly as the producer writes it (delivery.py): read without
# the JSON parser, which costs three times as much. Anything else goes through json.loads.
ACKED_LINE = re.compile(
    r'\{"msg_id":(\d+),"intended_ms":(\d+),"sent_ms":\d+,"acked":true(?:,"partition":\d+)?\}\n?'
)


class ProducedRow(NamedTuple):
    msg_id: int
    intended_ms: int | None
    acked: bool


class ProducedFile:
    """The producer's final produced.jsonl: it exists only once the producer is done.

    read() returns a bounded number of lines per call, so a collector can keep polling (and
    timestamping) results while a large file loads. Lines come in the order the producer
    learnt the outcomes, not by msg_id: nothing here depends on their order.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done = False
        self.lines = 0
        self._file: TextIO | None = None

    def available(self) -> bool:
        return self._file is not None or self.path.exists()

    def read(self, max_lines: int) -> list[ProducedRow]:
        """The next max_lines lines; sets done at the end of the file."""
        if self.done:
            return []
        if self._file is None:
            self._file = self.path.open(encoding="utf-8")
        rows: list[ProducedRow] = []
        for _ in range(max_lines):
            line = self._file.readline()
            if not line:
                self._file.close()
                self.done = True
                break
            self.lines += 1
            rows.append(self._row(line))
        return rows

    def read_acked(self, max_lines: int) -> list[int]:
        """Acked ids among the next max_lines lines; sets done at the end of the file."""
        return [row.msg_id for row in self.read(max_lines) if row.acked]

    def summary(self) -> dict[str, Any] | None:
        """produced.summary.json (written before produced.jsonl), or None if unreadable."""
        try:
            data = json.loads(summary_path(self.path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _row(self, line: str) -> ProducedRow:
        fast = ACKED_LINE.fullmatch(line)
        if fast is not None:
            return ProducedRow(int(fast[1]), int(fast[2]), True)
        try:
            row = json.loads(line)
            intended = row.get("intended_ms")
            return ProducedRow(
                int(row["msg_id"]),
                intended if isinstance(intended, int) else None,
                row["acked"] is True,
            )
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(
                f"{self.path}:{self.lines}: not a produced.jsonl line ({error}): {line[:120]!r}"
            ) from error
