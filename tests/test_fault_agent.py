"""The fault agent on its own (roles/fault/files): schedules, undo, records, and the delayer's
netlink messages. Real processes on this machine; the lab tests do the daemons and networks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

# Faults on schedule, checked against the wall clock (late_ms, end - start, undo deadlines).
pytestmark = pytest.mark.realtime

FILES = REPO / "roles" / "fault" / "files"
sys.path.insert(0, str(FILES))

import streamlab_delay as delay  # noqa: E402
import streamlab_fault as agent  # noqa: E402

MARKER = "streamlab-fault-agent-test-victim"


@pytest.fixture
def victim():
    """A process the test may kill, recognisable by its command line."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time, sys; time.sleep(300)", MARKER],
        start_new_session=True,
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def spec_file(tmp_path: Path, **overrides: object) -> Path:
    spec = {
        "id": "test-1",
        "fault": "kill_storm_worker",
        "host": "localhost",
        "action": "kill_matching",
        "match": [MARKER],
        "first_at_ms": 0,
        "every_ms": 0,
        "count": 1,
        "duration_ms": 1500,
        "clock_offset_ms": 0,
        "state_dir": str(tmp_path),
        "parameters": {"duration_s": 1.5},
    } | overrides
    path = tmp_path / f"{spec['id']}.spec.json"
    path.write_text(json.dumps(spec))
    return path


def agent_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(FILES / "streamlab_fault.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_schedule_kills_on_time_and_records_its_start_and_end(tmp_path, victim):
    path = spec_file(tmp_path)
    started = agent_cli("schedule", str(path))
    assert started.returncode == 0, started.stdout + started.stderr
    victim.wait(timeout=10)
    assert victim.returncode == -signal.SIGKILL

    done = agent_cli("records", str(path), "--wait-s", "20")
    answer = json.loads(done.stdout)
    assert answer["done"]
    (record,) = answer["records"]
    assert record["applied"]["pids"] == [victim.pid]
    # Nothing restarts the victim: the undo waits out the duration, then says so.
    assert record["reverted"] == {"restarted": False, "new_pids": []}
    assert 1400 <= record["end_ms"] - record["start_ms"] <= 3000
    assert 0 <= record["late_ms"] < 1000 and "error" not in record
    # "now" was fixed in the spec when the schedule started, on the driver clock.
    assert json.loads(path.read_text())["first_at_ms"] == record["scheduled_ms"]


def test_the_undo_is_armed_before_the_fault_and_outlives_the_schedule(tmp_path, victim):
    """Killing the schedule itself (the control node's side dying) does not stop the undo."""
    path = spec_file(tmp_path, duration_ms=2500)
    assert agent_cli("schedule", str(path)).returncode == 0
    victim.wait(timeout=10)
    schedule_pid = int((tmp_path / "test-1.schedule0.pid").read_text())
    events = tmp_path / "test-1.events.jsonl"
    deadline = time.monotonic() + 5
    while "armed" not in events.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(schedule_pid, signal.SIGKILL)
    answer = json.loads(agent_cli("records", str(path), "--wait-s", "1").stdout)
    deadline = time.monotonic() + 10
    while not answer["records"] or answer["records"][0]["end_ms"] is None:
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)
        answer = json.loads(agent_cli("records", str(path)).stdout)
    (record,) = answer["records"]
    assert record["reverted"] is not None and not answer["done"]


def test_an_impossible_fault_is_refused_before_anything_starts(tmp_path):
    path = spec_file(tmp_path, match=["no-such-process-anywhere-0b9e"])
    refused = agent_cli("schedule", str(path))
    assert refused.returncode == 1
    assert "no process on this host" in json.loads(refused.stdout)["error"]
    assert not (tmp_path / "test-1.events.jsonl").exists()
    assert not (tmp_path / "test-1.schedule0.pid").exists()


def test_records_convert_host_times_to_the_driver_clock(tmp_path):
    path = spec_file(tmp_path, first_at_ms=1_000_000, clock_offset_ms=250, count=2, every_ms=10_000)
    spec = agent.load_spec(str(path))
    assert agent.occurrence_times(spec) == [1_000_250, 1_010_250]
    events = agent.Events(tmp_path, "test-1")
    events.append(event="applied", k=0, start_ms=1_000_300, details={"pids": [1]})
    events.append(event="reverted", k=0, end_ms=1_002_300, revert_begun_ms=1_001_800, details={})
    (record,) = agent.records(spec)["records"]
    assert (record["start_ms"], record["end_ms"]) == (1_000_050, 1_002_050)
    assert (record["host_start_ms"], record["scheduled_ms"], record["late_ms"]) == (
        1_000_300,
        1_000_000,
        50,
    )


@pytest.mark.parametrize(
    "change,message",
    [({"action": "reboot"}, "unknown action"), ({"id": "../x"}, "bad schedule id")],
)
def test_a_bad_spec_is_refused(tmp_path, change, message):
    with pytest.raises(agent.FaultError, match=message):
        agent.load_spec(str(spec_file(tmp_path, **change)))


def test_the_partition_drops_both_directions_of_the_cluster_interface_only():
    ruleset = agent.nft_partition_ruleset("eth0")
    assert 'iifname "eth0" drop' in ruleset and 'oifname "eth0" drop' in ruleset
    assert ruleset.startswith(f"table inet {agent.NFT_TABLE} ")
    assert "accept;" not in ruleset.replace("policy accept;", "")


@pytest.mark.parametrize(
    ("given", "family", "address"),
    [("10.77.0.1", "ip", "10.77.0.1"), ("::ffff:10.77.0.1", "ip", "10.77.0.1")],
)
def test_the_partition_keeps_the_control_nodes_ssh_open_before_dropping(given, family, address):
    ruleset = agent.nft_partition_ruleset("eth0", {"address": given, "port": 2222})
    into = f'iifname "eth0" {family} saddr {address} tcp dport 2222 accept; iifname "eth0" drop;'
    out = f'oifname "eth0" {family} daddr {address} tcp sport 2222 accept; oifname "eth0" drop;'
    assert into in ruleset and out in ruleset
    assert "icmpv6" not in ruleset


def test_over_ipv6_the_kept_ssh_keeps_neighbour_discovery_too():
    ruleset = agent.nft_partition_ruleset("eth0", {"address": "fd00::1", "port": 22})
    nd = "icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept;"
    assert f'ip6 saddr fd00::1 tcp dport 22 accept; iifname "eth0" {nd} iifname "eth0" drop;' in (
        ruleset
    )
    assert f'ip6 daddr fd00::1 tcp sport 22 accept; oifname "eth0" {nd} oifname "eth0" drop;' in (
        ruleset
    )


@pytest.mark.parametrize(
    "keep",
    [
        {"address": "fe80::1%eth0", "port": 22},
        {"address": "x; drop", "port": 22},
        {"address": "10.0.0.1", "port": 70000},
    ],
)
def test_a_kept_connection_that_is_no_address_and_port_is_refused(keep):
    with pytest.raises(agent.FaultError, match="keep_ssh"):
        agent.nft_partition_ruleset("eth0", keep)


def test_the_delayer_reads_packet_ids_and_acks_from_netlink_messages():
    header = struct.pack(">IHB", 4242, 0x0800, 3)
    packet = delay.message(
        delay.NFQNL_MSG_PACKET, 5157, delay.attribute(delay.NFQA_PACKET_HDR, header), 0, 0
    )
    ack = delay.HEADER.pack(delay.HEADER.size + 4, delay.NLMSG_ERROR, 0, 1, 0) + struct.pack(
        "=i", -1
    )
    assert delay.packet_ids(packet + packet + ack) == ([4242, 4242], [-1])


def test_the_delayer_releases_each_packet_after_its_delay():
    held = delay.Delayer.__new__(delay.Delayer)
    held.delay_s, held.jitter_s, held.held = 0.1, 0.0, []
    accepted: list[int] = []
    held.accept = accepted.append
    held.hold(7, now=10.0)
    held.hold(8, now=10.05)
    held.release_due(10.09)
    assert accepted == []
    held.release_due(10.1)
    assert accepted == [7]
    held.release_all()
    assert accepted == [7, 8]


FAKE_SUPERVISORCTL = """#!/bin/sh
# A stand-in for supervisorctl: one program, "victim", whose pid is kept in $STATE/pid; any
# other program does not exist.
STATE={state}
[ "$2" = victim ] || {{ echo "$2: ERROR (no such process)"; exit 1; }}
case "$1" in
  pid) cat "$STATE/pid" ;;
  start) {python} -c 'import subprocess; print(subprocess.Popen(["sleep", "300"],
           start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
           stderr=subprocess.DEVNULL).pid)' > "$STATE/pid"
         cat "$STATE/pid" >> "$STATE/started"; echo "victim: started" ;;
  *) echo "unexpected: $*"; exit 1 ;;
esac
"""


def test_a_repeated_fault_hits_the_restarted_daemon_each_time(tmp_path):
    """kill_group, twice, 2 s apart: each time the daemon supervisord would run (here a stand-in
    supervisorctl) is killed, and started again after the fault's duration."""
    ctl = tmp_path / "supervisorctl"
    ctl.write_text(FAKE_SUPERVISORCTL.format(state=tmp_path, python=sys.executable))
    ctl.chmod(0o755)
    assert subprocess.run([str(ctl), "start", "victim"], capture_output=True).returncode == 0
    first_pid = int((tmp_path / "pid").read_text())
    path = spec_file(
        tmp_path,
        fault="kill_taskmanager",
        action="kill_group",
        programs=["victim"],
        supervisorctl=[str(ctl)],
        count=2,
        every_ms=2500,
        duration_ms=1000,
    )
    try:
        assert agent_cli("schedule", str(path)).returncode == 0
        answer = json.loads(agent_cli("records", str(path), "--wait-s", "30").stdout)
    finally:
        for pid in (tmp_path / "started").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    assert answer["done"]
    first, second = answer["records"]
    started = [int(pid) for pid in (tmp_path / "started").read_text().split()]
    assert len(started) == 3  # the daemon, and one start after each fault
    assert first["applied"]["pids"]["victim"] == [first_pid]
    assert second["applied"]["pids"]["victim"] == [started[1]]
    assert (first["occurrence"], second["occurrence"]) == (1, 2)
    assert second["scheduled_ms"] - first["scheduled_ms"] == 2500
    for record in (first, second):
        assert 1000 <= record["end_ms"] - record["start_ms"] <= 2000
        assert record["reverted"]["started"] == {"victim": "started"}


def test_a_fault_that_fails_part_way_is_undone_at_once(tmp_path):
    """kill_group of two programs, the second unknown: the first is killed, the apply fails, and
    the armed undo starts what was hit right away instead of leaving it down."""
    ctl = tmp_path / "supervisorctl"
    ctl.write_text(FAKE_SUPERVISORCTL.format(state=tmp_path, python=sys.executable))
    ctl.chmod(0o755)
    subprocess.run([str(ctl), "start", "victim"], capture_output=True, check=True)
    path = spec_file(
        tmp_path,
        fault="node_down",
        action="kill_group",
        programs=["victim", "ghost"],
        supervisorctl=[str(ctl)],
        duration_ms=60_000,
    )
    spec = agent.load_spec(str(path))
    spec["first_at_ms"] = agent.now_ms()
    path.write_text(json.dumps(spec))
    try:
        started = time.monotonic()
        assert agent_cli("_schedule", str(path)).returncode == 0  # in the foreground
        answer = json.loads(agent_cli("records", str(path)).stdout)
    finally:
        for pid in (tmp_path / "started").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    assert time.monotonic() - started < 30, "the undo waited for the fault's whole duration"
    (record,) = answer["records"]
    assert "ghost is not running here" in record["error"]
    # The victim was killed and started again; the unknown program could not be started.
    assert len((tmp_path / "started").read_text().split()) == 2
    assert "ghost" in record["error"] and record["end_ms"] is not None


def test_recover_takes_a_schedule_that_ends_while_it_is_cancelled(tmp_path, monkeypatch):
    """A schedule removes its pid file as it ends: if that happens while recover cancels it,
    recover goes on (a lab run failed with FileNotFoundError there)."""
    state = tmp_path / "faults"
    state.mkdir()
    ending, gone = state / "pause_process-1.schedule0.pid", state / "kill-2.schedule0.pid"
    ending.write_text("4242\n")
    gone.write_text("4343\n")
    killed: list[int] = []

    def kill_and_end(pid: int, sig: int) -> None:
        killed.append(pid)
        ending.unlink()  # the schedule's own cleanup, as it dies
        gone.unlink(missing_ok=True)  # and another one, before recover reads it

    monkeypatch.setattr(agent, "own_netns", lambda: "net:[1]")
    monkeypatch.setattr(agent, "on_this_host", lambda pid, netns: True)
    monkeypatch.setattr(agent, "is_kit_process", lambda pid: True)
    monkeypatch.setattr(agent.os, "kill", kill_and_end)
    monkeypatch.setattr(agent, "all_pids", lambda: [])
    monkeypatch.setattr(agent, "remove_nfqueue_rules", lambda: 0)
    monkeypatch.setattr(agent, "has_tool", lambda tool: False)
    answer = agent.recover(state, "", [])
    # kill-2 comes first: it is cancelled, and both files go; pause_process-1 is then gone
    # before recover reads it.
    assert killed == [4343], killed
    assert answer["repaired"] == ["cancelled schedule0 (pid 4343)"]
    assert list(state.iterdir()) == []


def test_a_step_of_the_wall_clock_neither_shortens_nor_ends_a_fault(tmp_path, monkeypatch):
    """The reverter waits for the fault's length on the monotonic clock: the wall clock stepping
    a minute ahead (a VM's clock set from its host) does not undo the fault early."""
    path = spec_file(tmp_path, duration_ms=1500)
    wall = agent.now_ms

    monkeypatch.setattr(agent, "now_ms", lambda: wall() + 60_000)
    monkeypatch.setattr(agent, "matching_processes", lambda match, netns: [])
    started = time.monotonic()
    # The schedule armed it just before the step: 1.5 s to go on either clock.
    agent.run_reverter(str(path), 0, agent.monotonic_ms() + 1500)
    waited = time.monotonic() - started
    assert 1.4 <= waited <= 5, waited
    (reverted,) = [
        e for e in agent.Events(tmp_path, "test-1").read() if e.get("event") == "reverted"
    ]
    assert reverted["k"] == 0


def test_a_reverter_started_by_an_earlier_agent_still_waits_for_the_faults_end(tmp_path):
    """A schedule already running when the agent file was replaced starts `_revert` with the
    wall-clock end only: the new agent accepts it and undoes at that end, not at once."""
    path = spec_file(tmp_path, duration_ms=1500)
    started = time.monotonic()
    done = agent_cli("_revert", str(path), "0", str(agent.now_ms() + 1500))
    waited = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert 1.4 <= waited <= 10, waited
    assert any(e.get("event") == "reverted" for e in agent.Events(tmp_path, "test-1").read())
