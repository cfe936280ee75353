"""Storm on the test hosts: Nimbus health over Thrift, and a supervisor leaving and coming back."""

from __future__ import annotations

import pytest

from conftest import set_daemon, storm_probe, wait_until

pytestmark = pytest.mark.lab


def wait_for_supervisors(lab: dict[str, str], count: int) -> dict:
    return wait_until(
        lambda: storm_probe(lab, "cluster"),
        lambda seen: len(seen.get("supervisors", [])) == count,
        f"{count} Storm supervisors",
        retry_on=(OSError, ValueError, IndexError),
    )


def test_nimbus_leads_and_reports_both_supervisors_and_their_slots(converged):
    seen = storm_probe(converged, "cluster")
    leaders = [n for n in seen["nimbuses"] if n["leader"]]
    assert [(n["host"], n["version"]) for n in leaders] == [(converged["node1"], "2.8.3")]
    hosts = sorted(s["host"] for s in seen["supervisors"])
    assert hosts == [converged["node2"], converged["node3"]]
    assert seen["slots_total"] == 4


def test_a_stopped_supervisor_leaves_and_a_started_one_returns(converged, tmp_path):
    set_daemon("storm-supervisor", "stopped", "node3", tmp_path)
    seen = wait_for_supervisors(converged, 1)
    assert [s["host"] for s in seen["supervisors"]] == [converged["node2"]]
    assert seen["slots_total"] == 2
    set_daemon("storm-supervisor", "started", "node3", tmp_path)
    assert wait_for_supervisors(converged, 2)["slots_total"] == 4
