"""Preflight of the flink role: TLS switches that differ between Flink hosts, and a TaskManager RPC
port range a restarted TaskManager could not move along, are refused before any change, naming the
setting and the fix."""

from __future__ import annotations

import pytest

from conftest import PlaybookRun, local_preflight

GROUPS = {"flink_jobmanager": ["jm"], "flink_taskmanager": ["tm"]}


def preflight(tmp_path, hosts: dict) -> PlaybookRun:
    return local_preflight(tmp_path, hosts, GROUPS, ["flink"])


@pytest.mark.parametrize(
    ("ports", "problem"),
    [
        ("6130", "flink_taskmanager_rpc_ports=6130 is not a port range FIRST-LAST"),
        (6130, "flink_taskmanager_rpc_ports=6130 is not a port range FIRST-LAST"),  # a YAML int
        ("6130-6130", "flink_taskmanager_rpc_ports=6130-6130 holds fewer than 2 ports"),
        ("6120-6124", "flink_taskmanager_rpc_ports=6120-6124 holds 6123, 6124, 6121, which Flink"),
        ("6129-6135", "flink_taskmanager_rpc_ports=6129-6135 holds 6129, which Flink uses"),
    ],
)
def test_a_taskmanager_rpc_port_range_a_restart_cannot_move_along_is_refused(
    tmp_path, ports, problem
):
    hosts = {"jm": {}, "tm": {"flink_taskmanager_rpc_ports": ports}}
    refused = preflight(tmp_path, hosts)
    assert refused.rc != 0
    assert problem in " ".join(refused.output.split()), refused.output[-3000:]
    assert refused.changed == {"jm": 0, "tm": 0}


def test_the_default_taskmanager_rpc_port_range_passes(tmp_path):
    passed = preflight(tmp_path, {"jm": {}, "tm": {}})
    assert "flink_taskmanager_rpc_ports" not in passed.output, passed.output[-3000:]
    assert passed.rc == 0, passed.output[-3000:]


@pytest.mark.parametrize("setter", ["jm", "tm"])
def test_flink_hosts_with_different_tls_switches_are_refused(tmp_path, setter):
    """Whichever host sets the switch (the first of the play, which runs the check, or another),
    the other has the role's default and the two differ."""
    hosts: dict[str, dict] = {"jm": {}, "tm": {}}
    hosts[setter]["flink_tls_rest"] = True
    refused = preflight(tmp_path, hosts)
    assert refused.rc != 0
    message = " ".join(refused.output.split())
    assert "flink_tls_rest differs between the Flink hosts (jm, tm)" in message, refused.output[
        -3000:
    ]
    assert "flink_tls_internal differs" not in message
