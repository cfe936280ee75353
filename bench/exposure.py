#!/usr/bin/env python3
"""What each daemon on the test hosts listens on, and who reaches it: the control node, an
address outside the inventory, and on the host without a firewall of its own (node2) the same
outside address once more with the kit's nftables table taken away (what `firewall_enabled:
false` leaves).

Needs converged test hosts (make lab, then site.yml; make test leaves them torn down); no job
should run, so the figures are the daemons at rest (a running Storm topology adds its workers'
ports). Leaves the hosts as it found them: the outside address and the route it adds on this
machine are removed, and node2's table is loaded again from its file, also when the bench is
interrupted or terminated. IPv4 only: a socket bound to an IPv6 address alone is listed, not
probed. Run as root from the
repository (`make bench-exposure`). Writes bench/out/exposure.json (copy it to bench/results/
to publish it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lab"))
import testhosts  # noqa: E402  (tests/lab: the test hosts' own addresses and SSH)
from labutil import (  # noqa: E402
    LabError,
    bridge_address_and_routes,
    lab_group_vars,
    tcp_connects,
)

OUT = REPO / "bench" / "out" / "exposure.json"
# On the lab's bridge, in no inventory (the firewall lab test uses the same one).
OUTSIDE_ADDRESS = f"{testhosts.SUBNET_PREFIX}99"
TABLE = "inet streamlab"
TABLE_FILE = "/etc/streamlab/firewall.nft"
CONNECT_TIMEOUT_S = 2.0
SSH_PORT = 22

# Run on each host: its listening TCP sockets, each with the supervisord program whose process
# tree holds the socket's process (or the process's own name when no program does).
_SOCKETS_ON_HOST = r"""
import json, re, subprocess
status = subprocess.run(
    ["/opt/streamlab/venv/bin/supervisorctl", "-c", "/etc/streamlab/supervisord.conf", "status"],
    capture_output=True, text=True).stdout
running = re.finditer(r"^(\S+)\s+RUNNING\s+pid (\d+)", status, re.M)
programs = {int(m.group(2)): m.group(1) for m in running}
def parent(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"^PPid:\s+(\d+)", f.read(), re.M).group(1))
    except OSError:
        return 0
def owner(pid, name):
    seen = pid
    while seen > 1:
        if seen in programs:
            return programs[seen]
        seen = parent(seen)
    return name
out = []
for line in subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout.splitlines():
    fields = line.split()
    local = fields[3]
    bind, _, port = local.rpartition(":")
    user = re.search(r'\(\("([^"]+)",pid=(\d+)', line)
    name, pid = (user.group(1), int(user.group(2))) if user else ("?", 0)
    out.append({"bind": bind.strip("[]"), "port": int(port), "daemon": owner(pid, name)})
print(json.dumps(out))
"""


def on_host(host: testhosts.Host, *command: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        testhosts.ssh_cmd(host, *command),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"{host.name}: {' '.join(command)} failed ({done.returncode}): {done.stderr}")
    return done.stdout


def reaches(address: str, port: int, source: str | None = None) -> bool:
    return tcp_connects(address, port, source, timeout_s=CONNECT_TIMEOUT_S)


@contextlib.contextmanager
def outside_address(second_routes: dict[str, str]) -> Iterator[None]:
    """OUTSIDE_ADDRESS on the lab bridge, and a route to each second address through its host's
    cluster address, for as long as the block runs."""
    try:
        with bridge_address_and_routes(testhosts.BRIDGE, OUTSIDE_ADDRESS, second_routes):
            yield
    except LabError as error:
        sys.exit(str(error))


@contextlib.contextmanager
def without_table(host: testhosts.Host) -> Iterator[None]:
    """The kit's table taken away on host for as long as the block runs, then loaded again."""
    on_host(host, "nft", "delete", "table", *TABLE.split())
    try:
        yield
    finally:
        on_host(host, "nft", "-f", TABLE_FILE)


EVERY_INTERFACE = ("*", "0.0.0.0", "::")


def targets_of(host: testhosts.Host, bind: str) -> list[str]:
    """The IPv4 addresses a socket answers on from outside the host: its own address, or for
    every interface the cluster address and the second address where the host has one; none
    for loopback or an IPv6 address."""
    if bind in EVERY_INTERFACE:
        return [host.ip, *([host.second_ip] if host.second_ip else [])]
    if bind.startswith("127.") or ":" in bind:
        return []
    return [bind]


def reached(targets: list[str], port: int, source: str | None = None) -> bool | None:
    """Whether any target answers (None where there is no target)."""
    return any(reaches(t, port, source) for t in targets) if targets else None


def yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def firewall_of(host: testhosts.Host) -> str:
    if testhosts.firewalld_running(host):
        return "firewalld"
    tables = on_host(host, "nft", "list", "tables")
    return "kit's nftables table" if f"table {TABLE}" in tables else "none"


def check_outside_address_works(hosts: list[testhosts.Host]) -> None:
    """The outside address reaches each host's sshd, which no rule of the kit refuses: without
    this, a broken address or route would read as every socket refused."""
    for host in hosts:
        if not reaches(host.ip, SSH_PORT, OUTSIDE_ADDRESS):
            sys.exit(f"{OUTSIDE_ADDRESS} does not reach sshd on {host.name}: the probe is broken")


SECURITY_SWITCHES = (
    "kafka_sasl_enabled",
    "flink_tls_internal",
    "flink_tls_rest",
    "spark_authenticate",
)


def role_defaults(names: tuple[str, ...]) -> dict[str, Any]:
    """Each setting's value in its role's defaults/main.yml (role: the name's first word)."""
    found = {}
    for name in names:
        path = REPO / "roles" / name.split("_", 1)[0] / "defaults" / "main.yml"
        found[name] = (yaml.safe_load(path.read_text()) or {}).get(name)
    return found


def effective_security(converged_with: dict[str, bool]) -> dict[str, Any]:
    """The security switches the hosts were converged with: the lab's group vars, less what
    site.yml was given otherwise."""
    settings = {**role_defaults(SECURITY_SWITCHES), **lab_group_vars(), **converged_with}
    return {name: settings.get(name) for name in SECURITY_SWITCHES}


def lab_options(converged_with: dict[str, bool]) -> str:
    """The opt-in security the hosts were converged with, as a note: the lab's group vars, less
    what site.yml was given otherwise (--converged-with)."""
    settings = {**lab_group_vars(), **converged_with}
    names = SECURITY_SWITCHES
    on = [name for name in names if settings.get(name)]
    given = ", ".join(f"-e {k}={str(v).lower()}" for k, v in converged_with.items())
    return (
        f"The hosts were converged with the lab's group vars{f' and {given}' if given else ''}: "
        f"on, {', '.join(on) or 'none of the opt-in security settings'}; they change what a "
        "connection must present, not which sockets listen."
    )


def switch(text: str) -> tuple[str, bool]:
    """NAME=true|false, as --converged-with takes it."""
    name, _, value = text.partition("=")
    if value.lower() not in ("true", "false") or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=true or NAME=false")
    return name, value.lower() == "true"


# Run on each host: where each component's stable link points (as site.yml left it).
_LINKS_ON_HOST = (
    "for c in zookeeper kafka flink storm spark; do "
    '[ -e /opt/streamlab/$c ] && printf "%s %s\\n" $c "$(readlink /opt/streamlab/$c)"; '
    "done; true"
)


def releases(hosts: list[testhosts.Host]) -> list[str]:
    """The releases the hosts run ("flink 2.2.1"), read from their stable links."""
    found = set()
    for host in hosts:
        for line in on_host(host, _LINKS_ON_HOST).splitlines():
            component, target = line.split(" ", 1)
            release = re.search(rf"{component}-(\d[^/-]*)", target)
            found.add(f"{component} {release.group(1) if release else target}")
    return sorted(found)


def stop_on_signal(signum: int, _frame: object) -> None:
    """SIGTERM and SIGHUP end the bench through its finally blocks, as Ctrl-C does."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--converged-with",
        type=switch,
        action="append",
        default=[],
        metavar="NAME=true|false",
        help="an opt-in security setting site.yml was given with -e (the lab's group vars "
        "otherwise), for the result's note",
    )
    args = parser.parse_args(argv)
    testhosts.require_root()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop_on_signal)
    hosts = testhosts.inventory_hosts()
    if not hosts:
        sys.exit(f"no test hosts in {testhosts.INVENTORY}: run make lab and site.yml first")
    running = releases(hosts)
    versions = f"The hosts ran {', '.join(running)} (the components' stable links)."
    flink_release = next((r.capitalize() for r in running if r.startswith("flink ")), "no Flink")
    # The shipped defaults: each security switch as the roles' defaults set it.
    shipped = effective_security(dict(args.converged_with)) == role_defaults(SECURITY_SWITCHES)
    found: list[dict[str, Any]] = []
    firewalls: dict[str, str] = {}
    for host in hosts:
        firewalls[host.name] = firewall_of(host)
        for entry in json.loads(on_host(host, "python3", "-", stdin=_SOCKETS_ON_HOST)):
            if entry["daemon"] == "sshd":
                continue
            # An IPv4 address on a dual-stack socket shows as ::ffff:a.b.c.d.
            entry["bind"] = entry["bind"].removeprefix("::ffff:")
            found.append({"host": host, **entry})
    found.sort(key=lambda e: (e["host"].index, e["port"], e["bind"]))
    seconds = {h.second_ip: h.ip for h in hosts if h.second_ip}
    rows: list[list[Any]] = []
    with outside_address(seconds):
        check_outside_address_works(hosts)
        for entry in found:
            targets = targets_of(entry["host"], entry["bind"])
            entry.update(
                targets=targets,
                control=reached(targets, entry["port"]),
                outside=reached(targets, entry["port"], OUTSIDE_ADDRESS),
                unfiltered=None,
            )
        for host in hosts:
            if firewalls[host.name] != "kit's nftables table":
                continue
            with without_table(host):
                for entry in found:
                    if entry["host"] is host:
                        entry["unfiltered"] = reached(
                            entry["targets"], entry["port"], OUTSIDE_ADDRESS
                        )
        for entry in found:
            host = entry["host"]
            rows.append(
                [
                    host.name,
                    firewalls[host.name],
                    entry["daemon"],
                    entry["port"],
                    "every interface" if entry["bind"] in EVERY_INTERFACE else entry["bind"],
                    yes_no(entry["control"]),
                    yes_no(entry["outside"]),
                    yes_no(entry["unfiltered"]),
                ]
            )
    columns = [
        "host",
        "firewall",
        "daemon",
        "port",
        "bound to",
        "control node reaches",
        "outside address reaches",
        "outside, without the kit's table",
    ]
    every = [r for r in rows if r[4] == "every interface"]
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    git = ["git", "-C", str(REPO)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    document = {
        "bench": "make bench-exposure",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": commit.stdout.strip(),
        "machine": f"{os.cpu_count()} cores, {memory_gib:.0f} GiB; the test hosts share them",
        "hosts": [
            f"{h.name} {'Debian 13 (systemd)' if h.booted_with_systemd else 'Debian 12'}"
            for h in hosts
        ],
        "title": (
            "Listening sockets per daemon at rest, and who reaches them: "
            f"{flink_release}, {'the shipped defaults' if shipped else 'the lab opt-ins on'}"
        ),
        "description": (
            "From `ss -ltnp` on each converged test host (sshd left out), each socket's process "
            "traced to its supervisord program. Reached: a TCP connection from this machine opened "
            f"within {CONNECT_TIMEOUT_S:.0f} s to the host's cluster address (and, for a socket on "
            "every interface, to its second address where it has one), from the control node's "
            f"address or from {OUTSIDE_ADDRESS}, an address on the lab network in no inventory. "
            "The last column takes the kit's table away for the probe, as firewall_enabled: false "
            "leaves the host; '-' where it does not apply."
        ),
        "columns": columns,
        "rows": rows,
        "notes": [
            f"{len(every)} of {len(rows)} sockets listen on every interface; the outside address "
            f"reaches {sum(r[6] == 'yes' for r in rows)} sockets with the firewalls in place, and "
            f"{sum(r[7] == 'yes' for r in rows)} on the kit-table host with its table taken away.",
            lab_options(dict(args.converged_with)),
            versions,
            "At rest: a running Storm topology adds its workers' ports (the supervisors' slots, "
            "6700 and up), which are in the same rules but were not probed here.",
        ]
        + (["The kit's tree was dirty when measured."] if dirty else []),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(document, indent=2) + "\n")
    width = [max(len(str(c)) for c in col) for col in zip(columns, *rows, strict=False)]
    for line in [columns, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(line, width, strict=False)))
    for note in document["notes"]:
        print(f"- {note}")
    print(f"\nwrote {OUT} (copy it to bench/results/ to publish it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
