"""Reading the producer's produced.jsonl a piece at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO


class ProducedFile:
    """The producer's final produced.jsonl: it exists only once the producer is done.

    read_acked() returns a bounded number of lines' worth of acked ids per call, so a
    collector can keep polling (and timestamping) results while a large file loads.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done = False
        self.lines = 0
        self._file: TextIO | None = None

    def available(self) -> bool:
        return self._file is not None or self.path.exists()

    def read_acked(self, max_lines: int) -> list[int]:
        """Acked ids among the next max_lines lines; sets done at the end of the file."""
        if self.done:
            return []
        if self._file is None:
            self._file = self.path.open(encoding="utf-8")
        acked: list[int] = []
        for _ in range(max_lines):
            line = self._file.readline()
            if not line:
                self._file.close()
                self.done = True
                break
            self.lines += 1
            msg_id = self._acked_id(line)
            if msg_id is not None:
                acked.append(msg_id)
        return acked

    def _acked_id(self, line: str) -> int | None:
        """The line's msg_id if it was acked, else None."""
        try:
            row = json.loads(line)
            msg_id = int(row["msg_id"])
            return msg_id if row["acked"] is True else None
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(
                f"{self.path}:{self.lines}: not a produced.jsonl line ({error}): {line[:120]!r}"
            ) from error
