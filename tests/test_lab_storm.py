"""Storm on the test hosts: Nimbus health over Thrift, a supervisor leaving and coming back, and a
tiny topology running on both supervisors."""

from __future__ import annotations

import json
import shlex
import subprocess
import uuid

import pytest

from conftest import LAB_SSH_OPTIONS, REPO, daemon_down, on_lab_host, storm_probe, wait_until

pytestmark = pytest.mark.lab

# What a probe may see while Nimbus or a topology changes state: no answer, or not JSON yet.
PROBE_ERRORS = (OSError, ValueError, IndexError)
# The storm role's probe on the Nimbus host (node1).
PROBE = "/opt/streamlab/bin/storm-probe"


def wait_for_supervisors(lab: dict[str, str], count: int) -> dict:
    return wait_until(
        lambda: storm_probe(lab, "cluster"),
        lambda seen: len(seen.get("supervisors", [])) == count,
        f"{count} Storm supervisors",
        retry_on=PROBE_ERRORS,
    )


def test_nimbus_leads_and_reports_both_supervisors_and_their_slots(converged):
    seen = storm_probe(converged, "cluster")
    leaders = [n for n in seen["nimbuses"] if n["leader"]]
    assert [(n["host"], n["version"]) for n in leaders] == [(converged["node1"], "2.8.3")]
    hosts = sorted(s["host"] for s in seen["supervisors"])
    assert hosts == [converged["node2"], converged["node3"]]
    assert seen["slots_total"] == 4


def test_a_stopped_supervisor_leaves_and_a_started_one_returns(converged, tmp_path):
    with daemon_down("storm-supervisor", "stopped", "node3", tmp_path):
        seen = wait_for_supervisors(converged, 1)
        assert [s["host"] for s in seen["supervisors"]] == [converged["node2"]]
        assert seen["slots_total"] == 2
    assert wait_for_supervisors(converged, 2)["slots_total"] == 4


def test_a_tiny_topology_runs_on_both_supervisors_and_is_killed_cleanly(converged):
    project = REPO / "jobs" / "storm-smoke"
    subprocess.run(["mvn", "-q", "-B", "package"], cwd=project, check=True)
    jar, remote_jar = project / "target" / "storm-smoke-1.0.jar", "/tmp/storm-smoke-1.0.jar"
    nimbus = converged["node1"]
    subprocess.run(
        ["scp", *LAB_SSH_OPTIONS, str(jar), f"root@{nimbus}:{remote_jar}"],
        check=True,
        capture_output=True,
    )
    name, workers, count = f"smoke-{uuid.uuid4().hex[:8]}", 2, 5000
    # Storm's even scheduler spreads a topology's workers over the supervisors that have free
    # slots when it arrives: first both supervisors must have reported in with every slot free
    # (a supervisor restarted by an earlier test, or a killed topology's workers, may not yet).
    workers_hosts = {converged["node2"], converged["node3"]}
    wait_until(
        lambda: storm_probe(converged, "cluster"),
        lambda summary: (
            {
                s["host"]
                for s in summary.get("supervisors", [])
                if s["slots_total"] > 0 and s["slots_used"] == 0
            }
            == workers_hosts
        ),
        "both supervisors in Nimbus' view with every slot free",
        retry_on=PROBE_ERRORS,
    )
    # What `storm jar` does: the jar and Storm's worker class path; storm.yaml names Nimbus.
    classpath = f"{remote_jar}:/opt/streamlab/storm/lib-worker/*:/etc/streamlab/storm"
    submit = on_lab_host(
        nimbus,
        *("java", "-cp", shlex.quote(classpath), f"-Dstorm.jar={remote_jar}"),
        *("streamlab.smoke.SmokeTopology", name, str(workers), str(count)),
        timeout_s=120,
    )
    assert submit.returncode == 0, submit.stdout[-2000:] + submit.stderr[-2000:]
    try:
        # What the experiment waits with: one probe JVM, until every executor is up.
        up = on_lab_host(converged["node1"], PROBE, "running", name, "120", timeout_s=150)
        assert up.returncode == 0, up.stdout + up.stderr[-2000:]
        running = json.loads(up.stdout)
        assert running["status"] == "ACTIVE" and running["executors"], running
        assert all(e["uptime_s"] > 0 for e in running["executors"]), running
        seen = wait_until(
            lambda: storm_probe(converged, "topology", name),
            lambda topology: (
                topology.get("status") == "ACTIVE"
                and topology.get("spout_acked") == workers * count
            ),
            f"every one of the {workers * count} tuple trees of {name} acked",
            timeout_s=240,
            retry_on=PROBE_ERRORS,
        )
    finally:
        killed = storm_probe(converged, "kill", name, "0")
    assert killed == {"killed": name, "wait_s": 0}
    gone = on_lab_host(converged["node1"], PROBE, "gone", name, "120", timeout_s=150)
    assert gone.returncode == 0, gone.stdout + gone.stderr[-2000:]
    assert json.loads(gone.stdout)["error"] == f"no topology named {name}"
    never = on_lab_host(converged["node1"], PROBE, "running", name, "1", timeout_s=60)
    assert never.returncode == 4, never.stdout + never.stderr[-2000:]
    assert json.loads(never.stdout)["waited_ms"] >= 1000
    for component in ("numbers", "sum"):
        hosts = {e["host"] for e in seen["executors"] if e["component"] == component}
        assert hosts == workers_hosts, (component, seen["executors"])
    cluster = wait_until(
        lambda: storm_probe(converged, "cluster"),
        lambda summary: (
            name not in [t["name"] for t in summary["topologies"]] and summary["slots_used"] == 0
        ),
        f"{name} gone and its worker slots free",
        retry_on=PROBE_ERRORS,
    )
    assert cluster["slots_free"] == 4
    assert storm_probe(converged, "topology", name) == {"error": f"no topology named {name}"}
