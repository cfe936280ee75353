"""The kit's ports admitted from the cluster's addresses and the control node only.

node1 (the master and driver host) and node3 (a worker) run firewalld, as a Rocky 9 host does out
of the box (tests/lab/testhosts.py: each has its own D-Bus and configuration, rules in its own
network namespace): the kit admits its ports in its own zone. node2 (a worker) runs no firewall
of its own, and the kit's own is on there as the shipped default has it (firewall_enabled: auto,
not set in the inventory: an nftables table that admits the kit's ports from the same sources and
refuses them to every other address); it has a second interface with an address in no
inventory. Every lab test runs against these rules: the whole lab's health, experiments, faults
and the analysis on the Spark cluster pass through them, in both directions. These tests show
what the rules are, what they refuse, and that teardown's purge removes them.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
from collections.abc import Iterator

import pytest
import yaml

from conftest import (
    LAB_INVENTORY,
    bridge_address_and_routes,
    on_lab_host,
    run_playbook,
    tcp_connects,
)

pytestmark = pytest.mark.lab

FIREWALLED = ("node1", "node3")
KIT_FIREWALLED = "node2"
SECOND_ADDRESS = "10.78.0.12"  # node2's second interface (tests/lab/testhosts.py)
CONTROL_ADDRESS = "10.77.0.1"  # the lab bridge: where Ansible and the tests connect from
SUBNET = "10.77.0."
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
        "6130-6139/tcp",
        "6121/tcp",
        "6125-6129/tcp",
        "6628/tcp",
        "6700-6701/tcp",
        "7078/tcp",
        "8082/tcp",
        "7110-7126/tcp",
    },
}
# node2 runs what node3 runs; its table holds the kit's ports, not SSH (which it leaves alone).
KIT_PORTS["node2"] = KIT_PORTS["node3"] - {"22/tcp"}
# What the lab surely has listening on each (a subset of the above). A TaskManager's RPC port
# moves within its range at each start (test_lab_flink checks it).
SURELY_LISTENING = {
    "node1": {22, 2181, 9092, 6123, 8081, 6627, 7077},
    "node2": {2181, 9092, 6121, 6628, 7078},
    "node3": {22, 2181, 9092, 6121, 7078},
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
def listener(host_address: str, port: int, bind: str | None = None) -> Iterator[None]:
    """A TCP listener on the host's cluster address (or `bind`: "0.0.0.0" for every interface)
    for up to 60 s (stopped on leaving)."""
    bind = host_address if bind is None else bind
    script = (
        f"import socket,time; s=socket.socket(); s.bind(({bind!r}, {port})); s.listen(8); "
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
    node, other = converged[host], converged[KIT_FIREWALLED]
    with listener(node, UNOPENED_PORT):
        # It listens and answers on the host itself ...
        assert connects_from(node, node, UNOPENED_PORT).stdout.strip() == "OPEN"
        # ... but another cluster host is refused, while the kit's Kafka port answers it.
        refused = connects_from(other, node, UNOPENED_PORT).stdout.strip()
        assert refused.startswith(("OSError", "ConnectionRefusedError")), refused
        assert connects_from(other, node, 9092).stdout.strip() == "OPEN"
    # The same listener on node2, whose kit table leaves other ports alone, is reached: the
    # refusal is firewalld's.
    with listener(other, UNOPENED_PORT):
        assert connects_from(node, other, UNOPENED_PORT).stdout.strip() == "OPEN"


def stranger_and_second_route() -> contextlib.AbstractContextManager[None]:
    """This machine gains STRANGER_ADDRESS on the lab bridge (an address in no inventory) and a
    route to node2's second address through node2's cluster address."""
    return bridge_address_and_routes("lab0", STRANGER_ADDRESS, {SECOND_ADDRESS: f"{SUBNET}12"})


def test_a_kit_port_is_refused_to_an_address_outside_the_inventory(converged):
    with stranger_and_second_route():
        for host in (*FIREWALLED, KIT_FIREWALLED):
            assert tcp_connects(converged[host], 9092, source=CONTROL_ADDRESS), host
            assert not tcp_connects(converged[host], 9092, source=STRANGER_ADDRESS), host
        # node2's table leaves other ports alone: the stranger reaches a listener there, so the
        # refusal is the rules'.
        with listener(converged[KIT_FIREWALLED], UNOPENED_PORT):
            assert tcp_connects(converged[KIT_FIREWALLED], UNOPENED_PORT, source=STRANGER_ADDRESS)


def nft_json(address: str, *arguments: str) -> list[dict]:
    done = on_lab_host(address, "nft", "-j", "list", *arguments)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["nftables"]


def set_elements(address: str, name: str) -> set[str]:
    """The elements of one set of the kit's table: "10.77.0.11", "6700-6701"."""
    (found,) = [
        item["set"] for item in nft_json(address, "set", "inet", "streamlab", name) if "set" in item
    ]
    elements: set[str] = set()
    for element in found.get("elem", []):
        if isinstance(element, dict) and "range" in element:
            elements.add("{}-{}".format(*element["range"]))
        elif isinstance(element, dict) and "prefix" in element:
            elements.add("{addr}/{len}".format(**element["prefix"]))
        else:
            elements.add(str(element))
    return elements


def listening_sockets(address: str) -> set[tuple[str, int]]:
    """(local address, port) of every TCP socket listening on a test host."""
    listening = on_lab_host(address, "ss -ltnH")
    assert listening.returncode == 0, listening.stderr
    sockets = set()
    for line in listening.stdout.splitlines():
        local, _, port = line.split()[3].rpartition(":")
        # A JVM's IPv4 socket on a dual-stack socket shows as [::ffff:10.77.0.12].
        sockets.add((local.strip("[]").removeprefix("::ffff:"), int(port)))
    return sockets


def refused_ports(address: str) -> dict[str, set[int]]:
    """Protocol -> the port numbers the kit's table refuses to addresses outside its sources
    (the rules of its chain `refuse`, one per daemon: "tcp dport { 9092, 6700-6701 } ...")."""
    refused: dict[str, set[int]] = {"tcp": set(), "udp": set()}
    for item in nft_json(address, "chain", "inet", "streamlab", "refuse"):
        for expression in item.get("rule", {}).get("expr", []):
            match = expression.get("match")
            if not match or "payload" not in match["left"]:
                continue
            protocol = match["left"]["payload"]["protocol"]
            right = match["right"]
            elements = right["set"] if isinstance(right, dict) and "set" in right else [right]
            for element in elements:
                if isinstance(element, dict) and "range" in element:
                    first, last = element["range"]
                    refused[protocol].update(range(first, last + 1))
                else:
                    refused[protocol].add(int(element))
    return refused


def test_the_kits_table_admits_its_ports_from_the_cluster_and_control_node_only(converged):
    node = converged[KIT_FIREWALLED]
    kit_tcp = admitted({spec for spec in KIT_PORTS[KIT_FIREWALLED] if spec.endswith("/tcp")})
    assert refused_ports(node) == {"tcp": kit_tcp, "udp": set()}
    addresses = set_elements(node, "sources_v4")
    assert admitted_addresses(addresses) == {*converged.values(), CONTROL_ADDRESS}, addresses
    sockets = listening_sockets(node)
    assert {port for _, port in sockets} >= SURELY_LISTENING[KIT_FIREWALLED], sockets
    # Every daemon's socket is bound to the cluster address, or refused to other addresses by
    # the table; Storm's supervisor and workers listen on every interface, so some are only the
    # latter.
    open_everywhere = {(a, p) for a, p in sockets if a not in (node, "127.0.0.1", "::1")}
    assert any(p == 6628 for _, p in open_everywhere), sockets
    unguarded = {(a, p) for a, p in open_everywhere if p not in kit_tcp}
    assert unguarded == set(), unguarded


def admitted_addresses(elements: set[str]) -> set[str]:
    """The single addresses in a set's elements ("10.77.0.11-10.77.0.13" as three)."""
    addresses: set[str] = set()
    for element in elements:
        first, _, last = element.partition("-")
        if not last:
            addresses.add(first)
            continue
        base, start = first.rsplit(".", 1)
        addresses.update(f"{base}.{n}" for n in range(int(start), int(last.rsplit(".", 1)[1]) + 1))
    return addresses


def test_every_daemon_on_the_host_with_two_interfaces_is_closed_to_other_addresses(converged):
    """node2 has a second address (SECOND_ADDRESS): whatever a daemon listens on, a stranger
    reaches none of it, on either address; the control node reaches the sockets open on every
    interface through the second address too, so the refusal is the rules'."""
    node = converged[KIT_FIREWALLED]
    sockets = {(a, p) for a, p in listening_sockets(node) if p != 22}  # sshd: not the kit's
    assert sockets, "no daemon listens on node2"
    with stranger_and_second_route():
        reached = {
            (address, port)
            for _, port in sockets
            for address in (node, SECOND_ADDRESS)
            if tcp_connects(address, port, source=STRANGER_ADDRESS, timeout_s=2)
        }
        assert reached == set(), reached
        everywhere = sorted(p for a, p in sockets if a in ("0.0.0.0", "*", "::"))
        assert everywhere, sockets
        for port in everywhere:
            assert tcp_connects(SECOND_ADDRESS, port, source=CONTROL_ADDRESS), port
        # A socket on every interface that is not the kit's is reached by the stranger there.
        with listener(node, UNOPENED_PORT, bind="0.0.0.0"):
            assert tcp_connects(SECOND_ADDRESS, UNOPENED_PORT, source=STRANGER_ADDRESS)


def what_was_seen(output: str) -> dict:
    """The message of the removal playbook's last task, "Report what was seen"."""
    block = output.split("Report what was seen", 1)[1]
    return yaml.safe_load(block[block.index("{") : block.index("\n}") + 2])["msg"]


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
    seen = what_was_seen(done.output)
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
    assert connects_from(converged[KIT_FIREWALLED], node, 9092).stdout.strip() == "OPEN"


def test_purge_removes_the_kits_table_and_finds_nothing_after(converged, tmp_path):
    """The same on node2, whose kit table teardown with purge drops from the kernel with its
    files; the playbook puts the files back and loads them whatever happens (tests/playbooks)."""
    done = run_playbook(
        "../tests/playbooks/firewall_table_removal.yml",  # resolved against playbooks/
        LAB_INVENTORY,
        limit=KIT_FIREWALLED,
        tmp_path=tmp_path,
    )
    assert done.rc == 0, done.output[-4000:]
    seen = what_was_seen(done.output)
    assert seen["found_before"] == "inet streamlab", seen
    assert seen["found_after"] == "", seen
    assert "table inet streamlab" not in seen["tables_after"], seen
    assert seen["ports_dir_after"] is False, seen
    # Turned off (firewall_enabled false), the table goes the same way at the next converge.
    assert "table inet streamlab" not in seen["tables_turned_off"], seen
    assert seen["file_turned_off"] is False, seen
    # In force again: the cluster reaches Kafka there, a stranger would not (tested above).
    node = converged[KIT_FIREWALLED]
    assert set_elements(node, "sources_v4")
    assert connects_from(converged["node1"], node, 9092).stdout.strip() == "OPEN"
