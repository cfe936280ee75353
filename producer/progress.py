"""Live status: a tqdm bar on a terminal, a compact line every few seconds in a log file."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm import tqdm

TTY_REFRESH_S = 0.2


class Progress:
    """Shows `done` (of `total`, if known) and a status text.

    update() is cheap when nothing is due, so a hot loop may call it every iteration; the
    status text is only built (describe()) when it is shown.
    """

    def __init__(
        self,
        label: str,
        total: int | None,
        interval_s: float,
        stream: TextIO | None = None,
        tty: bool | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._label = label
        self._total = total
        self._stream = stream if stream is not None else sys.stdout
        self._monotonic = monotonic
        self._started = monotonic()
        is_tty = self._stream.isatty() if tty is None else tty
        self._tick_s = TTY_REFRESH_S if is_tty else interval_s
        self._next_due = self._started + self._tick_s
        self._bar: tqdm | None = None
        if is_tty:
            self._bar = tqdm(
                total=total, desc=label, unit="msg", file=self._stream, mininterval=0, leave=True
            )

    def update(self, done: int, describe: Callable[[], str]) -> None:
        """Show the status if the last one is older than the interval."""
        now = self._monotonic()
        if now < self._next_due:
            return
        self._next_due = now + self._tick_s
        self._show(done, describe(), now)

    def note(self, text: str) -> None:
        """Print a one-off line (above the bar on a terminal)."""
        if self._bar is not None:
            self._bar.write(f"[{self._label}] {text}", file=self._stream)
        else:
            self._stream.write(f"[{self._label}] {text}\n")
            self._stream.flush()

    def close(self, done: int, status: str) -> None:
        """Show the final status (always) and release the terminal line."""
        self._show(done, status, self._monotonic())
        if self._bar is not None:
            self._bar.close()

    def _show(self, done: int, status: str, now: float) -> None:
        if self._bar is not None:
            self._bar.n = done
            self._bar.set_postfix_str(status)
            return
        count = f"{done}/{self._total}" if self._total is not None else str(done)
        self._stream.write(f"[{self._label}] {now - self._started:.1f}s {count} {status}\n")
        self._stream.flush()
