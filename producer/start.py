"""The run's start instant, handed from the playbook to a waiting producer through a file.

The producer (`python -m producer.produce ... --start-file F`) opens its Kafka client, writes
F.ready and waits until F exists. Once F.ready is there, the playbook fixes the instant:

    python -m producer.start --file F --lead-ms 1000   (more when a fault is due under 5 s in)

writes now + lead (epoch ms on this host's clock) to F in one rename and prints it, and the
faults are scheduled against the same instant. The lead then has to cover only the hand-over of
F (and, with fault_at_s, starting the faults), never the producer's own start, which takes
seconds as an Ansible `async` task on loaded hosts (docs/experiments.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from producer import arguments, files
from producer.clock import NS_PER_MS, NS_PER_S, Clock, SystemClock

# How often a waiting producer looks for the start file: its start is late by at most this.
POLL_NS = 5 * NS_PER_MS


class NoStart(Exception):
    """The start file did not come in time, or does not hold an instant."""


def ready_path(start_file: Path) -> Path:
    """Where a producer says it is connected and waiting for start_file."""
    return start_file.with_name(start_file.name + ".ready")


def fix_start(start_file: Path, lead_ms: int, clock: Clock) -> int:
    """Fix the instant message 1 is due (now + lead_ms), write it to start_file and return it."""
    start_ms = clock.now_ns() // NS_PER_MS + lead_ms
    files.write_text(start_file, f"{start_ms}\n")
    return start_ms


def read_start(start_file: Path) -> int | None:
    """The instant in start_file, or None while there is no such file."""
    try:
        text = start_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise NoStart(f"{start_file} holds {text.strip()[:40]!r}, not an epoch ms") from None


def say_ready(path: Path, clock: Clock) -> None:
    """Write path, holding this instant in epoch ms on clock: the client is ready (the
    producer's before it waits for its start file, the collector's before its first poll)."""
    files.write_text(path, f"{clock.now_ns() // NS_PER_MS}\n")


def wait_for_start(start_file: Path, clock: Clock, timeout_s: float) -> int:
    """Say ready (start_file.ready), then wait for start_file and return its instant; NoStart
    when it has not come within timeout_s."""
    say_ready(ready_path(start_file), clock)
    deadline_ns = clock.now_ns() + int(timeout_s * NS_PER_S)
    while (start_ms := read_start(start_file)) is None:
        if clock.now_ns() >= deadline_ns:
            raise NoStart(f"no start instant in {start_file} within {timeout_s:.0f} s")
        clock.sleep_until(clock.now_ns() + POLL_NS)
    return start_ms


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m producer.start",
        description="Fix when message 1 is due (now + lead) and hand it to the waiting producer.",
    )
    parser.add_argument(
        "--file",
        required=True,
        type=arguments.new_output_file,
        help="the producer's --start-file (new: a run's start is fixed once)",
    )
    parser.add_argument("--lead-ms", required=True, type=arguments.positive_int)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(fix_start(args.file, args.lead_ms, SystemClock()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
