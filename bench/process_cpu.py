"""Where this machine's CPU went during a bench run, per kind of process (Kafka broker, Flink
TaskManager, the kit's producer, ...), sampled from /proc. The test hosts are network namespaces
and a container on this one machine, so their processes are all visible here; a share is of the
whole machine's CPU time (all cores) over a window."""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "lab"))
from cpu_time import read_cpu_ticks  # noqa: E402

# Substrings of a process's command line, first match wins: the kinds a bench reports.
KINDS = (
    ("kafka.Kafka", "kafka"),
    ("TaskManagerRunner", "flink-taskmanager"),
    ("BashJavaUtils", "flink-taskmanager"),
    ("StandaloneSessionClusterEntrypoint", "flink-jobmanager"),
    ("org.apache.flink.client", "flink-client"),
    ("org.apache.storm.daemon.worker", "storm-worker"),
    ("LogWriter", "storm-worker"),
    ("org.apache.storm.daemon.supervisor", "storm-supervisor"),
    ("org.apache.storm.daemon.nimbus", "storm-nimbus"),
    ("QuorumPeerMain", "zookeeper"),
    ("org.apache.spark", "spark"),
    ("producer.produce", "producer"),
    ("producer.collect", "collector"),
    ("producer.", "kit samplers"),
    ("flink_timeline.py", "kit samplers"),
    ("storm_timeline.py", "kit samplers"),
    ("ansible", "ansible"),
    ("mitogen", "ansible"),
    ("supervisord", "supervisord"),
)
OTHER = "other"
# What no sampled process's user or system time accounts for: idle, interrupts, stolen time,
# and processes that started and ended between two readings.
NO_PROCESS = "idle or unsampled"


def kind_of(cmdline: str) -> str:
    for needle, kind in KINDS:
        if needle in cmdline:
            return kind
    return OTHER


def _process_ticks() -> dict[int, tuple[str, int, int]]:
    """Every process's kind, its user plus system CPU ticks so far, and when it started (ticks
    since boot)."""
    found: dict[int, tuple[str, int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, UnicodeDecodeError):
            continue  # gone, or a kernel thread's unreadable line
        # Fields after the command's closing parenthesis: utime and stime are the 12th and 13th,
        # starttime the 20th.
        fields = stat.rsplit(")", 1)[-1].split()
        try:
            found[int(entry.name)] = (
                kind_of(cmdline),
                int(fields[11]) + int(fields[12]),
                int(fields[19]),
            )
        except (IndexError, ValueError):
            continue
    return found


def _uptime_ticks() -> int:
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))


def _machine_ticks() -> int:
    """All cores' CPU ticks so far, busy and idle."""
    return sum(read_cpu_ticks().values())


class ProcessSampler:
    """Samples every interval_s, in a thread, each kind's CPU ticks since the sample before
    (a process started in between counts from its start; one that ended loses its last
    interval) and the machine's, and writes them to path as JSON lines
    ({"t_ms", "machine", "kinds": {kind: ticks}}), on the control node's clock, after a first
    line that marks its start ("start": true). With append,
    after the lines already in path: a resumed study's samples join its earlier starts'."""

    def __init__(self, path: Path, interval_s: float = 2.0, append: bool = False) -> None:
        self.path = path
        self.interval_s = interval_s
        self.append = append
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> ProcessSampler:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        # Each process's ticks when last seen, by pid and start time (a pid can be reused): one
        # missing from a reading (it raced with it) keeps its count, so it is not counted from
        # zero when it shows again.
        last = {(pid, started): ticks for pid, (_, ticks, started) in _process_ticks().items()}
        machine = _machine_ticks()
        since = _uptime_ticks()
        with self.path.open("a" if self.append else "w", encoding="utf-8") as out:
            # The baseline's instant: the first interval starts here, and none of an earlier
            # start's (append) ends here.
            start = {"t_ms": int(time.time() * 1000), "machine": 0, "kinds": {}, "start": True}
            out.write(json.dumps(start) + "\n")
            while not self._stop.wait(self.interval_s):
                # Uptime before the scan: a process started during it is new, not unknown.
                now_since = _uptime_ticks()
                now = _process_ticks()
                now_machine = _machine_ticks()
                kinds: dict[str, int] = {}
                for pid, (kind, ticks, started) in now.items():
                    key = (pid, started)
                    # New since the last reading: all its time; else an unknown baseline.
                    new_spent = ticks if started >= since else 0
                    spent = ticks - last[key] if key in last else new_spent
                    last[key] = ticks
                    if spent > 0:
                        kinds[kind] = kinds.get(kind, 0) + spent
                line = {"t_ms": int(time.time() * 1000), "machine": now_machine - machine}
                out.write(json.dumps({**line, "kinds": kinds}) + "\n")
                out.flush()
                machine, since = now_machine, now_since


def read_samples(path: Path) -> list[dict]:
    """The samples in path; a line that is not a sample (one cut short when its sampler was
    killed) is left out, which leaves its interval unsampled."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    samples = []
    for line in lines:
        try:
            sample = json.loads(line)
        except ValueError:
            continue
        if isinstance(sample, dict) and "t_ms" in sample:
            samples.append(sample)
    return samples


def shares(
    samples: Sequence[Mapping], start_ms: int, end_ms: int, min_covered: float = 0.9
) -> dict[str, float]:
    """Each kind's share (%) of the machine's CPU time over [start_ms, end_ms], with NO_PROCESS
    for the rest. A sample holds the ticks since the one before it; a sample that straddles an
    end of the window counts in proportion to its overlap. {} unless the samples cover at
    least min_covered of the window."""
    machine = 0.0
    totals: dict[str, float] = {}
    covered_ms = 0
    for before, sample in itertools.pairwise(samples):
        if sample.get("start"):
            continue  # a sampler's start: the gap since an earlier one's last line is unsampled
        begin, end = int(before["t_ms"]), int(sample["t_ms"])
        overlap = min(end, end_ms) - max(begin, start_ms)
        if end <= begin or overlap <= 0:
            continue
        weight = overlap / (end - begin)
        covered_ms += overlap
        machine += weight * int(sample["machine"])
        for kind, ticks in sample["kinds"].items():
            totals[kind] = totals.get(kind, 0.0) + weight * int(ticks)
    if machine <= 0 or end_ms <= start_ms or covered_ms < min_covered * (end_ms - start_ms):
        return {}
    result = {kind: round(100.0 * ticks / machine, 1) for kind, ticks in totals.items()}
    result[NO_PROCESS] = round(max(0.0, 100.0 - sum(result.values())), 1)
    return dict(sorted(result.items(), key=lambda item: -item[1]))


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Sample per-kind CPU until interrupted.")
    parser.add_argument("out", type=Path, help="JSON lines to write (ProcessSampler's format)")
    parser.add_argument("--interval-s", type=float, default=2.0)
    parser.add_argument("--append", action="store_true", help="keep the lines already in out")
    args = parser.parse_args()
    stop = threading.Event()
    # SIGTERM ends it cleanly. SIGINT too, unless it started ignoring it (a shell's background
    # job): beside a study, Ctrl-C once lets the run under way finish, which must be sampled.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    with ProcessSampler(args.out, args.interval_s, append=args.append):
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
