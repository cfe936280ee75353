#!/usr/bin/env python3
"""Does a killed Flink TaskManager rejoin the cluster? Kills on the test hosts, timed.

Each kill is the kit's own fault (`playbooks/fault.yml -e fault=kill_taskmanager`): SIGKILL to
the TaskManager of HOST, started again DOWN_S seconds later by the fault agent (the down times
alternate over --down-s). After each kill the JobManager's REST API (`/taskmanagers`, on the
control node's clock) is asked every 0.5 s until a TaskManager of HOST with a new id holds all
its slots, or --timeout-s passes: that kill is then counted as "never rejoined", and the bench
stops there (no TaskManager is left to kill). Per kill it
prints the old and new RPC port and the seconds from the playbook's return (after the undo)
to the registration; at the end how many rejoined and the spread of those times.

The TaskManager's address is <address>:<rpc port>. When every start took the same port, a
TaskManager back before the JobManager had dropped its predecessor could stay outside the
cluster; each start now takes the next port of its range (docs/architecture.md, "Flink").

Needs converged test hosts with no job running. Run as root from the repository:
`.venv/bin/python bench/taskmanager_restarts.py --help`. All test hosts share this machine's
cores: the figures describe that lab, not a real cluster.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

import lab_playbooks

# The tests' way of reaching the test hosts' JobManager (HTTPS verified with Flink's CA when the
# lab turns it on) and their addresses.
sys.path.insert(0, str(lab_playbooks.REPO / "tests"))
from conftest import flink_rest, lab_hosts, taskmanager_rpc_port  # noqa: E402


def taskmanager_of(lab: dict[str, str], address: str) -> dict | None:
    """The registered TaskManager of a host (its id starts with <address>:), if any."""
    registered = flink_rest(lab, "/taskmanagers")["taskmanagers"]
    return next((tm for tm in registered if tm["id"].startswith(f"{address}:")), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--host", default="node2", help="inventory host of the TaskManager")
    parser.add_argument("--down-s", default="6,12", help="down times, comma-separated")
    parser.add_argument("--timeout-s", type=float, default=120)
    args = parser.parse_args()
    lab = lab_hosts()
    address = lab[args.host]
    down_times = [int(value) for value in args.down_s.split(",")]
    rejoined: list[float] = []
    never = 0
    for kill in range(args.kills):
        before = taskmanager_of(lab, address)
        if before is None or before["freeSlots"] != before["slotsNumber"]:
            raise SystemExit(
                f"{args.host}'s TaskManager is not registered with free slots: {before}"
            )
        down_s = down_times[kill % len(down_times)]
        lab_playbooks.run(
            ("fault.yml",),
            extravars={
                "fault": "kill_taskmanager",
                "target": args.host,
                "duration_s": down_s,
                "schedule_id": f"bench-tm-{uuid.uuid4().hex[:6]}",
            },
        )
        undone = time.monotonic()
        after = None
        while time.monotonic() - undone < args.timeout_s:
            after = taskmanager_of(lab, address)
            if (
                after
                and after["id"] != before["id"]
                and after["slotsNumber"] == before["slotsNumber"]
            ):
                break
            after = None
            time.sleep(0.5)
        if after is None:
            never += 1
            print(
                f"kill {kill + 1}: down {down_s} s, port {taskmanager_rpc_port(before['id'])}: "
                f"never rejoined within {args.timeout_s:.0f} s (the bench stops: no TaskManager "
                "to kill next)",
                flush=True,
            )
            break
        took = time.monotonic() - undone
        rejoined.append(took)
        print(
            f"kill {kill + 1}: down {down_s} s, port {taskmanager_rpc_port(before['id'])} -> "
            f"{taskmanager_rpc_port(after['id'])}, registered {took:.1f} s after the undo",
            flush=True,
        )
    made = len(rejoined) + never
    print(f"\n{len(rejoined)} of {made} kills rejoined, {never} never did", end="")
    if rejoined:
        print(
            f"; registered {min(rejoined):.1f} to {max(rejoined):.1f} s after the undo "
            f"(median {statistics.median(rejoined):.1f} s)"
        )
    else:
        print()
    if never:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
