"""plugins/callback/streamlab_brief.py (make demo's output): a line per phase, check and change on
the terminal, every message of a debug task, a failure in full; the rest only in the log file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO

PLAYBOOK = """
- name: Provision the thing
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Wait until the counter says 2
      ansible.builtin.shell: >-
        n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}; [ $n -ge 2 ]
      register: counted
      until: counted.rc == 0
      retries: 5
      delay: 1
      changed_when: false
    - name: Read something
      ansible.builtin.command: "true"
      changed_when: false
    - name: Install something
      ansible.builtin.command: "true"
    - name: Not on this host
      ansible.builtin.command: "true"
      when: false
    - name: Say the health
      ansible.builtin.debug:
        msg: "kafka cluster x: 3 brokers"
{failing}
"""
FAILING = """    - name: Check that the moon is full
      ansible.builtin.fail:
        msg: the moon is not full
"""


def run(tmp_path: Path, failing: bool) -> tuple[subprocess.CompletedProcess, str]:
    playbook = tmp_path / "thing.yml"
    counter = tmp_path / "counter"
    playbook.write_text(PLAYBOOK.format(counter=counter, failing=FAILING if failing else ""))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local"]
        + ["-e", f"ansible_python_interpreter={sys.executable}", str(playbook)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={
            **os.environ,
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_STDOUT_CALLBACK": "streamlab_brief",
            "ANSIBLE_NOCOLOR": "1",
            "STREAMLAB_LOG_DIR": str(tmp_path / "logs"),
        },
        check=False,
    )
    (log,) = (tmp_path / "logs").glob("thing-*.log")
    return done, log.read_text()


def test_the_terminal_shows_phases_checks_changes_and_messages_and_the_log_has_everything(tmp_path):
    done, log = run(tmp_path, failing=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    log_path = next(line.split()[-1] for line in lines if "the full output goes to" in line)
    assert log_path.endswith(".log") and Path(log_path).is_file()
    assert lines[1] == "Provision the thing"
    # Two retries 1 s apart: the check took at least 2 s, in 3 tries.
    waited = re.fullmatch(
        r"ok {7}Wait until the counter says 2 \(localhost, (\d+) s, 3 tries\)", lines[2]
    )
    assert waited and int(waited[1]) >= 2, lines[2]
    # A task that took a second or more says so (a loaded machine: "localhost, 1 s").
    assert re.fullmatch(r"changed  Install something \(localhost(, \d+ s)?\)", lines[3]), lines[3]
    assert lines[4] == "kafka cluster x: 3 brokers"
    assert any(line.startswith("localhost") and "changed=1" in line for line in lines)
    assert lines[-1] == f"The full output is in {log_path}"
    assert "RETRYING" not in done.stdout and "Read something" not in done.stdout
    # The log has what the default callback prints: banners, retries, ok and skipped hosts.
    assert log.count("FAILED - RETRYING: [localhost]: Wait until the counter says 2") == 2
    for banner in ("TASK [Read something]", "TASK [Not on this host]", "PLAY RECAP"):
        assert banner in log
    assert "skipping: [localhost]" in log


def test_a_failure_is_shown_in_full_on_the_terminal(tmp_path):
    done, log = run(tmp_path, failing=True)
    assert done.returncode == 2
    assert "FAILED   Check that the moon is full (localhost)" in done.stdout
    assert 'FAILED! => {"changed": false, "msg": "the moon is not full"}' in done.stdout
    assert "the moon is not full" in log and "failed=1" in done.stdout
