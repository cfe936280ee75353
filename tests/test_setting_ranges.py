"""The range of each kind of whole-number setting (plugins/lookup/streamlab_setting_ranges.py)."""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from conftest import REPO

SPEC = importlib.util.spec_from_file_location(
    "streamlab_setting_ranges", REPO / "plugins" / "lookup" / "streamlab_setting_ranges.py"
)
ranges = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(ranges)


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("flink_rest_port", 65535, None),
        ("flink_rest_port", 0, "flink_rest_port=0 is out of range for a TCP or UDP port"),
        ("flink_rest_port", 65536, "give 1 to 65535"),
        ("flink_restart_delay_s", 0, None),
        ("flink_heartbeat_timeout_ms", 0, "give 1 to 86400000"),
        ("zookeeper_health_timeout_s", 86401, "a duration in seconds, up to a day"),
        ("kafka_heap_mb", 15, "give 16 to 1048576"),
        ("kafka_tls_days", 0, "a number of days"),
        ("flink_restart_attempts", 0, None),
        ("storm_supervisor_slots", "2", None),
        ("storm_supervisor_slots", 0, "storm_supervisor_slots=0 is out of range for a count"),
        ("spark_worker_cores", "abc", "spark_worker_cores=abc is not a whole number"),
        # Values a component documents as meaning something: no limit, off, no acking.
        ("zookeeper_max_client_connections", 0, None),
        ("flink_heartbeat_rpc_failure_threshold", -1, None),
        ("flink_heartbeat_rpc_failure_threshold", -2, "a threshold (-1 turns it off)"),
        ("storm_acker_executors", 0, None),
    ],
)
def test_each_kind_of_setting_has_its_range(name, value, problem):
    found = ranges.problem(name, value)
    assert found is None if problem is None else problem in found, found


def test_every_shipped_default_is_in_its_range():
    checked = 0
    for path in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        options = yaml.safe_load(path.read_text())["argument_specs"]["main"].get("options") or {}
        for name, option in options.items():
            if option.get("type") == "int" and isinstance(option.get("default"), int):
                assert ranges.problem(name, option["default"]) is None, (path, name)
                checked += 1
    assert checked > 50
