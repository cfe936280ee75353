"""`make test`'s pytest runs: the lab's tests, and beside them, at a low CPU weight, the tests that
need no test host, so these use the CPU the lab leaves unused (waits on SSH, on a paced producer,
on a fault's schedule) instead of adding their own time after the lab's.

Their local Kafka broker (tests/local_kafka.py) comes from the artifact cache that the lab's
first converge fills, so they start once the Kafka bundle is there (at once on a warm cache).

The low weight is a cgroup (v1 `cpu` hierarchy) with a quarter of a process group's CPU shares,
which every process the tests start stays in, also those in a session of their own. Not the
idle class: a local broker or a deadline of a few seconds in those tests must still get some CPU
while the lab keeps both cores busy. Where this machine has no such hierarchy: `nice 10`, which
a process in a new session escapes through its own autogroup, and the runner says so. The lab's
output streams as it comes; the other run's is kept in a log and printed when the lab's is done.
Exit status: the first non-zero of the two runs, else 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_kafka import cache_dir  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CPU_CGROUP_ROOT = Path("/sys/fs/cgroup/cpu")
LOW_CGROUP = CPU_CGROUP_ROOT / "streamlab-unit-tests"
# A process group (autogroup) at nice 0 weighs 1024.
LOW_CPU_SHARES = 256
CACHE_POLL_S = 5.0


def kafka_bundle_cached(cache: Path) -> bool:
    """Is the Kafka bundle the local broker unpacks in the cache (downloads end with a rename)?"""
    return any(cache.glob("bundles/kafka-*.tar.gz"))


def low_weight_cgroup() -> Path | None:
    """A cgroup with LOW_CPU_SHARES, or None where this machine has no cgroup v1 `cpu`
    hierarchy that this user may change."""
    if not (CPU_CGROUP_ROOT / "cpu.shares").exists():
        return None
    try:
        LOW_CGROUP.mkdir(exist_ok=True)
        (LOW_CGROUP / "cpu.shares").write_text(f"{LOW_CPU_SHARES}\n")
    except OSError:
        return None
    return LOW_CGROUP


def enter(cgroup: Path | None) -> Callable[[], None]:
    """What the unit run's process does before it execs pytest: join the low-weight cgroup, or
    lower its own priority where there is none."""

    def join() -> None:
        if cgroup is None:
            os.nice(10)
        else:
            (cgroup / "cgroup.procs").write_text(f"{os.getpid()}\n")

    return join


def remove(cgroup: Path | None) -> None:
    """Remove the low-weight cgroup once empty (a process still in it keeps it)."""
    if cgroup is not None:
        try:
            cgroup.rmdir()
        except OSError as error:
            print(f"run_suite: {cgroup} kept: {error}", file=sys.stderr)


def elapsed(started: float) -> str:
    seconds = int(time.monotonic() - started)
    return f"{seconds // 60} min {seconds % 60} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--durations", type=int, default=40, help="slowest tests to list per run")
    parser.add_argument(
        "--unit-log",
        type=Path,
        default=REPO / "logs" / "unit-tests.log",
        help="where the run of the tests that need no test host writes its output",
    )
    arguments = parser.parse_args()
    pytest = [sys.executable, "-m", "pytest", f"--durations={arguments.durations}"]
    started = time.monotonic()
    # A stop from outside (CI's time limit) ends both runs through the `finally` below.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    lab = subprocess.Popen([*pytest, "-m", "lab"], cwd=REPO)
    unit: subprocess.Popen[bytes] | None = None
    cgroup: Path | None = None
    try:
        cache = cache_dir()
        while not kafka_bundle_cached(cache) and lab.poll() is None:
            time.sleep(CACHE_POLL_S)
        cgroup = low_weight_cgroup()
        arguments.unit_log.parent.mkdir(parents=True, exist_ok=True)
        with arguments.unit_log.open("w") as log:
            unit_started = time.monotonic()
            unit = subprocess.Popen(
                [*pytest, "-m", "not lab"],
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=enter(cgroup),
            )
            where = (
                f"in the cgroup {cgroup} ({LOW_CPU_SHARES} CPU shares)"
                if cgroup
                else "at nice 10 (no cgroup cpu hierarchy here)"
            )
            print(
                f"\nrun_suite: the tests that need no test host started {elapsed(started)} in, "
                f"{where}; their output: {arguments.unit_log}",
                flush=True,
            )
            lab_rc = lab.wait()
            print(f"\nrun_suite: the lab's tests ended after {elapsed(started)} (exit {lab_rc})")
            unit_rc = unit.wait()
    finally:
        # Interrupted (Ctrl-C, or CI's time limit): neither run is left behind.
        for run in (lab, unit):
            if run is not None and run.poll() is None:
                run.terminate()
                run.wait()
        remove(cgroup)
    print(
        f"\nrun_suite: the tests that need no test host ended after {elapsed(unit_started)} "
        f"(exit {unit_rc}); their output follows\n",
        flush=True,
    )
    sys.stdout.write(arguments.unit_log.read_text())
    print(f"\nrun_suite: lab exit {lab_rc}, no-host exit {unit_rc}, {elapsed(started)} in all")
    return lab_rc or unit_rc


if __name__ == "__main__":
    sys.exit(main())
