"""Run this checkout's playbooks on the test hosts with ansible-runner, timed (shared by the
benches)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import ansible_runner

REPO = Path(__file__).resolve().parents[1]
# The test hosts' tooling: how the machine's CPU time went, read as `make test` reads it.
sys.path.insert(0, str(REPO / "tests" / "lab"))
from cpu_time import cpu_shares, read_cpu_ticks, shares_in_words  # noqa: E402

__all__ = ["INVENTORY", "REPO", "Played", "flink_tls_internal", "run", "shares_in_words"]
INVENTORY = REPO / "inventory" / "lab" / "hosts.yml"
# ansible-runner starts ansible-playbook by name: take the one next to this interpreter.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


def flink_tls_internal() -> bool:
    """Whether the test hosts' inventory turns Flink's internal TLS on (any host of it)."""
    listed = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(INVENTORY), "--list"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
    )
    if listed.returncode != 0:
        sys.exit(f"ansible-inventory -i {INVENTORY} failed:\n{listed.stderr[-2000:]}")
    hostvars = json.loads(listed.stdout).get("_meta", {}).get("hostvars", {})
    return any(bool(variables.get("flink_tls_internal")) for variables in hostvars.values())


class Played(NamedTuple):
    """A timed playbook run: wall seconds, Ansible's stats, and the shares of the machine's CPU
    time that were busy, idle and stolen meanwhile (cpu_time.cpu_shares; None where unread)."""

    wall_s: float
    stats: dict
    cpu_shares: dict[str, float] | None


def run(
    playbooks: tuple[str, ...],
    extravars: dict | None = None,
    envvars: dict[str, str] | None = None,
    event_handler: Callable[[dict], bool] | None = None,
) -> Played:
    """Run playbooks/<name>... in one ansible-playbook run, timed (Played).

    Exits with the tail of Ansible's output when the run fails.
    """
    with tempfile.TemporaryDirectory() as private:
        wrapper = Path(private) / "bench.yml"
        wrapper.write_text(
            "".join(
                f"- ansible.builtin.import_playbook: {REPO / 'playbooks' / name}\n"
                for name in playbooks
            )
        )
        ticks_before = read_cpu_ticks()
        started = time.monotonic()
        result = ansible_runner.run(
            private_data_dir=private,
            project_dir=str(REPO),
            playbook=str(wrapper),
            inventory=str(INVENTORY),
            extravars=extravars or {},
            envvars={"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), **(envvars or {})},
            event_handler=event_handler,
            quiet=True,
        )
        wall = time.monotonic() - started
        shares = cpu_shares(ticks_before, read_cpu_ticks())
        if result.rc != 0:
            sys.exit(
                f"{' '.join(playbooks)} {extravars or ''} failed (rc={result.rc}):\n"
                f"{result.stdout.read()[-4000:]}"
            )
        return Played(wall, result.stats, shares)
