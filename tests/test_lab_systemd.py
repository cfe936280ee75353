"""node3 is a Debian 13 host booted with systemd (tests/lab/systemd_host.py): what only such a
host can show. The kit's unit keeps supervisord alive; restarting the unit brings every daemon
back; a reboot of the host ends with every daemon running and the lab healthy, with no Ansible
run in between."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import (
    LAB_INVENTORY,
    REPO,
    on_lab_host,
    run_playbook,
    setup_and_call_passed,
    wait_until,
)

sys.path.insert(0, str(REPO / "tests" / "lab"))
import systemd_host  # noqa: E402
import testhosts  # noqa: E402

pytestmark = pytest.mark.lab

HOST = "node3"
UNIT = "streamlab-supervisor.service"
SUPERVISORCTL = ("/opt/streamlab/venv/bin/supervisorctl", "-c", "/etc/streamlab/supervisord.conf")
# What the lab's node3 runs (inventory groups zookeeper, kafka, flink_taskmanager,
# storm_supervisor, spark_worker): every one must come back.
PROGRAMS = {
    "zookeeper",
    "kafka",
    "flink-taskmanager",
    "storm-supervisor",
    "spark-worker",
}
# Set on the host before a reboot; /run is a tmpfs, so a real boot leaves no trace of it.
MARKER = "/run/streamlab-test-before-reboot"


def on_node3(lab: dict[str, str], *command: str, timeout_s: float = 60) -> str:
    done = on_lab_host(lab[HOST], *command, timeout_s=timeout_s)
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    return done.stdout.strip()


def unit_properties(lab: dict[str, str], *names: str) -> dict[str, str]:
    shown = on_node3(lab, "systemctl", "show", UNIT, *(f"--property={n}" for n in names))
    return dict(line.split("=", 1) for line in shown.splitlines())


def program_pids(lab: dict[str, str]) -> dict[str, int]:
    """Program -> pid of every program supervisord runs on node3 (fails unless all RUNNING)."""
    done = on_lab_host(lab[HOST], *SUPERVISORCTL, "status")
    pids = {}
    for line in done.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "RUNNING" and fields[2] == "pid":
            pids[fields[0]] = int(fields[3].rstrip(","))
    return pids


def all_running(pids: dict[str, int]) -> bool:
    return set(pids) == PROGRAMS


def healthy(tmp_path: Path) -> None:
    """Every health check of the lab passes (playbooks/health.yml)."""
    run = run_playbook("health.yml", LAB_INVENTORY, tmp_path=tmp_path)
    assert run.rc == 0, run.output[-4000:]


@pytest.fixture
def node3_restored(converged, tmp_path, request):
    """A failed test must not leave node3 down for the tests after it: `testhosts.py up` boots
    it again if it is not running (its disk keeps what site.yml installed), then every daemon
    of the lab is started (playbooks/fault.yml -e fault=recover)."""
    yield converged
    if not setup_and_call_passed(request):
        up = subprocess.run(
            [sys.executable, str(REPO / "tests" / "lab" / "testhosts.py"), "up"]
            + ["--hosts", str(len(converged))],
            capture_output=True,
            text=True,
            check=False,
        )
        assert up.returncode == 0, up.stdout + up.stderr
        run = run_playbook(
            "fault.yml", LAB_INVENTORY, extravars={"fault": "recover"}, tmp_path=tmp_path
        )
        assert run.rc == 0, run.output[-4000:]


def test_node3_is_debian_13_booted_with_systemd_and_the_kit_unit_runs_supervisord(converged):
    lab = converged
    assert on_node3(lab, "cat", "/proc/1/comm") == "systemd"
    assert on_node3(lab, ". /etc/os-release && echo $ID $VERSION_ID") == "debian 13"
    assert on_node3(lab, "systemctl", "is-system-running") == "running"
    assert on_node3(lab, "systemctl", "is-enabled", UNIT) == "enabled"
    unit = unit_properties(lab, "ActiveState", "MainPID", "KillMode", "Restart")
    assert (unit["ActiveState"], unit["KillMode"], unit["Restart"]) == (
        "active",
        "mixed",
        "on-failure",
    )
    assert int(unit["MainPID"]) == int(on_node3(lab, *SUPERVISORCTL, "pid"))
    # Debian 13's own JDK and Python, not this machine's.
    assert 'version "21.' in on_lab_host(lab[HOST], "java", "-version").stderr
    assert on_node3(lab, "python3 -c 'import sys; print(sys.version_info[:2])'") == "(3, 13)"
    # A fresh host's Python: no `packaging` library, which ansible.builtin.pip would need (the
    # kit installs wheels with its virtualenv's own pip instead).
    assert on_lab_host(lab[HOST], "python3 -c 'import packaging'").returncode == 1
    assert all_running(program_pids(lab)), program_pids(lab)


def test_restarting_the_unit_brings_every_daemon_back_healthy(node3_restored, tmp_path):
    lab = node3_restored
    before = program_pids(lab)
    assert all_running(before), before
    on_node3(lab, "systemctl", "restart", UNIT, timeout_s=testhosts.SYSTEMD_SHUTDOWN_TIMEOUT)
    after = wait_until(
        lambda: program_pids(lab), all_running, f"every program of {HOST} RUNNING again"
    )
    assert all(after[p] != before[p] for p in PROGRAMS), (before, after)
    healthy(tmp_path)


def test_a_reboot_ends_with_every_daemon_running_and_the_lab_healthy_without_ansible(
    node3_restored, tmp_path
):
    lab = node3_restored
    host = testhosts.Host(int(HOST.removeprefix("node")))
    assert all_running(program_pids(lab))
    on_node3(lab, "touch", MARKER)
    started = time.monotonic()
    clean = systemd_host.reboot(
        host.instance,
        bridge=testhosts.BRIDGE,
        log_file=host.console_log,
        shutdown_timeout=testhosts.SYSTEMD_SHUTDOWN_TIMEOUT,
        boot_timeout=testhosts.SYSTEMD_BOOT_TIMEOUT,
    )
    assert clean, f"{HOST} did not shut down on its own (killed after the shutdown timeout)"
    print(f"{HOST} rebooted to 'running' in {time.monotonic() - started:.1f} s")
    wait_until(lambda: on_lab_host(lab[HOST], "true").returncode, lambda rc: rc == 0, "SSH")
    assert on_lab_host(lab[HOST], "test", "-e", MARKER).returncode == 1, "the host did not reboot"
    assert on_node3(lab, "systemctl", "is-active", UNIT) == "active"
    # A new boot is a new PID namespace: the daemons' pids may repeat, the marker cannot.
    wait_until(
        lambda: program_pids(lab), all_running, f"every program of {HOST} RUNNING after the boot"
    )
    healthy(tmp_path)
