"""Flink on the test hosts: health, and a TaskManager leaving and coming back."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import REPO, daemon_down, flink_cli_run, on_lab_host, role_default, wait_until

pytestmark = pytest.mark.lab


def rest(lab: dict[str, str], path: str, body: bytes | None = None, headers: dict | None = None):
    request = urllib.request.Request(
        f"http://{lab['node1']}:8081{path}", data=body, headers=headers or {}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def overview(lab: dict[str, str]) -> dict:
    return rest(lab, "/overview")


def wait_for_taskmanagers(lab: dict[str, str], count: int) -> dict:
    """Wait until exactly count TaskManagers are registered with all their slots.

    A TaskManager that has just registered reports its slots a moment later (CI saw
    2 TaskManagers with 2 slots), so the count alone is not "back".
    """
    slots = role_default("flink", "flink_taskmanager_slots")
    return wait_until(
        lambda: overview(lab),
        lambda seen: seen.get("taskmanagers") == count and seen.get("slots-total") == count * slots,
        f"{count} TaskManagers with {count * slots} slots",
    )


def test_jobmanager_reports_both_taskmanagers_and_their_slots(converged):
    seen = overview(converged)
    assert seen["flink-version"] == role_default("flink", "flink_version")
    assert seen["taskmanagers"] == 2
    assert seen["slots-total"] == 4


def test_a_killed_taskmanager_leaves_and_a_started_one_returns(converged, tmp_path):
    with daemon_down("flink-taskmanager", "killed", "node3", tmp_path):
        wait_for_taskmanagers(converged, 1)  # fails the test if node3's does not leave
    wait_for_taskmanagers(converged, 2)  # ... or does not come back with its slots


def test_smoke_job_runs_to_completion_on_both_taskmanagers(converged):
    """Submitted with the Flink CLI on the JobManager host, as the kit does: the REST API's jar
    upload is off (flink_web_submit: false), so nobody who reaches port 8081 runs code with it."""
    project = REPO / "jobs" / "flink-smoke"
    version = role_default("flink", "flink_version")
    subprocess.run(
        ["mvn", "-q", "-B", "package", f"-Dflink.version={version}"], cwd=project, check=True
    )
    jar = project / "target" / "flink-smoke-1.0.jar"
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="jarfile"; '
            f'filename="{jar.name}"\r\nContent-Type: application/x-java-archive\r\n\r\n'
        ).encode()
        + jar.read_bytes()
        + f"\r\n--{boundary}--\r\n".encode()
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        rest(
            converged,
            "/jars/upload",
            body,
            {"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
    answer = refused.value.read().decode()
    assert refused.value.code == 400 and "POST request not allowed" in answer, answer
    with pytest.raises(urllib.error.HTTPError) as no_jars:
        rest(converged, "/jars")  # the jar handlers are not there at all
    assert no_jars.value.code == 404, no_jars.value
    remote_jar = f"/tmp/flink-smoke-{boundary}.jar"
    job_id = flink_cli_run(converged, jar, remote_jar, ["--parallelism", "4"], ["200000"])
    on_lab_host(converged["node1"], "rm", "-f", remote_jar)
    deadline = time.monotonic() + 180
    while (job := rest(converged, f"/jobs/{job_id}"))["state"] not in ("FINISHED", "FAILED"):
        assert time.monotonic() < deadline, f"job still {job['state']} after 180 s"
        time.sleep(1)
    assert job["state"] == "FINISHED", job
    hosts = {
        tm["taskmanager-id"]
        for vertex in job["vertices"]
        for tm in rest(converged, f"/jobs/{job_id}/vertices/{vertex['id']}/taskmanagers")[
            "taskmanagers"
        ]
    }
    assert hosts == {"node2-taskmanager", "node3-taskmanager"}, hosts
