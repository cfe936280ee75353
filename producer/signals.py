"""Turn SIGTERM/SIGINT into a flag the main loop checks, so files are always completed."""

from __future__ import annotations

import signal
from types import FrameType, TracebackType
from typing import Any

HANDLED = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """Context manager: while active, SIGTERM/SIGINT set `received` instead of killing us."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> StopSignals:
        for signum in HANDLED:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received = signal.Signals(signum)

    @property
    def exit_code(self) -> int:
        """128 + signal number, the shell's convention for 'stopped by a signal'."""
        return 128 + int(self.received) if self.received is not None else 0
