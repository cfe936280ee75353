"""playbooks/fault.yml on the test hosts: every fault type really happens, undoes itself on time
(also when the control node dies), leaves a healthy lab, and bad requests change nothing."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from conftest import (
    LAB_INVENTORY,
    BackgroundPlaybook,
    PlaybookRun,
    kill_control_node,
    on_lab_host,
    run_playbook,
    setup_and_call_passed,
    start_playbook,
    tcp_connects,
    wait_until,
)

pytestmark = pytest.mark.lab

PYTHON = "/opt/streamlab/venv/bin/python"
AGENT = "/opt/streamlab/bin/streamlab_fault.py"
STATE_DIR = "/var/lib/streamlab/faults"
SUPERVISORCTL = ("/opt/streamlab/venv/bin/supervisorctl", "-c", "/etc/streamlab/supervisord.conf")
DURATION_S = 12
# A port of a daemon every test host runs (the Kafka broker): a partition cuts it off, as it does
# every port but the control node's SSH.
KAFKA_PORT = 9092
# Where a fault's undo may end after start + duration: the agent's tick, and a daemon's startsecs.
UNDO_SLACK_MS = 6_000


def program_state(lab: dict[str, str], host: str, program: str) -> str:
    done = on_lab_host(lab[host], *SUPERVISORCTL, "status", program)
    return done.stdout.split()[1] if len(done.stdout.split()) > 1 else done.stdout


def program_pid(lab: dict[str, str], host: str, program: str) -> int:
    return int(on_lab_host(lab[host], *SUPERVISORCTL, "pid", program).stdout.strip())


def process_state(lab: dict[str, str], host: str, pid: int) -> str:
    return on_lab_host(lab[host], "ps", "-o", "stat=", "-p", str(pid)).stdout.strip()


def ping_ms(lab: dict[str, str], source: str, destination: str) -> tuple[float, float]:
    """Shortest and longest round trip of 5 pings between two test hosts, in ms."""
    done = on_lab_host(lab[source], "ping", "-c", "5", "-i", "0.2", "-q", lab[destination])
    shortest, _, longest = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", done.stdout).groups()
    return float(shortest), float(longest)


def fault_records(lab: dict[str, str], host: str, schedule_id: str) -> list[dict]:
    done = on_lab_host(lab[host], PYTHON, AGENT, "records", f"{STATE_DIR}/{schedule_id}.spec.json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)["records"]


def recover(tmp_path: Path) -> PlaybookRun:
    """playbooks/fault.yml -e fault=recover: undo every fault, start what should run."""
    run = run_playbook("fault.yml", LAB_INVENTORY, {"fault": "recover"}, tmp_path=tmp_path)
    assert run.rc == 0, run.output[-4000:]
    return run


def healthy(tmp_path: Path) -> None:
    """Every health check of the lab passes (playbooks/health.yml)."""
    run = run_playbook("health.yml", LAB_INVENTORY, tmp_path=tmp_path)
    assert run.rc == 0, run.output[-4000:]


def schedules(lab: dict[str, str]) -> dict[str, str]:
    """Host -> the fault agent's state directory listing; a host that does not answer fails."""
    # No directory yet (no fault or recovery ran on the host) lists as empty.
    listed = {h: on_lab_host(lab[h], f"test ! -e {STATE_DIR} || ls {STATE_DIR}") for h in lab}
    assert all(done.returncode == 0 for done in listed.values()), listed
    return {h: done.stdout for h, done in listed.items()}


def all_running(lab: dict[str, str]) -> dict[str, list[str]]:
    """Host -> every supervisord program line that is not RUNNING (empty lists when all run).
    A host that does not answer, or whose supervisord lists no program, fails the test: it is
    not a host where everything runs."""
    stopped = {}
    for host in lab:
        done = on_lab_host(lab[host], *SUPERVISORCTL, "status")
        # supervisorctl status exits 3 when a program is not running; ssh exits 255 unreached.
        assert done.returncode in (0, 3), f"{host}: {done.returncode} {done.stderr[-500:]}"
        lines = done.stdout.splitlines()
        assert lines, f"{host}: supervisord lists no program"
        stopped[host] = [line for line in lines if " RUNNING " not in line]
    return stopped


@pytest.fixture
def recovered(converged, tmp_path, request):
    """Whatever a test did, the lab is recovered and healthy afterwards (a failure does not
    cascade into the next test). A test that passed ended with every health check passing
    (each ends with healthy()), so only a failed one needs playbooks/fault.yml -e fault=recover."""
    yield converged
    if not setup_and_call_passed(request):
        recover(tmp_path)


def inject_while_watching(
    lab: dict[str, str],
    tmp_path: Path,
    extravars: dict,
    during: Callable[[], bool],
    what: str,
) -> tuple[object, list[dict]]:
    """Run fault.yml (it waits for the undo); `during` must become true while the fault holds."""
    schedule_id = f"test-{extravars['fault']}-{uuid.uuid4().hex[:6]}"
    playbook = BackgroundPlaybook(
        "fault.yml",
        LAB_INVENTORY,
        extravars={"duration_s": DURATION_S, "schedule_id": schedule_id, **extravars},
        tmp_path=tmp_path,
    )
    seen = False
    deadline = time.monotonic() + 60
    while not seen and playbook.is_alive() and time.monotonic() < deadline:
        seen = during()
        time.sleep(0.5)
    run = playbook.join()
    assert run.rc == 0, run.output[-4000:]
    assert seen, f"{what}: never seen while the fault held; playbook output:\n{run.output[-3000:]}"
    host = extravars.get("target", "node2")
    records = fault_records(lab, host, schedule_id)
    (record,) = records
    assert record["host"] == host and record["fault"] == extravars["fault"]
    lasted = record["end_ms"] - record["start_ms"]
    assert DURATION_S * 1000 <= lasted <= DURATION_S * 1000 + UNDO_SLACK_MS, record
    return run, records


@pytest.mark.parametrize(
    "fault,program,state",
    [
        ("kill_taskmanager", "flink-taskmanager", "EXITED"),
        ("stop_taskmanager", "flink-taskmanager", "STOPPED"),
        ("kill_supervisor", "storm-supervisor", "EXITED"),
        ("kill_kafka_broker", "kafka", "EXITED"),
    ],
)
def test_a_daemon_fault_happens_and_is_undone(recovered, tmp_path, fault, program, state):
    lab = recovered
    before = program_pid(lab, "node2", program)
    _, (record,) = inject_while_watching(
        lab,
        tmp_path,
        {"fault": fault},
        lambda: program_state(lab, "node2", program) == state,
        f"{program} {state} on node2",
    )
    assert before in record["applied"]["pids"][program]
    assert program_state(lab, "node2", program) == "RUNNING"
    assert program_pid(lab, "node2", program) != before
    healthy(tmp_path)


def test_node_down_kills_every_engine_daemon_of_the_host_at_once(recovered, tmp_path):
    """On node3, the Debian 13 host booted with systemd: its daemons run under the kit's unit."""
    lab = recovered
    engine_daemons = ("flink-taskmanager", "storm-supervisor", "spark-worker")
    kafka_pid = program_pid(lab, "node3", "kafka")
    supervisord_pid = on_lab_host(lab["node3"], *SUPERVISORCTL, "pid").stdout.strip()
    _, (record,) = inject_while_watching(
        lab,
        tmp_path,
        {"fault": "node_down", "target": "node3"},
        lambda: all(program_state(lab, "node3", p) == "EXITED" for p in engine_daemons),
        "every engine daemon of node3 down",
    )
    assert sorted(record["applied"]["programs"]) == sorted(engine_daemons)
    # Kafka is not an engine daemon: untouched. supervisord under the kit's unit is untouched too.
    assert program_pid(lab, "node3", "kafka") == kafka_pid
    assert on_lab_host(lab["node3"], *SUPERVISORCTL, "pid").stdout.strip() == supervisord_pid
    assert all(program_state(lab, "node3", p) == "RUNNING" for p in engine_daemons)
    healthy(tmp_path)


def test_pause_process_stops_the_daemon_and_resumes_it(recovered, tmp_path):
    lab = recovered
    pid = program_pid(lab, "node2", "flink-taskmanager")
    inject_while_watching(
        lab,
        tmp_path,
        {"fault": "pause_process", "daemon": "flink-taskmanager"},
        lambda: process_state(lab, "node2", pid).startswith("T"),
        "the TaskManager stopped (state T)",
    )
    assert not process_state(lab, "node2", pid).startswith("T")
    assert program_pid(lab, "node2", "flink-taskmanager") == pid  # the same process, resumed
    healthy(tmp_path)


def test_a_partitioned_host_answers_nobody_but_the_control_nodes_ssh_until_it_ends(
    recovered, tmp_path
):
    lab = recovered
    ssh_open: list[bool] = []

    def cut_off() -> bool:
        if tcp_connects(lab["node3"], KAFKA_PORT, timeout_s=1):
            return False
        ssh_open.append(tcp_connects(lab["node3"], 22, timeout_s=2))
        return True

    _, (record,) = inject_while_watching(
        lab, tmp_path, {"fault": "network_partition", "target": "node3"}, cut_off, "node3 cut off"
    )
    # Kafka cut off while this control node's SSH to the host stayed open, and the record says so.
    assert ssh_open == [True], ssh_open
    assert record["applied"]["kept_open"].startswith("SSH from "), record["applied"]
    assert record["applied"]["kept_open"].endswith(" to port 22"), record["applied"]
    assert on_lab_host(lab["node1"], "ping", "-c", "1", "-W", "2", lab["node3"]).returncode == 0
    assert tcp_connects(lab["node3"], KAFKA_PORT, timeout_s=2)
    healthy(tmp_path)


def test_network_delay_adds_the_latency_ping_measures(recovered, tmp_path):
    lab = recovered
    assert ping_ms(lab, "node1", "node2")[1] < 40  # not one of 5 pings delayed
    seen: list[tuple[float, float]] = []

    def delayed() -> bool:
        # Every one of the 5 pings delayed: a burst the delay began in has a short first ping.
        seen.append(ping_ms(lab, "node1", "node2"))
        return seen[-1][0] > 40

    _, (record,) = inject_while_watching(
        lab, tmp_path, {"fault": "network_delay", "delay_ms": 50, "jitter_ms": 5}, delayed, "50 ms"
    )
    # node2 delays what it sends: each round trip waits 50 +- 5 ms once, plus the time the
    # hosts take to answer. Every ping waited the delay's least (45 ms); the shortest waited it
    # once, not on both ways (90 ms or more). No bound on the longest: on the loaded cores it
    # includes scheduling.
    shortest, _ = seen[-1]
    assert 45 <= shortest < 90, seen
    assert record["applied"]["delay_ms"] == 50 and record["applied"]["method"] in (
        "netem",
        "nfqueue",
    )
    assert ping_ms(lab, "node1", "node2")[1] < 40  # not one of 5 pings delayed
    healthy(tmp_path)


def test_a_partition_ends_on_time_when_the_control_node_dies(recovered, tmp_path):
    """The dead-man case: ansible-playbook is killed while node3 is cut off."""
    lab = recovered
    schedule_id = f"test-deadman-{uuid.uuid4().hex[:6]}"
    duration_s = 25
    playbook = start_playbook(
        "fault.yml",
        *("-e", "fault=network_partition", "-e", "target=node3"),
        *("-e", f"duration_s={duration_s}", "-e", f"schedule_id={schedule_id}"),
    )
    try:
        wait_until(
            lambda: not tcp_connects(lab["node3"], KAFKA_PORT, timeout_s=1),
            bool,
            "node3 partitioned",
            timeout_s=60,
        )
        cut_at = time.monotonic()
        kill_control_node(playbook)
        time.sleep(3)
        assert not tcp_connects(lab["node3"], KAFKA_PORT, timeout_s=1), (
            "the partition ended when the control node died"
        )
        wait_until(
            lambda: tcp_connects(lab["node3"], KAFKA_PORT, timeout_s=1),
            bool,
            "node3 back",
            timeout_s=duration_s + 30,
        )
        back_after = time.monotonic() - cut_at
    finally:
        if playbook.poll() is None:
            kill_control_node(playbook)
    assert duration_s - 5 <= back_after <= duration_s + 5
    (record,) = fault_records(lab, "node3", schedule_id)
    assert duration_s * 1000 <= record["end_ms"] - record["start_ms"] <= duration_s * 1000 + 2000
    assert record["reverted"]["nft_table_removed"]
    healthy(tmp_path)


def test_recover_undoes_a_fault_before_its_time(recovered, tmp_path):
    lab = recovered
    pid = program_pid(lab, "node2", "flink-taskmanager")
    started = run_playbook(
        "fault.yml",
        LAB_INVENTORY,
        extravars={
            "fault": "pause_process",
            "daemon": "flink-taskmanager",
            "duration_s": 300,
            "wait": False,
        },
        tmp_path=tmp_path,
    )
    assert started.rc == 0, started.output[-4000:]
    wait_until(lambda: process_state(lab, "node2", pid), lambda s: s.startswith("T"), "paused")
    recovered_run = recover(tmp_path)
    assert f"resumed stopped process {pid}" in recovered_run.output
    assert "cancelled" in recovered_run.output
    assert not process_state(lab, "node2", pid).startswith("T")
    healthy(tmp_path)


def one_broker_inventory(tmp_path: Path) -> Path:
    data = yaml.safe_load(LAB_INVENTORY.read_text())
    data["all"]["children"]["kafka"] = {"hosts": {"node1": {}}}
    path = tmp_path / "one-broker.yml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    "extravars,inventory,message",
    [
        # The refusals that need no cluster's view: tests/test_bad_inputs.py, beside the lab.
        ({"fault": "kill_taskmanager", "target": "node1"}, None, "target=node1 runs none of"),
        ({"fault": "kill_kafka_broker"}, "one-broker", "would leave no Kafka broker"),
    ],
)
def test_a_bad_request_changes_nothing(converged, tmp_path, extravars, inventory, message):
    lab = converged
    schedules_before = schedules(lab)
    run = run_playbook(
        "fault.yml",
        one_broker_inventory(tmp_path) if inventory else LAB_INVENTORY,
        extravars={"duration_s": 5, **extravars},
        tmp_path=tmp_path,
    )
    assert run.rc != 0
    assert message in run.output, run.output[-3000:]
    assert schedules(lab) == schedules_before
    assert all_running(lab) == {h: [] for h in lab}
