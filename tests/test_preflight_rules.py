"""Preflight of the component roles on a local inventory: each rule of a component's
tasks/validate.yml refuses its own bad input before any change, with a message that names the
setting or group and the fix. (test_lab_foundation.py checks on the test hosts that site.yml stops
before any change; test_flink_preflight.py covers Flink's TLS and port-range rules.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conftest import PlaybookRun, local_preflight

HOSTS = ("a", "b", "c")
# Every group of every component on three local hosts: one host where a group needs exactly one.
GROUPS = {
    "zookeeper": HOSTS,
    "kafka": HOSTS,
    "flink_jobmanager": ("a",),
    "flink_taskmanager": ("b", "c"),
    "storm_nimbus": ("a",),
    "storm_supervisor": ("b", "c"),
    "spark_master": ("a",),
    "spark_worker": ("b", "c"),
}

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
            "zookeeper_source=pypi is not pinned for 3.9.4; pinned sources:",
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
            "kafka_source=pypi is not pinned for 4.1.1; pinned sources: apache, maven",
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
        ("flink", keep, {"flink_source": "cdn"}, "flink_source=cdn is not pinned for 2.1.1"),
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
        ("storm", keep, {"storm_source": "cdn"}, "storm_source=cdn is not pinned for 2.8.3"),
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
        ("spark", keep, {"spark_source": "cdn"}, "spark_source=cdn is not pinned for 4.0.1"),
    ],
)
def test_each_rule_refuses_its_bad_input_by_name(tmp_path, component, change, extravars, problem):
    refused = preflight(tmp_path, [component], change, extravars)
    assert refused.rc != 0, f"{problem}: preflight passed"
    assert problem in " ".join(refused.output.split()), refused.output[-3000:]
    assert all(count == 0 for count in refused.changed.values()), refused.changed


def test_the_inventory_as_given_passes(tmp_path):
    passed = preflight(tmp_path, ["zookeeper", "kafka", "flink", "storm", "spark"], keep, {})
    assert passed.rc == 0, passed.output[-3000:]


def test_numbers_given_as_strings_on_the_command_line_pass(tmp_path):
    # -e key=3 on the command line arrives as the string "3".
    given = {"storm_supervisor_slots": "3", "kafka_controller_count": "3"}
    passed = preflight(tmp_path, ["zookeeper", "kafka", "flink", "storm", "spark"], keep, given)
    assert passed.rc == 0, passed.output[-3000:]
