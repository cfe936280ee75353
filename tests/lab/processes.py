"""Processes of this machine as /proc shows them: state, liveness, children and descendants.

Shared by the test-host scripts (systemd_host.py) and the tests (conftest.py)."""

from __future__ import annotations

import contextlib
from pathlib import Path


def state(pid: int) -> str | None:
    """State letter of a process (R, S, Z, ...), None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its end.
    return stat.rsplit(")", 1)[1].split()[0]


def alive(pid: int) -> bool:
    """True if pid exists and has not ended (a zombie has)."""
    return state(pid) not in (None, "Z", "X")


def children(pid: int) -> list[int]:
    """Child PIDs of every thread of pid."""
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                kids += [int(c) for c in (task / "children").read_text().split()]
    return kids


def descendants(pid: int) -> list[int]:
    """Every process below pid, whatever session or process group it moved to."""
    found: list[int] = []
    pending = [pid]
    while pending:
        below = children(pending.pop())
        found.extend(below)
        pending.extend(below)
    return found
