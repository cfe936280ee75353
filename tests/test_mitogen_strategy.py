"""The kit's strategy plugin (plugins/strategy/mitogen_linear.py): a Ctrl-C that Ansible does not
act on within its grace ends the process anyway, and one that it acts on is left to Ansible."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import REPO

pytestmark = pytest.mark.realtime  # the watchdog's grace is on the wall clock

# A stand-in for ansible-playbook's top-level process: the plugin's handler chained before one
# that, like Ansible's task queue manager, raises KeyboardInterrupt; `hang` then blocks as the
# exit did under Mitogen (waiting for a multiplexer that never answers).
PROCESS = textwrap.dedent(
    """
    import os, signal, sys, time
    sys.path.insert(0, {plugins!r})
    import mitogen_linear as plugin
    plugin.STOP_GRACE_S = 1.0
    plugin.MUX_EXIT_GRACE_S = 0.5
    calls = []
    def ansible_handler(signum, frame):
        calls.append(signum)
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, ansible_handler)
    plugin._arm_stop_deadline()
    plugin._arm_stop_deadline()  # a second play's run must not chain it twice
    try:
        print("ready", flush=True)
        time.sleep(30)
    except KeyboardInterrupt:
        print(f"interrupted, Ansible's handler called {{len(calls)}} time(s)", flush=True)
    if {hang!r}:
        time.sleep(30)
    sys.exit(7)
    """
)


def interrupted(hang: bool) -> tuple[subprocess.CompletedProcess, float]:
    source = PROCESS.format(plugins=str(REPO / "plugins" / "strategy"), hang=hang)
    process = subprocess.Popen(
        [sys.executable, "-c", source], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    process.send_signal(signal.SIGINT)
    sent_s = time.monotonic()
    out, err = process.communicate(timeout=20)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), (
        time.monotonic() - sent_s
    )


def test_a_process_stuck_after_ctrl_c_is_ended_after_the_grace():
    done, took_s = interrupted(hang=True)
    assert "Ansible's handler called 1 time(s)" in done.stdout
    assert done.returncode == 99, done
    assert "had not stopped 1 s after Ctrl-C" in done.stderr
    assert "exiting with status 99" in done.stderr
    assert 1.4 <= took_s < 10, took_s


def test_a_process_that_stops_on_its_own_keeps_its_exit():
    done, took_s = interrupted(hang=False)
    assert "Ansible's handler called 1 time(s)" in done.stdout
    assert done.returncode == 7, done
    assert done.stderr == ""
    assert took_s < 1.0, took_s
