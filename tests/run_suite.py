"""`make test`'s pytest runs, in three parts:

1. the lab's tests (`-m "lab and not deferred"`), their output streamed as it comes;
2. beside them, at a low CPU weight, the tests that need no test host and no wall-clock deadline
   (`-m "not lab and not realtime"`), after the command given with --beside-first (`make test`:
   the linters, which need no test host either), meant to use the CPU the lab leaves unused
   (waits on SSH, on a paced producer, on a fault's schedule) instead of adding their own time
   after the lab's (with both running, the CPU is hardly ever idle); their output goes to a
   log, printed once the lab's tests are done;
3. last, alone and at the normal weight, the `realtime` tests that need no test host (deadlines
   of seconds or less on the wall clock, the local Kafka broker's JVM, conftest marks them),
   which a busy lab beside them could make late.

The low weight is a cgroup (v1 `cpu` hierarchy, below this process's own) with 256 CPU shares,
which every process those tests start stays in, also one in a session of its own. Where the
runner's cgroup is the root, as on the 2-core build machine, its siblings are the
autogroups of every session (1024 each at nice 0), so it weighs a quarter of one session; below
a non-root cgroup its siblings are single tasks, each weighing 1024 at nice 0. Not the idle
class: they must still get some CPU while the lab keeps both cores busy. Where this machine has
no such hierarchy: `nice 10`, and the runner says so.

The runner prints, when the lab's tests end and at the end, how the machine's CPU time went
(busy, idle, stolen by the hypervisor, from /proc/stat): a slow run shows whether it had the CPU.

Exit status: the first non-zero of the three runs, else 0. Each run has a process group of its
own: Ctrl-C or SIGTERM to the runner is passed on to each run as one SIGINT, which lets its tests
clean up for up to STOP_GRACE_S before it is killed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lab"))
from cpu_time import cpu_use, read_cpu_ticks  # noqa: E402

CPU_HIERARCHY = Path("/sys/fs/cgroup/cpu")
# A session's autogroup, or a task below a non-root cgroup, weighs 1024 at nice 0.
LOW_CPU_SHARES = 256
# What pytest needs to undo a lab test's changes (the cut-off table, a stopped daemon, faults).
STOP_GRACE_S = 120


def own_cpu_cgroup(proc_cgroup: str) -> str:
    """This process's cgroup in the v1 `cpu` hierarchy, from /proc/self/cgroup's text ("/" when
    none is named)."""
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return "/"


def low_weight_cgroup() -> Path | None:
    """A new cgroup with LOW_CPU_SHARES below this process's own, or None where this machine
    has no cgroup v1 `cpu` hierarchy that this user may change."""
    parent = CPU_HIERARCHY / own_cpu_cgroup(Path("/proc/self/cgroup").read_text()).lstrip("/")
    if not (parent / "cpu.shares").exists():
        return None
    cgroup = parent / f"streamlab-tests-{os.getpid()}"
    try:
        cgroup.mkdir()
        (cgroup / "cpu.shares").write_text(f"{LOW_CPU_SHARES}\n")
    except OSError:
        return None
    return cgroup


def enter(cgroup: Path | None) -> Callable[[], None]:
    """What the low-weight run's process does before it execs pytest: join the cgroup, or lower
    its own priority where there is none."""

    def join() -> None:
        if cgroup is None:
            os.nice(10)
        else:
            (cgroup / "cgroup.procs").write_text(f"{os.getpid()}\n")

    return join


def remove(cgroup: Path | None) -> None:
    """Kill what the tests left in the cgroup, then remove it (once it is gone, nothing)."""
    if cgroup is None or not cgroup.exists():
        return
    for _ in range(10):
        left = [int(pid) for pid in (cgroup / "cgroup.procs").read_text().split()]
        if not left:
            break
        print(f"run_suite: killing what the tests left running: {left}", file=sys.stderr)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    try:
        cgroup.rmdir()
    except OSError as error:
        print(f"run_suite: {cgroup} kept: {error}", file=sys.stderr)


def stop(runs: list[subprocess.Popen[bytes]]) -> None:
    """Ask each run that still runs to stop as Ctrl-C does (once: a second SIGINT makes pytest
    skip its cleanup), let it clean up for STOP_GRACE_S, then kill what is left of it."""
    alive = [run for run in runs if run.poll() is None]
    for run in alive:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGINT)
    deadline = time.monotonic() + STOP_GRACE_S
    for run in alive:
        try:
            run.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)
            run.wait()


def exit_status(returncode: int) -> int:
    """A run's exit status as a shell gives it (killed by signal N: 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def elapsed(started: float) -> str:
    seconds = int(time.monotonic() - started)
    return f"{seconds // 60} min {seconds % 60} s"


class Stopped(Exception):
    """SIGTERM arrived (CI's time limit, or a kill)."""


def raise_stopped(signum: int, frame: object) -> None:
    raise Stopped


# The lab's run: every lab test but those deferred until the budget has room (docs/testing.md).
LAB = "lab and not deferred"


def beside_command(pytest: list[str], first: str | None) -> list[str]:
    """The run beside the lab's tests: their pytest, after the shell command `first` when one is
    given; it exits with the first non-zero status of the two (the tests run either way, and a
    failed `first` is named in the log). On SIGINT or SIGTERM the shell waits for what it runs
    to end, then exits 130 without starting anything more."""
    tests = [*pytest, "-m", "not lab and not realtime"]
    if not first:
        return tests
    failed = shlex.quote(f"run_suite: before the tests beside the lab, `{first}` failed: exit")
    script = "\n".join(
        (
            # Without the trap, sh would die at once on the runner's SIGINT, leaving them running.
            "trap 'exit 130' INT TERM",
            f"({first})",  # in a subshell: its own `exit` ends only it
            "first=$?",
            f'[ "$first" -ne 0 ] && echo {failed} "$first"',
            '"$@"',
            "tests=$?",
            '[ "$first" -ne 0 ] && exit "$first"',
            'exit "$tests"',
        )
    )
    return ["sh", "-c", script, "beside", *tests]


def run_all(
    pytest: list[str],
    beside: list[str],
    beside_log: Path,
    runs: list[subprocess.Popen[bytes]],
    started: float,
    cpu_at_start: dict[str, int],
) -> dict[str, int]:
    """The three runs, in their order; each started is added to runs (for stop())."""
    cgroup = low_weight_cgroup()
    try:
        with beside_log.open("w") as log:
            # Each run in a process group of its own: a signal reaches it only through stop().
            lab = subprocess.Popen([*pytest, "-m", LAB], cwd=REPO, process_group=0)
            runs.append(lab)
            beside_run = subprocess.Popen(
                beside,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
                preexec_fn=enter(cgroup),
            )
            runs.append(beside_run)
            weight = (
                f"in the cgroup {cgroup} ({LOW_CPU_SHARES} CPU shares)"
                if cgroup
                else "at nice 10 (no cgroup v1 cpu hierarchy this runner may use)"
            )
            print(
                f"run_suite: beside the lab's tests, those that need no test host and no "
                f"wall-clock deadline run {weight}; their output: {beside_log}",
                flush=True,
            )
            codes = {"lab": exit_status(lab.wait())}
            print(
                f"\nrun_suite: the lab's tests ended after {elapsed(started)} "
                f"(exit {codes['lab']}); {cpu_use(cpu_at_start, read_cpu_ticks())}",
                flush=True,
            )
            codes["beside the lab"] = exit_status(beside_run.wait())
    finally:
        remove(cgroup)
    # Their own duration is in their summary line: this runner notices their end only now.
    print(
        f"run_suite: the tests beside them have ended (exit {codes['beside the lab']}); "
        "their output follows\n",
        flush=True,
    )
    sys.stdout.write(beside_log.read_text(errors="replace"))
    print("\nrun_suite: last, alone, the realtime tests that need no test host\n", flush=True)
    realtime = subprocess.Popen([*pytest, "-m", "realtime and not lab"], cwd=REPO, process_group=0)
    runs.append(realtime)
    codes["realtime"] = exit_status(realtime.wait())
    return codes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--durations", type=int, default=40, help="slowest tests to list per run")
    parser.add_argument(
        "--beside-log",
        type=Path,
        default=REPO / "logs" / "tests-beside-the-lab.log",
        help="where the run beside the lab's tests writes its output",
    )
    parser.add_argument(
        "--beside-first",
        metavar="COMMAND",
        help="a shell command run beside the lab's tests, before the tests beside them",
    )
    parser.add_argument(
        "pytest_args", nargs="*", help="more pytest arguments for every run (after --)"
    )
    arguments = parser.parse_args()
    pytest = [
        *(sys.executable, "-m", "pytest", f"--durations={arguments.durations}"),
        *arguments.pytest_args,
    ]
    started = time.monotonic()
    cpu_at_start = read_cpu_ticks()
    arguments.beside_log.parent.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, raise_stopped)
    runs: list[subprocess.Popen[bytes]] = []
    try:
        beside = beside_command(pytest, arguments.beside_first)
        codes = run_all(pytest, beside, arguments.beside_log, runs, started, cpu_at_start)
    except BaseException as error:
        # Ctrl-C, SIGTERM or the runner's own failure: every run cleans up, once.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(f"\nrun_suite: stopping every run ({type(error).__name__})", flush=True)
        stop(runs)
        if isinstance(error, KeyboardInterrupt):
            return 130
        if isinstance(error, Stopped):
            return 143
        raise
    failed = {name: code for name, code in codes.items() if code != 0}
    verdict = (
        "FAILED: " + ", ".join(f"{name} exit {code}" for name, code in failed.items())
        if failed
        else "every run passed (lab, beside the lab, realtime)"
    )
    print(f"\n==== run_suite: {verdict}; {elapsed(started)} in all ====")
    print(f"run_suite: over the whole suite, {cpu_use(cpu_at_start, read_cpu_ticks())}")
    return next(iter(failed.values()), 0)


if __name__ == "__main__":
    sys.exit(main())
