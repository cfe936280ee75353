"""producer/start.py: the start instant handed to a producer that waits, connected, for it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from producer import produce, start
from producer.clock import NS_PER_MS, NS_PER_S, SimulatedClock

REPO = Path(__file__).resolve().parents[1]
PRODUCE_ARGS = ["--bootstrap", "h:9092", "--topic", "t", "--count", "1", "--rate", "1"]


class WritingClock(SimulatedClock):
    """A simulated clock on which, after `after` sleeps, the playbook writes the start file."""

    def __init__(self, start_file: Path, after: int, content: str) -> None:
        super().__init__()
        self.start_file, self.after, self.content, self.sleeps = start_file, after, content, 0

    def sleep_until(self, deadline_ns: int) -> None:
        super().sleep_until(deadline_ns)
        self.sleeps += 1
        if self.sleeps == self.after:
            self.start_file.write_text(self.content)


def test_the_instant_is_now_plus_the_lead_written_whole(tmp_path):
    clock = SimulatedClock()
    start_file = tmp_path / "start"
    instant = start.fix_start(start_file, 5000, clock)
    assert instant == clock.now_ns() // NS_PER_MS + 5000
    assert start_file.read_text() == f"{instant}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["start"]


def test_the_producer_says_ready_then_takes_the_instant_once_it_is_written(tmp_path):
    start_file = tmp_path / "start"
    clock = WritingClock(start_file, after=40, content="1795807173220\n")
    began_ns = clock.now_ns()
    assert start.wait_for_start(start_file, clock, timeout_s=60) == 1795807173220
    assert start.ready_path(start_file).read_text() == f"{began_ns // NS_PER_MS}\n"
    # It looked every POLL_NS: it saw the file at the first look after it came.
    assert clock.now_ns() - began_ns == 40 * start.POLL_NS


def test_no_start_file_in_time_is_an_error_that_names_the_file(tmp_path):
    start_file = tmp_path / "start"
    clock = SimulatedClock()
    began_ns = clock.now_ns()
    with pytest.raises(start.NoStart, match=f"no start instant in {start_file} within 2 s"):
        start.wait_for_start(start_file, clock, timeout_s=2)
    assert 2 * NS_PER_S <= clock.now_ns() - began_ns < 2 * NS_PER_S + start.POLL_NS
    assert start.ready_path(start_file).exists()


def test_a_start_file_without_an_instant_is_an_error(tmp_path):
    start_file = tmp_path / "start"
    clock = WritingClock(start_file, after=1, content="soon\n")
    with pytest.raises(start.NoStart, match="holds 'soon', not an epoch ms"):
        start.wait_for_start(start_file, clock, timeout_s=60)


def test_the_command_prints_the_instant_and_refuses_to_fix_it_twice(tmp_path):
    start_file = tmp_path / "start"
    command = [sys.executable, "-m", "producer.start", "--file", str(start_file), "--lead-ms"]
    before_ms = time.time_ns() // NS_PER_MS
    fixed = subprocess.run(
        [*command, "5000"], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert fixed.returncode == 0, fixed.stderr
    instant = int(fixed.stdout)
    assert before_ms + 5000 <= instant <= time.time_ns() // NS_PER_MS + 5000
    assert start_file.read_text() == f"{instant}\n"
    again = subprocess.run(
        [*command, "5000"], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert again.returncode == 2 and "exists" in again.stderr
    assert start_file.read_text() == f"{instant}\n"


def test_the_producer_takes_a_start_file_or_an_instant_never_both(tmp_path, capsys):
    args = produce.parse_args(
        [
            *PRODUCE_ARGS,
            "--seed",
            "1",
            "--out",
            str(tmp_path / "p"),
            "--start-file",
            str(tmp_path / "s"),
        ]
    )
    assert (args.start_file, args.start_at_ms, args.start_wait_s) == (tmp_path / "s", None, 600.0)
    with pytest.raises(SystemExit) as both:
        produce.parse_args(
            [*PRODUCE_ARGS, "--seed", "1", "--out", str(tmp_path / "p")]
            + ["--start-file", str(tmp_path / "s"), "--start-at-ms", "17955158"]
        )
    assert both.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
