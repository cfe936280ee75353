"""Hosts that run firewalld, as a Rocky 9 host does out of the box: the kit admits its own
ports there, from the cluster's addresses and the control node only.

node1 (the master and driver host) and node3 (a worker) run firewalld (tests/lab/testhosts.py:
each has its own D-Bus and configuration, rules in its own network namespace), so every lab test
runs against them: the whole lab's health, experiments, faults and the analysis on the Spark
cluster pass through their rules, in both directions. node2 runs none. These tests show what the
rules are, what they refuse, and that teardown's purge removes them.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
from collections.abc import Iterator

import pytest
import yaml

from conftest import LAB_INVENTORY, on_lab_host, run_playbook, tcp_connects

pytestmark = pytest.mark.lab

FIREWALLED = ("node1", "node3")
UNFIREWALLED = "node2"
CONTROL_ADDRESS = "10.77.0.1"  # the lab bridge: where Ansible and the tests connect from
STRANGER_ADDRESS = "10.77.0.99"  # on the lab's network, in no inventory
# What each firewalled host runs in the lab and the ports it listens on, written out here rather
# than read from the roles.
# Both are ZooKeeper and Kafka quorum members: SSH; ZooKeeper client/peer/election; Kafka
# broker/controller.
QUORUM_MEMBER_PORTS = {"22/tcp", "2181/tcp", "2888/tcp", "3888/tcp", "9092/tcp", "9093/tcp"}
KIT_PORTS = {
    # JobManager RPC, blob server, REST and metric query service; Nimbus Thrift; Spark master
    # RPC and web UI, and the ranges of the kit's Spark drivers (driver RPC, block manager); the
    # experiment's clock probe (UDP).
    "node1": QUORUM_MEMBER_PORTS
    | {
        "6123/tcp",
        "6124/tcp",
        "8081/tcp",
        "6125-6129/tcp",
        "6627/tcp",
        "7077/tcp",
        "8080/tcp",
        "7090-7106/tcp",
        "7110-7126/tcp",
        "6190/udp",
    },
    # TaskManager RPC, data and metric query service; supervisor Thrift and its 2 slots; Spark
    # worker RPC, web UI and block managers.
    "node3": QUORUM_MEMBER_PORTS
    | {
        "6122/tcp",
        "6121/tcp",
        "6125-6129/tcp",
        "6628/tcp",
        "6700-6701/tcp",
        "7078/tcp",
        "8082/tcp",
        "7110-7126/tcp",
    },
}
# What the lab surely has listening on each (a subset of the above).
SURELY_LISTENING = {
    "node1": {22, 2181, 9092, 6123, 8081, 6627, 7077},
    "node3": {22, 2181, 9092, 6121, 6122, 7078},
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


@pytest.mark.parametrize("host", FIREWALLED)
def test_firewalld_admits_the_kits_ports_from_the_cluster_and_control_node_only(converged, host):
    node = converged[host]
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
        assert set(firewall_cmd(node, *zone, "--list-ports").split()) == KIT_PORTS[host]
        assert firewall_cmd(node, *zone, "--list-services") == ""
    # Every port a daemon listens on is admitted: none is left random (an engine's metric query
    # service, a Spark worker) where no rule could follow it.
    listening = on_lab_host(node, "ss -ltnH")
    assert listening.returncode == 0, listening.stderr
    ports = {int(line.split()[3].rsplit(":", 1)[1]) for line in listening.stdout.splitlines()}
    assert ports >= SURELY_LISTENING[host], ports
    assert ports <= admitted(KIT_PORTS[host]), sorted(ports - admitted(KIT_PORTS[host]))


@pytest.mark.parametrize("host", FIREWALLED)
def test_a_port_the_kit_did_not_open_is_refused_from_another_host(converged, host):
    node, other = converged[host], converged[UNFIREWALLED]
    with listener(node, UNOPENED_PORT):
        # It listens and answers on the host itself ...
        assert connects_from(node, node, UNOPENED_PORT).stdout.strip() == "OPEN"
        # ... but another cluster host is refused, while the kit's Kafka port answers it.
        refused = connects_from(other, node, UNOPENED_PORT).stdout.strip()
        assert refused.startswith(("OSError", "ConnectionRefusedError")), refused
        assert connects_from(other, node, 9092).stdout.strip() == "OPEN"
    # The same listener on a host without a firewall is reached: the refusal is the rules'.
    with listener(other, UNOPENED_PORT):
        assert connects_from(node, other, UNOPENED_PORT).stdout.strip() == "OPEN"


def test_a_kit_port_is_refused_to_an_address_outside_the_inventory(converged):
    added = subprocess.run(
        ["ip", "addr", "add", f"{STRANGER_ADDRESS}/32", "dev", "lab0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    try:
        for host in FIREWALLED:
            assert tcp_connects(converged[host], 9092, source=CONTROL_ADDRESS), host
            assert not tcp_connects(converged[host], 9092, source=STRANGER_ADDRESS), host
        # A host without a firewall answers the stranger: the refusal is the rules'.
        assert tcp_connects(converged[UNFIREWALLED], 9092, source=STRANGER_ADDRESS)
    finally:
        subprocess.run(["ip", "addr", "del", f"{STRANGER_ADDRESS}/32", "dev", "lab0"], check=False)


def test_purge_removes_the_kits_zone_and_finds_nothing_after(converged, tmp_path):
    """The firewall role's find and remove entry points, as teardown with purge runs them, on
    node3; the playbook sets the zone up again whatever happens (tests/playbooks)."""
    host = "node3"
    done = run_playbook(
        "../tests/playbooks/firewall_zone_removal.yml",  # resolved against playbooks/
        LAB_INVENTORY,
        limit=host,
        tmp_path=tmp_path,
    )
    assert done.rc == 0, done.output[-4000:]
    block = done.output.split("Report what was seen", 1)[1]
    seen = yaml.safe_load(block[block.index("{") : block.index("\n}") + 2])["msg"]
    assert seen["found_before"] == "streamlab", seen
    assert seen["found_after"] == "", seen
    assert "streamlab" not in seen["runtime_zones_after"], seen
    assert "streamlab" not in seen["permanent_zones_after"], seen
    assert seen["removed_again_changed"] is False, seen
    # Set up again as it was: every port, every source, in force.
    node = converged[host]
    assert set(firewall_cmd(node, "--zone=streamlab", "--list-ports").split()) == KIT_PORTS[host]
    sources = {*converged.values(), CONTROL_ADDRESS}
    assert set(firewall_cmd(node, "--zone=streamlab", "--list-sources").split()) == sources
    assert connects_from(converged[UNFIREWALLED], node, 9092).stdout.strip() == "OPEN"
