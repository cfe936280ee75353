"""A host that runs firewalld, as a Rocky 9 host does out of the box: the kit admits its own
ports there, from the cluster's addresses and the control node only.

node3 runs firewalld (tests/lab/testhosts.py: its own D-Bus and configuration, rules in its own
network namespace), so every lab test runs against it: the whole lab's health, experiments and
faults pass through its rules. These tests show what those rules are and what they refuse.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
import subprocess
from collections.abc import Iterator

import pytest

from conftest import on_lab_host

pytestmark = pytest.mark.lab

FIREWALLED = "node3"
CONTROL_ADDRESS = "10.77.0.1"  # the lab bridge: where Ansible and the tests connect from
STRANGER_ADDRESS = "10.77.0.99"  # on the lab's network, in no inventory
# What node3 runs in the lab (a ZooKeeper and Kafka quorum member and controller, a Flink
# TaskManager, a Storm supervisor with 2 slots, a Spark worker) and the ports each listens on,
# written out here rather than read from the roles: SSH, ZooKeeper client/peer/election, Kafka
# broker/controller, TaskManager RPC/data/metric query service, supervisor Thrift and slots,
# Spark worker RPC/web UI/block managers.
KIT_PORTS = {
    "22/tcp",
    "2181/tcp",
    "2888/tcp",
    "3888/tcp",
    "9092/tcp",
    "9093/tcp",
    "6122/tcp",
    "6121/tcp",
    "6125-6129/tcp",
    "6628/tcp",
    "6700-6701/tcp",
    "7078/tcp",
    "8082/tcp",
    "7110-7126/tcp",
}
UNOPENED_PORT = 7999


def admitted(ports: set[str]) -> set[int]:
    """Port numbers of firewalld's port specifications ("9092/tcp", "6700-6701/tcp")."""
    numbers: set[int] = set()
    for spec in ports:
        first, _, last = spec.split("/")[0].partition("-")
        numbers.update(range(int(first), int(last or first) + 1))
    return numbers


def firewall_cmd(address: str, *arguments: str) -> str:
    done = on_lab_host(address, "firewall-cmd", *arguments)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def connects(address: str, port: int, source: str | None = None) -> bool:
    """From this machine (the control node): does a TCP connection open?"""
    with socket.socket() as sock:
        sock.settimeout(5)
        if source is not None:
            sock.bind((source, 0))
        try:
            sock.connect((address, port))
        except OSError:
            return False
        return True


def connects_from(host_address: str, address: str, port: int) -> subprocess.CompletedProcess:
    """From a test host: try a TCP connection, print OPEN or the error."""
    probe = (
        "import socket,sys\n"
        "try:\n"
        f"    socket.create_connection(({address!r}, {port}), timeout=5).close(); print('OPEN')\n"
        "except OSError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    return on_lab_host(host_address, f"python3 -c {shlex.quote(probe)}")


@contextlib.contextmanager
def listener(host_address: str, port: int) -> Iterator[None]:
    """A TCP listener on the host's cluster address for up to 60 s (stopped on leaving)."""
    script = (
        f"import socket,time; s=socket.socket(); s.bind(({host_address!r}, {port})); s.listen(8); "
        "time.sleep(60)"
    )
    started = on_lab_host(
        host_address,
        f"nohup python3 -c {shlex.quote(script)} >/dev/null 2>&1 & echo $!",
    )
    assert started.returncode == 0, started.stderr
    pid = started.stdout.strip()
    try:
        listening = on_lab_host(
            host_address,
            f"for i in $(seq 50); do ss -ltnH 'sport = :{port}' | grep -q . && exit 0; "
            "sleep 0.1; done; exit 1",
        )
        assert listening.returncode == 0, f"nothing listens on {host_address}:{port}"
        yield
    finally:
        on_lab_host(host_address, f"kill {pid}")


def test_firewalld_admits_the_kits_ports_from_the_cluster_and_control_node_only(converged):
    node = converged[FIREWALLED]
    assert firewall_cmd(node, "--state") == "running"
    # The host's own zones are untouched: everyone else meets the default zone, which admits SSH.
    assert firewall_cmd(node, "--get-default-zone") == "public"
    assert set(firewall_cmd(node, "--zone=public", "--list-services").split()) == {
        "ssh",
        "dhcpv6-client",
    }
    assert firewall_cmd(node, "--zone=public", "--list-ports") == ""
    sources = {*converged.values(), CONTROL_ADDRESS}
    for configuration in ((), ("--permanent",)):  # in force now, and after a reload or reboot
        zone = (*configuration, "--zone=streamlab")
        assert set(firewall_cmd(node, *zone, "--list-sources").split()) == sources
        assert set(firewall_cmd(node, *zone, "--list-ports").split()) == KIT_PORTS
        assert firewall_cmd(node, *zone, "--list-services") == ""
    # Every port a daemon listens on is admitted: none is left random (an engine's metric query
    # service, a Spark worker) where no rule could follow it.
    listening = on_lab_host(node, "ss -ltnH")
    assert listening.returncode == 0, listening.stderr
    ports = {int(line.split()[3].rsplit(":", 1)[1]) for line in listening.stdout.splitlines()}
    assert ports >= {22, 2181, 9092, 6121, 6122, 7078}, ports  # what the lab runs there
    assert ports <= admitted(KIT_PORTS), sorted(ports - admitted(KIT_PORTS))


def test_a_port_the_kit_did_not_open_is_refused_from_another_host(converged):
    node, other = converged[FIREWALLED], converged["node2"]
    with listener(node, UNOPENED_PORT):
        # It listens and answers on the host itself ...
        assert connects_from(node, node, UNOPENED_PORT).stdout.strip() == "OPEN"
        # ... but another cluster host is refused, while the kit's Kafka port answers it.
        refused = connects_from(converged["node1"], node, UNOPENED_PORT).stdout.strip()
        assert refused.startswith(("OSError", "ConnectionRefusedError")), refused
        assert connects_from(converged["node1"], node, 9092).stdout.strip() == "OPEN"
    # The same listener on a host without a firewall is reached: the refusal is node3's rules.
    with listener(other, UNOPENED_PORT):
        assert connects_from(converged["node1"], other, UNOPENED_PORT).stdout.strip() == "OPEN"


def test_a_kit_port_is_refused_to_an_address_outside_the_inventory(converged):
    node = converged[FIREWALLED]
    added = subprocess.run(
        ["ip", "addr", "add", f"{STRANGER_ADDRESS}/32", "dev", "lab0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    try:
        assert connects(node, 9092, source=CONTROL_ADDRESS)
        assert not connects(node, 9092, source=STRANGER_ADDRESS)
        # A host without a firewall answers the stranger: the refusal is node3's rules.
        assert connects(converged["node2"], 9092, source=STRANGER_ADDRESS)
    finally:
        subprocess.run(["ip", "addr", "del", f"{STRANGER_ADDRESS}/32", "dev", "lab0"], check=False)
