"""Small helpers shared by the test-lab scripts (testhosts.py and systemd_host.py), the tests
and the benches."""

from __future__ import annotations

import contextlib
import functools
import shlex
import socket
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
# The environment of what the lab scripts start (daemons, nspawn): nothing of the caller's.
CLEAN_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}


class LabError(Exception):
    """A failure with a message meant for the user."""


def log(msg: str) -> None:
    """Print a progress line."""
    print(msg, flush=True)


def run(
    cmd: Sequence[str], *, check: bool = True, timeout: float | None = 60
) -> subprocess.CompletedProcess[str]:
    """Run a command and capture its output; raise LabError on failure if check."""
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise LabError(f"command timed out after {timeout}s: {shlex.join(cmd)}") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise LabError(f"command failed ({proc.returncode}): {shlex.join(cmd)}\n{detail}")
    return proc


def write_if_changed(path: Path, text: str, mode: int = 0o644) -> bool:
    """Write text to path unless it already has that content; return True if written."""
    if path.exists() and path.read_text() == text:
        path.chmod(mode)
        return False
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)
    return True


@contextlib.contextmanager
def services_not_started() -> Iterator[None]:
    """While installing on this machine: a policy-rc.d that forbids starting services (firewalld
    started on this machine would filter the lab bridge), unless the machine already has one."""
    if POLICY_RC_D.exists():
        yield
        return
    POLICY_RC_D.write_text(
        "#!/bin/sh\n# streamlab testhosts: no service starts while installing\nexit 101\n"
    )
    POLICY_RC_D.chmod(0o755)
    try:
        yield
    finally:
        POLICY_RC_D.unlink(missing_ok=True)


def tcp_connects(address: str, port: int, source: str | None = None, timeout_s: float = 5) -> bool:
    """From this machine (the control node), optionally from one of its addresses: does a TCP
    connection to address:port open?"""
    with socket.socket() as sock:
        sock.settimeout(timeout_s)
        if source is not None:
            sock.bind((source, 0))
        try:
            sock.connect((address, port))
        except OSError:
            return False
        return True


@contextlib.contextmanager
def bridge_address_and_routes(bridge: str, address: str, routes: dict[str, str]) -> Iterator[None]:
    """This machine gains `address` on the lab bridge and a route to each key of `routes`
    through its value (a host's cluster address), for as long as the block runs; undone in
    reverse, also when a step fails (LabError, naming the step)."""
    steps = [
        (
            ["ip", "addr", "add", f"{address}/32", "dev", bridge],
            ["ip", "addr", "del", f"{address}/32", "dev", bridge],
        )
    ] + [
        (
            ["ip", "route", "add", f"{target}/32", "via", via, "dev", bridge],
            ["ip", "route", "del", f"{target}/32"],
        )
        for target, via in routes.items()
    ]
    undo: list[list[str]] = []
    try:
        for do, undo_step in steps:
            done = subprocess.run(do, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise LabError(f"{shlex.join(do)}: {done.stderr.strip()}")
            undo.append(undo_step)
        yield
    finally:
        for step in reversed(undo):
            subprocess.run(step, capture_output=True, check=False)


LAB_GROUP_VARS = (
    Path(__file__).resolve().parents[2] / "inventory" / "lab" / "group_vars" / "all.yml"
)


@functools.cache
def lab_group_vars() -> dict:
    """inventory/lab/group_vars/all.yml, read once per process (the tests and the benches)."""
    import yaml  # only the callers that read the lab's settings need it, never the lab scripts

    return yaml.safe_load(LAB_GROUP_VARS.read_text()) or {}
