"""roles/flink/files/streamlab-flink-taskmanager: each TaskManager start takes the next port of
its RPC range, wrapping at the end, whatever the state file holds."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import REPO

SCRIPT = REPO / "roles" / "flink" / "files" / "streamlab-flink-taskmanager"


def start(tmp_path: Path, ports: str) -> subprocess.CompletedProcess:
    """Run the script against a Flink home whose taskmanager.sh prints its arguments."""
    bin_dir = tmp_path / "flink" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "taskmanager.sh").write_text('#!/bin/sh\necho "$@"\n')
    (bin_dir / "taskmanager.sh").chmod(0o755)
    return subprocess.run(
        ["sh", str(SCRIPT), str(tmp_path / "flink"), ports, str(tmp_path / "rpc-port")],
        capture_output=True,
        text=True,
        check=False,
    )


def test_each_start_takes_the_next_port_and_wraps(tmp_path):
    taken = [start(tmp_path, "6130-6132").stdout.split() for _ in range(4)]
    assert [arguments[0] for arguments in taken] == ["start-foreground"] * 4
    assert [arguments[1] for arguments in taken] == [
        f"-Dtaskmanager.rpc.port={port}" for port in (6130, 6131, 6132, 6130)
    ]
    assert (tmp_path / "rpc-port").read_text().strip() == "6130"


def test_a_state_outside_the_range_or_not_a_port_starts_at_the_first(tmp_path):
    for state in ("9999", "6129", "junk", ""):
        (tmp_path / "rpc-port").write_text(state)
        assert start(tmp_path, "6130-6139").stdout.split()[1] == "-Dtaskmanager.rpc.port=6130"


def test_a_range_that_is_not_first_last_is_refused_and_nothing_starts(tmp_path):
    refused = start(tmp_path, "61x0-6139")
    assert refused.returncode == 2
    assert "the port range '61x0-6139' is not FIRST-LAST" in refused.stderr
    assert refused.stdout == "" and not (tmp_path / "rpc-port").exists()
