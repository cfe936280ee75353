"""Preflight of the component roles on a local inventory: each rule of a component's
tasks/validate.yml refuses its own bad input before any change, with a message that names the
setting or group and the fix. (test_lab_foundation.py checks on the test hosts that site.yml stops
before any change; test_flink_preflight.py covers Flink's TLS and port-range rules.)"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

import pytest

from conftest import LOCAL_COMPONENT_GROUPS as GROUPS
from conftest import LOCAL_HOSTS as HOSTS
from conftest import PlaybookRun, local_preflight

Change = Callable[[dict[str, tuple[str, ...]]], None]


def keep(groups: dict[str, tuple[str, ...]]) -> None:
    """The inventory as it is."""


def drop(name: str) -> Change:
    return lambda groups: groups.pop(name)


def hosts_of(name: str, *hosts: str) -> Change:
    return lambda groups: groups.update({name: hosts})


def preflight(tmp_path, components: list[str], change: Change, extravars: dict) -> PlaybookRun:
    groups = dict(GROUPS)
    change(groups)
    return local_preflight(tmp_path, {host: {} for host in HOSTS}, groups, components, extravars)


@pytest.mark.parametrize(
    ("component", "change", "extravars", "problem"),
    [
        ("zookeeper", drop("zookeeper"), {}, "The inventory has no 'zookeeper' group"),
        (
            "zookeeper",
            hosts_of("zookeeper", "a", "b"),
            {},
            "The 'zookeeper' group has 2 hosts: a ZooKeeper ensemble needs an odd number",
        ),
        (
            "zookeeper",
            keep,
            {"zookeeper_version": "3.1.0"},
            "zookeeper_version=3.1.0 has no known checksum; pinned versions: 3.9.4",
        ),
        (
            "zookeeper",
            keep,
            {"zookeeper_source": "pypi"},
            "value of zookeeper_source must be one of: apache, maven, got: pypi",
        ),
        (
            "zookeeper",
            keep,
            {"zookeeper_four_letter_words": ["ruok"]},
            "zookeeper_four_letter_words=['ruok'] must contain ruok and mntr",
        ),
        ("kafka", drop("kafka"), {}, "The inventory has no 'kafka' group"),
        (
            "kafka",
            keep,
            {"kafka_controller_count": 2},
            "The KRaft controller quorum would have 2 members: it needs an odd number",
        ),
        ("kafka", keep, {"kafka_version": "1.0"}, "kafka_version=1.0 has no known checksum"),
        (
            "kafka",
            keep,
            {"kafka_source": "pypi"},
            "value of kafka_source must be one of: apache, maven, got: pypi",
        ),
        (
            "flink",
            hosts_of("flink_jobmanager", "a", "b"),
            {},
            "The 'flink_jobmanager' group must hold exactly one host (it has 2)",
        ),
        (
            "flink",
            drop("flink_taskmanager"),
            {},
            "The inventory has no 'flink_taskmanager' group",
        ),
        ("flink", keep, {"flink_version": "1.0"}, "flink_version=1.0 has no known checksum"),
        (
            "flink",
            keep,
            {"flink_source": "cdn"},
            "value of flink_source must be one of: apache, pypi, got: cdn",
        ),
        (
            "flink",
            keep,
            {"flink_checkpoint_storage": "filesystem", "flink_checkpoint_dir": ""},
            "flink_checkpoint_storage=filesystem needs flink_checkpoint_dir",
        ),
        (
            "storm",
            drop("storm_nimbus"),
            {},
            "The 'storm_nimbus' group must hold exactly one host (it has 0)",
        ),
        (
            "storm",
            drop("storm_supervisor"),
            {},
            "The inventory has no 'storm_supervisor' group",
        ),
        (
            "storm",
            drop("zookeeper"),
            {},
            "Storm keeps its state in ZooKeeper, but the inventory has no 'zookeeper' group",
        ),
        ("storm", keep, {"storm_version": "1.0"}, "storm_version=1.0 has no known checksum"),
        (
            "storm",
            keep,
            {"storm_source": "cdn"},
            "value of storm_source must be one of: apache, maven, got: cdn",
        ),
        (
            "storm",
            keep,
            {"storm_ui_enabled": True},
            "storm_ui_enabled needs storm_source=apache",
        ),
        (
            "storm",
            keep,
            {"storm_supervisor_slots": 0},
            "storm_supervisor_slots must be at least 1 (got 0)",
        ),
        (
            "spark",
            hosts_of("spark_master", "a", "b"),
            {},
            "The 'spark_master' group must hold exactly one host (it has 2)",
        ),
        ("spark", drop("spark_worker"), {}, "The inventory has no 'spark_worker' group"),
        ("spark", keep, {"spark_version": "1.0"}, "spark_version=1.0 has no known checksum"),
        # Types and choices come from the role's argument specs (its validate entry point),
        # before the role's own rules and before any play changes anything.
        (
            "spark",
            keep,
            {"spark_source": "cdn"},
            "value of spark_source must be one of: apache, pypi, got: cdn",
        ),
        (
            "spark",
            keep,
            {"spark_worker_cores": "abc"},
            "argument 'spark_worker_cores' is of type str and we were unable to convert to int",
        ),
        # Each kind of whole number has its range (plugins/lookup/streamlab_setting_ranges.py).
        (
            "flink",
            keep,
            {"flink_rest_port": 70000},
            "flink_rest_port=70000 is out of range for a TCP or UDP port: give 1 to 65535",
        ),
        (
            "kafka",
            keep,
            {"kafka_heap_mb": 8},
            "kafka_heap_mb=8 is out of range for a size in MiB, 16 MiB to 1 TiB: "
            "give 16 to 1048576",
        ),
        (
            "zookeeper",
            keep,
            {"zookeeper_health_timeout_s": 0},
            "zookeeper_health_timeout_s=0 is out of range for a duration in seconds, up to a day: "
            "give 1 to 86400",
        ),
        (
            "spark",
            keep,
            {"spark_worker_cores": -2},
            "spark_worker_cores=-2 is out of range for a count: give at least 1",
        ),
    ],
)
def test_each_rule_refuses_its_bad_input_by_name(tmp_path, component, change, extravars, problem):
    refused = preflight(tmp_path, [component], change, extravars)
    assert refused.rc != 0, f"{problem}: preflight passed"
    assert problem in " ".join(refused.output.split()), refused.output[-3000:]
    assert refused.changed_nothing_on(HOSTS), refused.changed


def test_the_inventory_as_given_passes(tmp_path):
    passed = preflight(tmp_path, ["zookeeper", "kafka", "flink", "storm", "spark"], keep, {})
    assert passed.rc == 0, passed.output[-3000:]


def test_numbers_given_as_strings_on_the_command_line_pass(tmp_path):
    # -e key=3 on the command line arrives as the string "3".
    given = {"storm_supervisor_slots": "3", "kafka_controller_count": "3"}
    passed = preflight(tmp_path, ["zookeeper", "kafka", "flink", "storm", "spark"], keep, given)
    assert passed.rc == 0, passed.output[-3000:]


@pytest.fixture
def login_account():
    """An account with a login shell, as someone's own would be (removed after the test)."""
    name = f"sltest{os.getpid() % 100000}"
    subprocess.run(["useradd", "-M", "-s", "/bin/bash", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False)


def test_root_as_the_service_account_is_refused(tmp_path):
    refused = preflight(tmp_path, ["common"], keep, {"common_user": "root"})
    assert refused.rc != 0
    assert "common_user=root: the daemons must not run as root" in " ".join(refused.output.split())


@pytest.mark.skipif(os.geteuid() != 0, reason="creating an account needs root")
def test_an_account_someone_logs_in_with_is_refused_as_the_service_account(tmp_path, login_account):
    refused = preflight(tmp_path, ["common"], keep, {"common_user": login_account})
    assert refused.rc != 0
    assert (
        f"common_user={login_account} is an existing account on a (shell /bin/bash): the kit "
        "would set its shell to nologin"
    ) in " ".join(refused.output.split()), refused.output[-3000:]
    # An account the kit may own (none yet, as on a fresh host) passes.
    assert preflight(tmp_path, ["common"], keep, {"common_user": "slnew"}).rc == 0
