"""Preflight stops, before any change, on a host whose running firewall the kit cannot open: ufw
active (the kit drives firewalld or its own nftables table), or firewalld running (or the kit's
own firewall on, as it is by default on Linux) with a cluster address or extra source it cannot
take as a source (a host name). It says which firewall each host will be behind.

Run against the embedded default (inventory/local, a local connection). ufw and firewall-cmd are
stand-ins placed first on the PATH the modules see, printing what the real programs print; the
real firewalld path runs in the lab (test_lab_firewall.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import LOCAL_INVENTORY, run_playbook

# What `ufw status` and `firewall-cmd --state` print (ufw 0.36, firewalld 1.3).
UFW_ACTIVE = (
    "Status: active\n\n"
    "To                         Action      From\n"
    "--                         ------      ----\n"
    "22/tcp                     ALLOW       Anywhere\n"
)
UFW_INACTIVE = "Status: inactive\n"
FIREWALLD_RUNNING = "running\n"


def stand_ins(tmp_path: Path, **outputs: str) -> dict[str, str]:
    """A directory of scripts named after each program, printing its output; returns the PATH
    (as environment for the playbook) that finds them first."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for program, output in outputs.items():
        script = directory / program.replace("_", "-")
        script.write_text(f"#!/bin/sh\ncat <<'OUT'\n{output}OUT\n")
        script.chmod(0o755)
    return {"PATH": f"{directory}:{os.environ['PATH']}"}


def local_inventory(tmp_path: Path, **host_vars: str) -> Path:
    target = tmp_path / "inventory"
    shutil.copytree(LOCAL_INVENTORY, target)
    hosts = target / "hosts.yml"
    data = yaml.safe_load(hosts.read_text())
    data["all"]["hosts"]["localhost"].update(host_vars)
    hosts.write_text(yaml.safe_dump(data))
    return target


def preflight(tmp_path: Path, inventory: Path, envvars: dict, extravars: dict | None = None):
    return run_playbook(
        "preflight.yml",
        inventory,
        extravars={"preflight_components": ["common"], **(extravars or {})},
        envvars=envvars,
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize(
    "programs,host_vars,extravars,message",
    [
        (
            {"ufw": UFW_ACTIVE},
            {},
            {},
            "ufw is active on localhost, and the kit admits its ports through firewalld or its own "
            "nftables table, not ufw",
        ),
        (
            {"firewall_cmd": FIREWALLD_RUNNING},
            {"streamlab_address": "lab-master.example"},
            {},
            "the cluster address of localhost is 'lab-master.example', which a firewall cannot "
            "admit as a source",
        ),
        (
            {},
            {"streamlab_address": "lab-master.example"},
            {"firewall_enabled": True},
            "the kit's own firewall is on for localhost, and the cluster address of "
            "localhost is 'lab-master.example', which a firewall cannot admit as a source",
        ),
        # The shipped default on a Linux host without firewalld turns the kit's table on.
        (
            {},
            {"streamlab_address": "lab-master.example"},
            {},
            "the kit's own firewall is on for localhost, and the cluster address of "
            "localhost is 'lab-master.example', which a firewall cannot admit as a source",
        ),
        (
            {},
            {},
            {"firewall_enabled": "maybe"},
            "firewall_enabled is 'maybe': give auto (the kit's nftables table on Linux hosts that "
            "run no firewalld, nothing on macOS), true or false",
        ),
        (
            {"firewall_cmd": FIREWALLD_RUNNING},
            {},
            {"firewall_extra_sources": ["10.0.0.0/24", "monitoring-host"]},
            "'monitoring-host' (firewall_control_address or firewall_extra_sources) is not an "
            "IPv4 or IPv6 address or network",
        ),
    ],
)
def test_preflight_refuses_a_firewall_the_kit_cannot_open(
    tmp_path, programs, host_vars, extravars, message
):
    run = preflight(
        tmp_path, local_inventory(tmp_path, **host_vars), stand_ins(tmp_path, **programs), extravars
    )
    assert run.rc != 0, run.output[-3000:]
    assert message in " ".join(run.output.split()), run.output[-3000:]


def test_preflight_refuses_the_kits_table_where_nftables_refuses_root(tmp_path):
    """As nft answers in an unprivileged container: the table is never half loaded by site.yml."""
    envvars = stand_ins(tmp_path)
    nft = tmp_path / "bin" / "nft"
    nft.write_text(
        "#!/bin/sh\necho 'Error: Could not process rule: Operation not permitted' >&2\nexit 1\n"
    )
    nft.chmod(0o755)
    inventory = local_inventory(tmp_path)
    run = preflight(tmp_path, inventory, envvars)
    assert run.rc != 0, run.output[-3000:]
    said = " ".join(run.output.split())
    assert (
        "The kit's own nftables table is wanted on localhost (firewall_enabled: auto, no "
        "firewalld runs), but root may not load nftables tables there (Error: Could not process "
        "rule: Operation not permitted)" in said
    ), run.output[-3000:]
    assert "Set firewall_enabled: false for this host" in said
    # Off, the table is not wanted and nft is not asked.
    run = preflight(tmp_path, inventory, envvars, {"firewall_enabled": False})
    assert run.rc == 0, run.output[-3000:]


def test_preflight_passes_an_inactive_ufw_and_a_firewalld_with_addresses(tmp_path):
    programs = stand_ins(tmp_path, ufw=UFW_INACTIVE, firewall_cmd=FIREWALLD_RUNNING)
    extravars = {"firewall_extra_sources": ["10.0.0.0/24", "fd00::5"]}
    run = preflight(tmp_path, local_inventory(tmp_path), programs, extravars)
    assert run.rc == 0, run.output[-3000:]
    # Both checks ran (firewall-cmd said running) and passed each address.
    assert "ok: [localhost] => (item=localhost)" in run.output, run.output[-3000:]
    assert "ok: [localhost] => (item=fd00::5)" in run.output, run.output[-3000:]


@pytest.mark.parametrize(
    "extravars,said",
    [
        # The shipped default where no firewall runs on Linux, and the same asked for by -e.
        ({}, "no firewall runs: the kit turns on its own nftables table inet streamlab"),
        ({"firewall_enabled": "true"}, "no firewall runs: the kit turns on its own nftables table"),
        ({"firewall_enabled": True}, "only (firewall_enabled: true)"),
        (
            {"firewall_enabled": "False"},
            "no firewall runs, and the kit turns none on (firewall_enabled: false): the kit's "
            "ports here accept connections from any address",
        ),
        ({"firewall_enabled": "no"}, "the kit turns none on (firewall_enabled: no)"),
    ],
)
def test_preflight_says_which_firewall_each_host_will_be_behind(tmp_path, extravars, said):
    run = preflight(tmp_path, local_inventory(tmp_path), stand_ins(tmp_path), extravars)
    assert run.rc == 0, run.output[-3000:]
    assert said in " ".join(run.output.split()), run.output[-3000:]
