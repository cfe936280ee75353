#!/usr/bin/env python3
"""Where a Storm run's submit phase goes, step by step, read from finished run directories.

The submit phase (run.json `phases`) runs from the kit's submission until `storm-probe running`
has seen every executor of the topology report an uptime. The daemons' own log lines, kept in
each run's engine/logs/<host>.log, split it into:

- client: from the phase's start until Nimbus logs "Received topology submission" (the submitter
  JVM's start, the jar's upload);
- scheduling wait: until Nimbus logs "Assigning <topology>" (Nimbus assigns a new topology on its
  next scheduling round, every `nimbus.monitor.freq.secs`, not on submission);
- supervisors: until the last supervisor logs "Launching worker" for it;
- workers: until the phase's end (the worker JVMs' start, their executors' first heartbeats
  reaching Nimbus, and the probe's next poll).

Reads run directories only; runs nothing. The daemons' log times carry no zone: they are read as
UTC (the test hosts' zone), and a run whose steps do not fall in order within its phase is left
out and named. Writes a result file in the format of docs/bench-results.md:

    bench/storm_submit_steps.py 'bench/out/studies/*-storm-*' 'bench/out/engine-figures/*storm*' \
        --out bench/out/storm-submit-steps.json
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import statistics
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import fault_figures  # noqa: E402

from analysis.study.kit import recorded_commit  # noqa: E402

STEPS = ("client", "scheduling wait", "supervisors", "workers")
LINE_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) ")


@dataclass(frozen=True)
class SubmitSteps:
    run_id: str
    commit: str  # the kit's, as run.json records it (kit.recorded_commit)
    submit_s: float
    steps: dict[str, float]


def _time_ms(line: str) -> int | None:
    match = LINE_TIME.match(line)
    if match is None:
        return None
    moment = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def first_at(lines: Iterable[str], *needles: str) -> int | None:
    """The time of the first line holding every needle."""
    for line in lines:
        if all(needle in line for needle in needles):
            return _time_ms(line)
    return None


def steps_of(run_dir: Path) -> SubmitSteps | str:
    """The run's submit steps, or why they cannot be read from it."""
    record = json.loads((run_dir / "run.json").read_text())
    if record.get("engine") != "storm":
        return "not a Storm run"
    phases = {p["name"]: p for p in record.get("phases") or []}
    name = record.get("job_id")
    if "submit" not in phases or not name:
        return "no submit phase or topology name in run.json"
    start, end = phases["submit"]["start_ms"], phases["submit"]["end_ms"]
    logs = {path.stem: path.read_text(errors="replace").splitlines()
            for path in sorted((run_dir / "engine" / "logs").glob("*.log"))}  # fmt: skip
    every = [line for lines in logs.values() for line in lines]
    received = first_at(every, "Received topology submission for " + name)
    assigned = first_at(every, "Assigning " + name + "-")
    launches = [
        first_at(lines, "Launching worker with assignment", "topology_id:" + name + "-")
        for lines in logs.values()
    ]
    launched = [t for t in launches if t is not None]
    if received is None or assigned is None or not launched:
        return "the daemons' logs kept in engine/logs do not reach back to the submission"
    points = [start, received, assigned, max(launched), end]
    if points != sorted(points):
        return "its log lines do not fall in order within the phase (a clock or zone apart?)"
    steps = {step: (b - a) / 1000 for step, a, b in zip(STEPS, points, points[1:], strict=False)}
    return SubmitSteps(record["run_id"], recorded_commit(record), (end - start) / 1000, steps)


def result_file(found: list[SubmitSteps], skipped: dict[str, str], run_dirs: list[Path]) -> dict:
    """The result file: the header from the runs read (their one commit, else this checkout's),
    the step medians, and every run with its commit (a note where they differ)."""
    commits = sorted({s.commit for s in found})
    header = fault_figures.header_of("bench/storm_submit_steps.py", run_dirs)
    spans = (
        []
        if len(commits) == 1
        else [f"The runs ran with {len(commits)} kit commits ({', '.join(commits)}): the header "
              "gives this checkout's; each run's is in the table below."]
    )  # fmt: skip

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"

    rows: list[list[Any]] = [
        ["submit phase", cell([s.submit_s for s in found])],
        *([step, cell([s.steps[step] for s in found])] for step in STEPS),
    ]
    return {
        **header,
        "tables": [
            {
                "title": "Storm's submit phase, step by step",
                "description": (
                    f"{len(found)} Storm runs on the test hosts: the submit phase (run.json "
                    "phases, the control node's clock) split by the daemons' own log lines "
                    "(engine/logs: Nimbus's 'Received topology submission' and 'Assigning', "
                    "each supervisor's 'Launching worker'; read as UTC, the hosts' zone). "
                    "Seconds, median (min-max) over the runs."
                ),
                "columns": ["step", "seconds"],
                "rows": rows,
                "notes": [
                    "client: the submitter's JVM and the jar's upload, until Nimbus has the "
                    "topology. scheduling wait: Nimbus assigns a new topology on its next "
                    "scheduling round (nimbus.monitor.freq.secs, Storm's default 10 s, which "
                    "the kit keeps), not on submission. supervisors: until the last one "
                    "launches its worker. workers: the worker JVMs' start until storm-probe "
                    "sees every executor's uptime at Nimbus. A worker reports its executors to "
                    "Nimbus every executor.metrics.frequency.secs (the kit's "
                    "storm_executor_metrics_frequency_s, 10 s; Storm 2.8.3's Worker schedules "
                    "those reports from it where no Pacemaker is used), so the probe sees them "
                    "up to one interval after they run; the logs kept do not show when each "
                    "report was sent.",
                    "The test hosts share one machine's 2 cores.",
                    *spans,
                    *(f"Left out: {run} ({why})." for run, why in sorted(skipped.items())),
                ],
            },
            {
                "title": "Every run",
                "columns": ["run", "kit commit", "submit s", *(f"{step} s" for step in STEPS)],
                "rows": [
                    [s.run_id, s.commit, round(s.submit_s, 1)]
                    + [round(s.steps[k], 1) for k in STEPS]
                    for s in found
                ],
            },
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="globs of run directories (Storm's are read)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "storm-submit.json")
    args = parser.parse_args(argv)
    runs = sorted(
        {Path(p) for pattern in args.runs for p in glob.glob(pattern)
         if (Path(p) / "run.json").is_file()}
    )  # fmt: skip
    found: list[SubmitSteps] = []
    read: list[Path] = []
    skipped: dict[str, str] = {}
    for run_dir in runs:
        steps = steps_of(run_dir)
        if steps == "not a Storm run":
            continue
        if isinstance(steps, str):
            skipped[run_dir.name] = steps
        else:
            found.append(steps)
            read.append(run_dir)
    if not found:
        parser.error(f"no Storm run whose submit steps can be read among {len(runs)} runs")
    document = result_file(found, skipped, read)
    fault_figures.write_result(document, args.out.parent, args.out.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
