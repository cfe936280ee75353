"""Ctrl-C during a study: once stops it after the current run, twice aborts the current run.

The playbook runs in a session of its own (ansible-runner's pseudo-terminal), so the terminal's
Ctrl-C reaches only the study. The first one lets the running experiment finish and record its
results, then the study stops (resume by starting it again). A second Ctrl-C, or SIGTERM,
cancels the running playbook: ansible-runner kills its process group, and the run is recorded
as interrupted and repeated on the next start. Outside a run the second one raises
KeyboardInterrupt at once.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TextIO


class Cancelled(KeyboardInterrupt):
    """The running experiment was cancelled; log is its output so far."""

    def __init__(self, message: str, log: str | None = None) -> None:
        super().__init__(message)
        self.log = log


class StopSwitch:
    def __init__(self, out: TextIO = sys.stderr) -> None:
        self.out = out
        self.stop_requested = False
        self.abort_requested = False
        self.in_experiment = False

    @contextmanager
    def installed(self) -> Iterator[None]:
        """The handlers for the block (the runs); the earlier ones again after it."""
        earlier = {
            signal.SIGINT: signal.signal(signal.SIGINT, self._on_interrupt),
            signal.SIGTERM: signal.signal(signal.SIGTERM, self._on_terminate),
        }
        try:
            yield
        finally:
            for signum, handler in earlier.items():
                signal.signal(signum, handler)

    def __call__(self) -> bool:
        """True once a stop after the current run has been asked for (the runner asks)."""
        return self.stop_requested

    def cancel(self) -> bool:
        """True once the running experiment must be cancelled (ansible-runner asks)."""
        return self.abort_requested

    @contextmanager
    def experiment(self) -> Iterator[None]:
        self.in_experiment = True
        try:
            yield
        finally:
            self.in_experiment = False

    def _on_interrupt(self, signum: int, frame: FrameType | None) -> None:
        if not self.stop_requested:
            self.stop_requested = True
            print(
                "\nCtrl-C: the study stops once the current run has finished and recorded its "
                "results (Ctrl-C again to abort that run now; it is then repeated on resume)",
                file=self.out,
                flush=True,
            )
            return
        self._abort("Ctrl-C again")

    def _on_terminate(self, signum: int, frame: FrameType | None) -> None:
        self.stop_requested = True
        self._abort("SIGTERM")

    def _abort(self, why: str) -> None:
        self.abort_requested = True
        if not self.in_experiment:
            raise KeyboardInterrupt
        print(f"\n{why}: cancelling the current run", file=self.out, flush=True)
