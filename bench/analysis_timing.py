#!/usr/bin/env python3
"""Figures of the PySpark analysis (issue 12): `python -m analysis summarize` on generated run
directories of 1M and 10M received records: wall time, and peak memory of the driver process
(the Python driver and, in local mode, the JVM that also runs the executors).

    .venv/bin/python bench/analysis_timing.py [--records 1000000 10000000] [--keep]
    # the same on the lab's Spark cluster (the directory must be readable at the same path on
    # every worker: the test hosts share this machine's filesystem outside their private mounts,
    # so the default bench/out/ works; executors connect back to the driver on the lab bridge):
    .venv/bin/python bench/analysis_timing.py --records 10000000 --master spark://10.77.0.11:7077 \\
        --conf spark.driver.host=10.77.0.1 --conf spark.driver.bindAddress=10.77.0.1 \\
        --conf spark.executor.memory=768m

Each run directory is generated once (a seeded synthetic run at --rate msg/s with lost
messages, duplicates and one fault with a stall and a replay) and kept under bench/out/ with
--keep. Every figure printed is measured in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
CHUNK = 200_000


def write_lines(path: Path, template: str, columns: list[np.ndarray]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, len(columns[0]), CHUNK):
            rows = zip(*(c[start : start + CHUNK].tolist() for c in columns), strict=True)
            out.write("".join(template.format(*row) for row in rows))


def generate(run_dir: Path, records: int, rate: int, seed: int) -> dict[str, int]:
    """A run with `records` received records at `rate` msg/s and one fault at 40 % of it: the
    fault stalls delivery for 6 s, loses 100 messages just before it and replays the 2 s
    before it; a few other messages are delivered twice, and 0.005 % are not acknowledged."""
    rng = np.random.default_rng(seed)
    messages = records * 97 // 100
    t0 = 1_800_000_000_000
    ids = np.arange(1, messages + 1, dtype=np.int64)
    intended = t0 + (ids - 1) * 1000 // rate
    sent = intended + rng.integers(0, 3, messages)
    acked = rng.random(messages) > 0.00005
    latency = (rng.lognormal(3.0, 0.5, messages)).astype(np.int64) + 2
    recv = intended + latency
    fault_ms = int(t0 + 0.4 * messages * 1000 / rate)
    stall_end = fault_ms + 6_000
    stalled = (recv >= fault_ms) & (recv < stall_end)
    recv[stalled] = stall_end + (recv[stalled] - fault_ms) // 8
    delivered = acked.copy()
    before = np.flatnonzero(acked & (intended >= fault_ms - 1_000) & (intended < fault_ms))
    delivered[rng.choice(before, size=min(100, len(before)), replace=False)] = False
    replay = np.flatnonzero(delivered & (intended >= fault_ms - 2_000) & (intended < fault_ms))
    extra = records - int(delivered.sum()) - len(replay)
    again = rng.choice(np.flatnonzero(delivered), size=max(extra, 0), replace=False)
    dup_ids = np.concatenate([replay, again])
    dup_recv = np.concatenate(
        [
            stall_end + rng.integers(0, 2_000, len(replay)),
            recv[again] + rng.integers(1, 5_000, len(again)),
        ]
    )
    all_ids = np.concatenate([ids[delivered], ids[dup_ids]])
    all_recv = np.concatenate([recv[delivered], dup_recv])
    order = np.argsort(all_recv, kind="stable")
    all_ids, all_recv = all_ids[order], all_recv[order]
    partition = all_ids % 4
    offset = np.arange(len(all_ids), dtype=np.int64) // 4
    processed = all_recv - 1

    run_dir.mkdir(parents=True)
    write_lines(
        run_dir / "produced.jsonl",
        '{{"msg_id":{},"intended_ms":{},"sent_ms":{},"acked":{}}}\n',
        [ids, intended, sent, np.where(acked, "true", "false")],
    )
    write_lines(
        run_dir / "received.jsonl",
        '{{"msg_id":{},"recv_ms":{},"partition":{},"offset":{},"processed_ms":{}}}\n',
        [all_ids, all_recv, partition, offset, processed],
    )
    end_ms = int(all_recv[-1]) + 10_000
    (run_dir / "faults.jsonl").write_text(
        json.dumps(
            {"fault": "kill", "host": "node2", "start_ms": fault_ms, "end_ms": stall_end},
            separators=(",", ":"),
        )
        + "\n"
    )
    (run_dir / "received.summary.json").write_text(json.dumps({"end_ms": end_ms}) + "\n")
    run = {
        "run_id": run_dir.name,
        "engine": "flink",
        "fault": "kill-taskmanager",
        "status": "complete",
        "parameters": {"count": messages, "rate": rate, "warmup_s": 10, "seed": seed},
        "start_ms": t0 - 5_000,
        "end_ms": end_ms,
    }
    (run_dir / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    return {"messages": messages, "records": len(all_ids)}


@dataclass
class Peaks:
    python_kb: int = 0
    jvm_kb: int = 0
    total_kb: int = 0


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * PAGE_KB
    except (OSError, ValueError, IndexError):
        return 0


def _descendants(root: int) -> list[int]:
    """The process's descendants, from /proc/<pid>/task/<tid>/children."""
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as children:
                    kids = [int(kid) for kid in children.read().split()]
            except OSError:
                continue
            found += kids
            stack += kids
    return found


def watch(root: int, peaks: Peaks, done: threading.Event) -> None:
    """Sample the RSS of the driver process and of its descendants (the JVM) every 0.1 s."""
    tree: list[int] = []
    tick = 0
    while not done.is_set():
        if tick % 10 == 0:
            tree = _descendants(root)
        tick += 1
        python = _rss_kb(root)
        jvm = sum(_rss_kb(pid) for pid in tree)
        peaks.python_kb = max(peaks.python_kb, python)
        peaks.jvm_kb = max(peaks.jvm_kb, jvm)
        peaks.total_kb = max(peaks.total_kb, python + jvm)
        done.wait(0.1)


def time_summarize(run_dir: Path, extra: list[str]) -> tuple[float, Peaks, int, str]:
    command = [sys.executable, "-m", "analysis", "summarize", str(run_dir), *extra]
    peaks, done = Peaks(), threading.Event()
    started = time.monotonic()
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    watcher = threading.Thread(target=watch, args=(process.pid, peaks, done), daemon=True)
    watcher.start()
    output, _ = process.communicate()
    wall = time.monotonic() - started
    done.set()
    watcher.join()
    if process.returncode != 0:
        sys.exit(f"summarize failed ({process.returncode}):\n{output}")
    # The largest single descendant waited for (the JVM when the driver reaps it, else Python).
    children_max_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, peaks, children_max_kb, output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--rate", type=int, default=10_000, help="msg/s of the generated runs")
    parser.add_argument("--master", help="spark://HOST:7077 (default: local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--driver-memory", help="passed to summarize (its default: 1g)")
    parser.add_argument("--keep", action="store_true", help="keep the generated run directories")
    args = parser.parse_args()

    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="analysis-", dir=OUT))
    os.chmod(work, 0o755)  # executors on a cluster read it as the service account
    extra = [f"--master={args.master}"] if args.master else []
    extra += [f"--conf={pair}" for pair in args.conf]
    extra += [f"--driver-memory={args.driver_memory}"] if args.driver_memory else []
    print(f"{os.cpu_count()} cores, master {args.master or 'local[*]'}, runs under {work}")
    figures = []
    try:
        for records in args.records:
            run_dir = work / f"bench-{records}"
            started = time.monotonic()
            made = generate(run_dir, records, args.rate, seed=records)
            size_mb = sum(p.stat().st_size for p in run_dir.iterdir()) / 2**20
            print(
                f"generated {made['records']} records ({made['messages']} messages, "
                f"{size_mb:.0f} MiB) in {time.monotonic() - started:.1f} s"
            )
            wall, peaks, children_kb, output = time_summarize(run_dir, extra)
            summary = json.loads((run_dir / "summary.json").read_text())
            print(output.rstrip())
            figures.append((records, wall, peaks, children_kb, summary))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print("records     wall s  records/s  python MiB  jvm MiB  both MiB  rusage max MiB")
    for records, wall, peaks, children_kb, _ in figures:
        mib = [peaks.python_kb / 1024, peaks.jvm_kb / 1024, peaks.total_kb / 1024]
        print(
            f"{records:>10}  {wall:6.1f}  {records / wall:9.0f}  {mib[0]:10.0f}  {mib[1]:7.0f}"
            f"  {mib[2]:8.0f}  {children_kb / 1024:14.0f}"
        )
    if len(figures) >= 2:
        ratio = figures[-1][1] / figures[0][1]
        print(f"time ratio {figures[-1][0]}/{figures[0][0]} records: {ratio:.2f}")


if __name__ == "__main__":
    main()
