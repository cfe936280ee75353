#!/usr/bin/python
"""Ansible module: the kit's run processes (producer, collector, timelines) left on a host."""

from __future__ import annotations

DOCUMENTATION = r"""
module: streamlab_run_processes
short_description: Find, and stop when asked, processes working in the kit's run directories
description:
  - An experiment starts its producer, collector and engine timeline as background jobs whose
    command line names a file in a directory of the run (<one of C(directories)>/<run>/...).
    When the control node stops mid-run (Ctrl-C, a dead laptop) they go on; this module finds
    them by exactly that: one of the kit's C(programs) (an argument whose base name is one of
    them) given a path in one of C(directories). Nothing else is ever touched (an operator's
    C(tail -f) of a run's log is not one of the kit's programs).
  - The module's own process and its parents are never matched.
  - With C(stop), each is sent SIGTERM, and SIGKILL after C(timeout_s) if it is still there.
  - Reads /proc where there is one (Linux), else C(ps) (macOS).
options:
  directories:
    description: "Where runs keep their files (driver_runs_dir, the timelines)."
    type: list
    elements: path
    required: true
  programs:
    description: "The kit's run programs (producer.produce, the engines' timeline samplers, ...)."
    type: list
    elements: str
    required: true
  stop: {description: Stop what is found; otherwise only list it., type: bool, default: false}
  timeout_s: {description: Seconds between SIGTERM and SIGKILL., type: int, default: 10}
"""

RETURN = r"""
processes: {description: "Each process found: {pid, command, run}.", type: list}
killed: {description: PIDs that needed SIGKILL., type: list}
"""

import contextlib
import os
import signal
import subprocess
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def _proc_table() -> dict[int, tuple[int, list[str]]]:
    """pid -> (parent pid, argv) for every process."""
    table: dict[int, tuple[int, list[str]]] = {}
    if os.path.isdir("/proc/self"):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    argv = [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
                with open(f"/proc/{name}/stat", encoding="utf-8") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            table[int(name)] = (parent, argv)
        return table
    listing = subprocess.run(
        ["ps", "-A", "-ww", "-o", "pid=", "-o", "ppid=", "-o", "command="],
        capture_output=True,
        text=True,
        check=True,
    )
    for line in listing.stdout.splitlines():
        fields = line.split(None, 2)
        if len(fields) == 3:
            table[int(fields[0])] = (int(fields[1]), fields[2].split())
    return table


def _ancestors(table: dict[int, tuple[int, list[str]]], pid: int) -> set[int]:
    seen: set[int] = set()
    while pid in table and pid not in seen:
        seen.add(pid)
        pid = table[pid][0]
    return seen


def _run_of(argv: list[str], directories: list[str]) -> str | None:
    """The run's directory name an argument points into, or None."""
    prefixes = [directory.rstrip("/") + "/" for directory in directories]
    for argument in argv:
        for part in argument.split("="):
            for prefix in prefixes:
                if part.startswith(prefix) and len(part) > len(prefix):
                    return part[len(prefix) :].split("/", 1)[0]
    return None


# The account switchers the kit starts its programs through (common_run_as_service): such a
# process has its program's arguments, and ends with it; the program itself is the one found.
ACCOUNT_SWITCHERS = ("runuser", "sudo")


def _is_program(argv: list[str], programs: list[str]) -> bool:
    if argv and argv[0].rsplit("/", 1)[-1] in ACCOUNT_SWITCHERS:
        return False
    return any(argument.rsplit("/", 1)[-1] in programs for argument in argv)


def find(directories: list[str], programs: list[str]) -> list[dict[str, Any]]:
    table = _proc_table()
    own = _ancestors(table, os.getpid())
    found = []
    for pid, (_parent, argv) in sorted(table.items()):
        run = _run_of(argv, directories)
        if run and pid not in own and _is_program(argv, programs):
            found.append({"pid": pid, "command": " ".join(argv)[:300], "run": run})
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie has ended; its parent just has not reaped it.
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def stop(processes: list[dict[str, Any]], timeout_s: int) -> list[int]:
    pids = [p["pid"] for p in processes]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.2)
    killed = [pid for pid in pids if _alive(pid)]
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return killed


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "directories": {"type": "list", "elements": "path", "required": True},
            "programs": {"type": "list", "elements": "str", "required": True},
            "stop": {"type": "bool", "default": False},
            "timeout_s": {"type": "int", "default": 10},
        },
        supports_check_mode=True,
    )
    directories = module.params["directories"]
    for directory in directories:
        # A run's files are two levels below; a directory this shallow would match anything.
        if not os.path.isabs(directory) or len(directory.strip("/").split("/")) < 2:
            module.fail_json(msg=f"{directory} is not a directory of the kit's runs")
    programs = [program for program in module.params["programs"] if program]
    if not programs:
        module.fail_json(msg="programs is empty: name the kit's run programs")
    processes = find(directories, programs)
    killed = []
    if module.params["stop"] and processes and not module.check_mode:
        killed = stop(processes, module.params["timeout_s"])
    module.exit_json(
        changed=bool(module.params["stop"] and processes),
        processes=processes,
        killed=killed,
    )


if __name__ == "__main__":
    main()
