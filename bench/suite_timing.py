#!/usr/bin/env python3
"""How long `make test` takes, as CI runs it: a fresh clone's `.ci/run`, timed and split.

    bench/suite_timing.py [--clone DIR] [--log FILE] [--out FILE]   # clone, run, measure
    bench/suite_timing.py --from-log FILE [--out FILE]              # the result again

Clones this checkout's HEAD into DIR (which must not exist), runs `bash .ci/run` there with its
output streamed to the terminal and to the log, and reads the parts back from what the suite
itself prints: `make test`'s own time, run_suite's three runs (the lab's tests; beside them, at a
low CPU weight, the tests that need no test host, after the linters; last, alone, the realtime
tests), the machine's CPU use, and the lab's slowest items. The log's first line says which
commit ran and when, so a kept log gives the same result again. A run that did not pass is not
measured. Writes one result file (docs/bench-results.md). Needs the machine to itself, the test
hosts included: `make test` starts them afresh."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = "bench/suite_timing.py"
HEADER = "suite_timing: "
BUDGET_S, AIM_S = 60 * 60, 45 * 60
SLOWEST = 15

MAKE_TEST = re.compile(r"^make test took (\d+) min (\d+) s", re.M)
SUITE = re.compile(r"^==== run_suite: (.+); (?:(\d+) min )?(\d+) s in all ====$", re.M)
SUITE_CPU = re.compile(
    r"^run_suite: over the whole suite, the machine's CPU time: (\d+)% busy", re.M
)
LAB_END = re.compile(
    r"^run_suite: the lab's tests ended after (?:(\d+) min )?(\d+) s \(exit (\d+)\); "
    r"the machine's CPU time: (?:(\d+)% busy|not measured)",
    re.M,
)
BESIDE_WEIGHT = re.compile(
    r"^run_suite: beside the lab's tests, .* run "
    r"(in the cgroup \S+ \((\d+) CPU shares\)|at nice 10)",
    re.M,
)
SLOWEST_HEADING = re.compile(r"^=+ slowest \d+ durations =+$", re.M)
BESIDE_END = "run_suite: the tests beside them have ended"
REALTIME_START = "run_suite: last, alone, the realtime tests"
SESSION = re.compile(r"^=+ (.+?) in ([\d.]+)s(?: \([\d:]+\))? =+$", re.M)
DURATION = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+(\S.*)$", re.M)
LAB_HOST = re.compile(r"^(node\d+) [\d.]+: \(re\)creating \((.+)\)$", re.M)


def counts_of(text: str) -> dict[str, int]:
    """{'passed': 74, 'deselected': 1056} from pytest's '74 passed, 1056 deselected'."""
    found = (re.fullmatch(r"(\d+) (\w+)", part.strip()) for part in text.split(","))
    return {m.group(2): int(m.group(1)) for m in found if m}


def session_of(part: str, name: str) -> dict[str, Any]:
    """The last pytest summary line in one part of the log: its counts and seconds."""
    sessions = SESSION.findall(part)
    if not sessions:
        raise ValueError(f"no pytest summary for {name} in the log")
    counts, seconds = sessions[-1]
    return {"counts": counts_of(counts), "seconds": round(float(seconds))}


def minutes_s(minutes: str | None, seconds: str) -> int:
    return int(minutes or 0) * 60 + int(seconds)


def parse(log: str) -> dict[str, Any]:
    """What one `.ci/run` log says: its header, `make test`'s time, the three runs, the CPU and
    the lab's slowest items. Raises ValueError for a log this bench did not write or a run that
    did not pass."""
    first, _, rest = log.partition("\n")
    if not first.startswith(HEADER):
        raise ValueError(f"the log's first line is not this bench's header ({HEADER}...)")
    header = json.loads(first[len(HEADER) :])
    made, suite, lab_end = MAKE_TEST.search(rest), SUITE.search(rest), LAB_END.search(rest)
    if not made or not suite or not lab_end:
        raise ValueError("the log has no 'make test took', run_suite end or lab end line")
    if suite.group(1) != "every run passed (lab, beside the lab, realtime)":
        raise ValueError(f"the suite did not pass: {suite.group(1)}")
    lab_part, _, after = rest.partition(BESIDE_END)
    beside_part, _, realtime_part = after.partition(REALTIME_START)
    headings = list(SLOWEST_HEADING.finditer(lab_part))
    durations_part = lab_part[headings[-1].end() :] if headings else ""
    cpu = SUITE_CPU.search(rest)
    weight = BESIDE_WEIGHT.search(rest)
    return {
        **header,
        "make_test_s": minutes_s(made.group(1), made.group(2)),
        "suite_s": minutes_s(suite.group(2), suite.group(3)),
        "suite_busy_percent": int(cpu.group(1)) if cpu else None,
        "lab_wall_s": minutes_s(lab_end.group(1), lab_end.group(2)),
        "lab_busy_percent": int(lab_end.group(4)) if lab_end.group(4) else None,
        "beside_weight": (
            f"at {weight.group(2)} CPU shares"
            if weight and weight.group(2)
            else "at nice 10"
            if weight
            else "at a weight the log does not say"
        ),
        "lab": session_of(lab_part, "the lab's tests"),
        "beside": session_of(beside_part, "the tests beside the lab"),
        "realtime": session_of(realtime_part, "the realtime tests"),
        "slowest": [
            {"seconds": float(s), "when": when, "item": item.strip()}
            for s, when, item in DURATION.findall(durations_part)[:SLOWEST]
        ],
        "hosts": [f"{name} ({kind})" for name, kind in LAB_HOST.findall(rest)],
    }


def percent(value: int | None) -> str:
    return f"{value} %" if value is not None else "(not measured)"


def tests_text(session: dict[str, Any]) -> str:
    counts = session["counts"]
    tests = ("passed", "failed", "skipped", "xfailed", "xpassed", "error", "errors")
    return ", ".join(f"{n:,} {what}" for what, n in counts.items() if what in tests)


def result(measured: dict[str, Any]) -> dict[str, Any]:
    """The result file from one parsed log."""
    lab, beside, realtime = measured["lab"], measured["beside"], measured["realtime"]
    before_suite_s = measured["make_test_s"] - measured["suite_s"]
    after_lab_s = measured["suite_s"] - measured["lab_wall_s"]
    rows = [
        ["make test", measured["make_test_s"], "", "budget 3,600 s; aim 2,700 s"],
        [
            "before the suite",
            before_suite_s,
            "",
            "the virtualenv and collections, the jobs' Maven tests, make lab --fresh",
        ],
        [
            "the suite (tests/run_suite.py)",
            measured["suite_s"],
            "",
            f"the machine's CPU {percent(measured['suite_busy_percent'])} busy over it",
        ],
        [
            "the lab's tests",
            measured["lab_wall_s"],
            tests_text(lab),
            f"pytest's own count {lab['seconds']} s; the CPU "
            f"{percent(measured['lab_busy_percent'])} busy over it",
        ],
        [
            "beside them: the linters, then the tests without a test host",
            "",
            tests_text(beside),
            f"pytest's own count {beside['seconds']} s, {measured['beside_weight']}, started "
            "with the lab's tests",
        ],
        [
            "after the lab's tests: the end of those beside them, then the realtime tests",
            after_lab_s,
            "",
            f"the realtime tests alone: {realtime['seconds']} s by pytest's own count",
        ],
        [
            "the realtime tests",
            realtime["seconds"],
            tests_text(realtime),
            "pytest's own count",
        ],
    ]
    dirty = ["The checkout's tree was dirty when cloned: the clone ran HEAD."]
    return {
        "bench": BENCH,
        "date": measured["started_utc"][:10],
        "commit": measured["commit"][:7],
        "machine": (
            f"{measured['machine']}; the test hosts share its cores, and the tests beside the "
            "lab's run on them at the same time"
        ),
        "hosts": measured["hosts"] or ["the test hosts of make lab --fresh"],
        "tables": [
            {
                "title": "make test on a fresh clone, part by part",
                "description": (
                    "One `.ci/run` on a fresh clone, as CI runs it; seconds from the suite's "
                    "own lines (`make test took`, run_suite's end of the lab's tests and of "
                    "the whole suite) and pytest's session summaries."
                ),
                "columns": ["part", "wall s", "tests", "notes"],
                "rows": rows,
                "notes": [
                    f"The bench's own clock around `bash .ci/run`: {measured['wall_s']:.0f} s, "
                    "make test's setup included.",
                    "One run, with no spread.",
                    *(dirty if measured.get("dirty") else []),
                ],
            },
            {
                "title": f"The lab's {SLOWEST} slowest items",
                "description": (
                    "pytest's --durations for the lab's tests: a fixture's setup is counted "
                    "once, in the first test that uses it."
                ),
                "columns": ["seconds", "when", "test"],
                "rows": [[d["seconds"], d["when"], d["item"]] for d in measured["slowest"]],
            },
        ],
    }


def os_name() -> str:
    """This machine's system, as /etc/os-release names it."""
    found = re.search(r'^PRETTY_NAME="?([^"\n]+)', Path("/etc/os-release").read_text(), re.M)
    return found.group(1) if found else "an unnamed system"


def run_ci(clone: Path, log_path: Path) -> int:
    """Clone HEAD into clone, run .ci/run there with its output to the terminal and the log,
    and end the log with the bench's own timing."""
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = bool(
        subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    header = {
        "commit": commit,
        "machine": f"{os.cpu_count()} cores, {memory_gib:.0f} GiB, {os_name()}",
        "dirty": dirty,
        "started_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "clone": str(clone),
    }
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log_path.open("w") as log:
        log.write(HEADER + json.dumps(header) + "\n")
        log.flush()
        ci = subprocess.Popen(
            ["bash", ".ci/run"],
            cwd=clone,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert ci.stdout is not None
        for line in ci.stdout:
            sys.stdout.write(line)
            log.write(line)
        code = ci.wait()
    wall_s = round(time.monotonic() - started, 1)
    with log_path.open("a") as log:
        log.write(f"{HEADER}end {json.dumps({'exit': code, 'wall_s': wall_s})}\n")
    return code


def bench_end(log: str) -> dict[str, Any]:
    """The bench's own last line: .ci/run's exit and its wall time on the bench's clock."""
    ends = re.findall(rf"^{HEADER}end (.+)$", log, re.M)
    if not ends:
        raise ValueError("the log has no end line from this bench: the run did not finish")
    return json.loads(ends[-1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clone", type=Path, default=Path("/tmp/ci-check"))
    parser.add_argument("--log", type=Path, default=REPO / "bench/out/suite-timing.log")
    parser.add_argument("--from-log", type=Path, help="run nothing: the result from this log")
    parser.add_argument("--out", type=Path, default=REPO / "bench/out/suite-timing.json")
    args = parser.parse_args(argv)
    if args.from_log:
        if not args.from_log.is_file():
            parser.error(f"{args.from_log}: no such log")
        log_path = args.from_log
    else:
        clone = args.clone.resolve()
        if clone.exists():
            parser.error(f"{clone} exists: remove it or give another --clone")
        log_path = args.log
        code = run_ci(clone, log_path)
        if code != 0:
            print(f"suite_timing: .ci/run failed (exit {code}); not measured. Log: {log_path}")
            return code
    log = log_path.read_text()
    try:
        measured = {**parse(log), **bench_end(log)}
    except ValueError as error:
        print(f"suite_timing: {log_path}: {error}", file=sys.stderr)
        return 1
    if measured["exit"] != 0:
        print(f"suite_timing: {log_path}: .ci/run exited {measured['exit']}; not measured")
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result(measured), indent=2) + "\n")
    print(
        f"make test {measured['make_test_s']} s (lab {measured['lab_wall_s']} s, realtime "
        f"{measured['realtime']['seconds']} s); wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
