"""Result files: written under `<name>.part` and renamed when complete, never overwritten."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def part_path(final: Path) -> Path:
    return final.with_name(final.name + ".part")


def summary_path(output: Path) -> Path:
    """produced.jsonl -> produced.summary.json (beside it)."""
    return output.with_name(output.name.removesuffix(".jsonl") + ".summary.json")


def new_output_problem(output: Path) -> str | None:
    """Why output (and its summary) cannot be written as a new result, or None if it can."""
    if not output.parent.is_dir():
        return f"directory {output.parent} does not exist; create it first (mkdir -p)"
    for path in (output, summary_path(output)):
        if path.exists():
            return f"{path} already exists; results are never overwritten: use a new directory"
    return None


class AtomicOutput:
    """A text file that appears under its final name only once commit() is called."""

    def __init__(self, final: Path) -> None:
        self.final = final
        self.part = part_path(final)
        self._file = self.part.open("w", encoding="utf-8")

    def write(self, text: str) -> None:
        self._file.write(text)

    def flush(self) -> None:
        self._file.flush()

    def commit(self) -> None:
        """Make the content durable, then publish it under the final name."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self.part, self.final)


class LineOutput:
    """Whole lines appended with one OS write() per batch, readable by others as they go.

    Unbuffered: what write_lines() returns with is in the OS page cache, so a reader (or a
    crash) sees every batch written so far; a kill during a write can cut only the last line.
    Published under the final name by commit(), after one fsync.
    """

    def __init__(self, final: Path) -> None:
        self.final = final
        self.part = part_path(final)
        self._fd = os.open(self.part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write_lines(self, text: str) -> None:
        """Append text (whole lines) with one write() call, repeated only for a short write."""
        data = memoryview(text.encode())
        while data:
            data = data[os.write(self._fd, data) :]

    def commit(self) -> None:
        """Make the content durable, then publish it under the final name."""
        os.fsync(self._fd)
        os.close(self._fd)
        os.replace(self.part, self.final)


def write_text(path: Path, text: str) -> None:
    """Write text to path in one rename: a reader sees nothing or all of it."""
    output = AtomicOutput(path)
    output.write(text)
    output.commit()


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write data as indented JSON, atomically."""
    write_text(path, json.dumps(data, indent=2) + "\n")
