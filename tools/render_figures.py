"""Render docs/figures.md from the committed benchmark results in bench/results/*.json alone.

    python tools/render_figures.py [--repo DIR] [--check]

Without --check it writes the page; with --check it exits 1 when the committed page differs from
what it would write. The format of a result file is docs/bench-results.md's; a file that does
not follow it stops the script with the file's name and what is wrong.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generated_page  # noqa: E402  (tools/, beside this file)

REPO = Path(__file__).resolve().parents[1]
PAGE = Path("docs/figures.md")
RESULTS = Path("bench/results")

# The benches whose figures the page awaits until a result file names them in its `bench`.
BENCHES: dict[str, str] = {
    "make bench": "`site.yml` on fresh test hosts: cold-cache download, first run, idempotent "
    "re-run, the ZooKeeper + Kafka re-run, the daemons' memory at rest (`bench/site_timing.py`)",
    "make bench-experiment": "the producer's capacity and pacing on the driver host "
    "(`bench/experiment_timing.py`)",
    "make bench-engines": "each engine (and Spark under each trigger) at a fixed rate over "
    "repetitions, and each one's sustainable rate, on the test hosts with Flink's TLS off "
    "(`bench/engine_figures.py`)",
    "make bench-faults": "each engine under a worker failure at two settings, with repetitions "
    "(`bench/fault_figures.py`)",
    "make bench-taskmanager": "whether a killed Flink TaskManager rejoins the cluster, and how "
    "fast (`bench/taskmanager_restarts.py`)",
    "make bench-study": "the user's study (`studies/flink-vs-storm.yml`) at half scale, with the "
    "engines' own evidence per setting",
    "make bench-user-study": "the user's study at scale 1 on the test hosts with Flink's TLS "
    "off (`bench/studies/flink-vs-storm-lab.yml`): each engine's capacity, then both "
    "at-least-once under a TaskManager or supervisor failure at three settings, 3 repetitions, "
    "beside the reference study, with 95 % intervals and the study's time "
    "(`bench/fault_figures.py --study`)",
    "make bench-guarantees": "each engine under each delivery guarantee it offers, with its "
    "worker killed mid-run, 3 repetitions: loss, duplicates, steady latency and recovery "
    "(`bench/guarantee_figures.py`)",
    "make bench-three-engines": "Flink, Storm and Spark at least once with the worker process "
    "killed mid-run (`studies/three-engines.yml`), beside OSPBench's worker-failure figures "
    "(`bench/three_engine_figures.py`)",
    "make bench-reset": "teardown, redeploy, and purge then `site.yml`, with the CPU's busy "
    "share (`bench/reset_timing.py`)",
    "make bench-exposure": "each daemon's listening sockets on the test hosts and who reaches "
    "them: the control node, an address in no inventory, and that address without the kit's "
    "nftables table (`bench/exposure.py`)",
    "bench/analysis_timing.py": "the PySpark analysis of 1M and 10M records, locally and on the "
    "Spark cluster",
    "bench/storm_submit_steps.py": "Storm's submit phase split into its steps (client, Nimbus's "
    "scheduling round, supervisors, workers) by the daemons' own log lines in finished runs",
    "bench/phase_compare.py": "where a run's time goes, per phase, for the kit before and after a "
    "change, measured alternately on the same test hosts, and the floor no change to the kit's "
    "steps removes",
    "bench/study_estimate.py": "how well a study's dry run foresees its wall time: each study "
    "dry-run, then run and timed, on the test hosts or the embedded default, with each phase's "
    "median over its runs",
    "bench/suite_timing.py": "how long `make test` takes on a fresh clone as CI runs it, part by "
    "part (before the suite, the lab's tests, the tests beside them, the realtime tests), with "
    "the lab's slowest items",
}

# Figures the README once quoted whose data (bench/out/, run directories) is gone.
DROPPED: tuple[tuple[str, str], ...] = (
    (
        "`make bench` site.yml timings",
        "cold and warm first runs, the idempotent re-run against "
        "its 90 s target, the ZooKeeper + Kafka re-run, daemon memory at rest",
    ),
    (
        "node3 and security-option converges",
        "hand-timed `make lab` and `site.yml` runs with the "
        "Debian 13 host and with every security option on",
    ),
    (
        "`site.yml` re-run by role",
        "the `profile_tasks` breakdown of the re-run (firewall, common, "
        "artifact, service ...) before and after the firewall role's one question per run",
    ),
    ("`make bench-experiment`", "producer capacity, rate error and send lag at 5,000 msg/s"),
    (
        "`make bench-engines`",
        "the latency parts of one Flink and one Storm run",
    ),
    (
        "`make bench-faults`",
        "the fault table (loss, duplicates, stall, detection and recovery) "
        "for Flink's killed TaskManager and Storm's killed supervisor at two settings each",
    ),
    ("`make bench-taskmanager`", "20 kills of a TaskManager rejoining on the next port"),
    (
        "`make bench-study`",
        "the user's study at half scale: 18 runs, duplicates, latency, stall, "
        "detection and recovery per setting, the checkpoint advice and the runner's own cost",
    ),
    (
        "`make bench-reset`",
        "teardown, redeploy and purge timings over several days and "
        "strategies, the redeploy's task profile and where its CPU time went",
    ),
    ("`make demo` durations", "the demo's wall time from fresh clones and what each phase took"),
)

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
HEADER = """\
# Figures

<!-- Generated by tools/render_figures.py from bench/results/*.json.
     Do not edit: add or change a result file and run the script. -->

Every figure on this page comes from a file in [bench/results/](../bench/results/), which
carries the date, the commit, the machine and the hosts it was measured on. A bench writes such a
file; the format is [bench-results.md](bench-results.md). A figure without its data is not kept
here.
"""


class ResultError(Exception):
    """A result file that does not follow the format: its name and what is wrong."""


@dataclass(frozen=True)
class Table:
    title: str
    description: str
    columns: list[str]
    rows: list[list[Any]]
    notes: list[str]


@dataclass(frozen=True)
class Result:
    name: str
    bench: str
    date: str
    commit: str
    machine: str
    hosts: list[str]
    tables: list[Table]


def _text(document: dict[str, Any], key: str, where: str, required: bool = True) -> str:
    value = document.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise ResultError(f"{where}: '{key}' must be a non-empty string")
    return value


def _table(document: dict[str, Any], where: str) -> Table:
    columns = document.get("columns")
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
        raise ResultError(f"{where}: 'columns' must be a non-empty list of strings")
    rows = document.get("rows")
    if not isinstance(rows, list):
        raise ResultError(f"{where}: 'rows' must be a list of rows")
    for number, row in enumerate(rows, 1):
        if not isinstance(row, list) or len(row) != len(columns):
            raise ResultError(f"{where}: row {number} must be a list of {len(columns)} cells")
        if any(isinstance(cell, (dict, list)) for cell in row):
            raise ResultError(f"{where}: row {number} holds a cell that is not a plain value")
    notes = document.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise ResultError(f"{where}: 'notes' must be a list of strings")
    return Table(
        title=_text(document, "title", where),
        description=_text(document, "description", where, required=False),
        columns=columns,
        rows=rows,
        notes=notes,
    )


def parse(name: str, document: Any) -> Result:
    """A result file's content, checked against the format."""
    if not isinstance(document, dict):
        raise ResultError(f"{name}: must hold a JSON object")
    bench = _text(document, "bench", name)
    date = _text(document, "date", name)
    if not DATE.match(date):
        raise ResultError(f"{name}: 'date' must be YYYY-MM-DD, got {date!r}")
    commit = _text(document, "commit", name)
    if not COMMIT.match(commit):
        raise ResultError(f"{name}: 'commit' must be 7 to 40 lowercase hex digits")
    hosts = document.get("hosts")
    if isinstance(hosts, str):
        hosts = [hosts]
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
        raise ResultError(f"{name}: 'hosts' must be a non-empty list of strings")
    tables = document.get("tables", [document])
    if not isinstance(tables, list) or not tables:
        raise ResultError(f"{name}: 'tables' must be a non-empty list")
    parsed = []
    for number, table in enumerate(tables, 1):
        if not isinstance(table, dict):
            raise ResultError(f"{name}: every entry of 'tables' must be an object")
        parsed.append(_table(table, name if table is document else f"{name} table {number}"))
    return Result(
        name=name,
        bench=bench,
        date=date,
        commit=commit,
        machine=_text(document, "machine", name),
        hosts=hosts,
        tables=parsed,
    )


def load(repo: Path) -> list[Result]:
    results = []
    for path in sorted((repo / RESULTS).glob("*.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ResultError(f"{path.name}: not JSON ({error})") from error
        results.append(parse(path.name, document))
    return results


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return " ".join(str(value).split()).replace("|", "\\|")


def _render_table(result: Result, table: Table) -> list[str]:
    lines = [f"### {table.title}", ""]
    lines.append(
        f"`{result.bench}`, {result.date}, commit `{result.commit}`; machine: "
        f"{result.machine}; hosts: {', '.join(result.hosts)}. Data: "
        f"[{RESULTS.as_posix()}/{result.name}](../{RESULTS.as_posix()}/{result.name})."
    )
    lines.append("")
    if table.description:
        lines += [" ".join(table.description.split()), ""]
    lines.append("| " + " | ".join(_cell(c) for c in table.columns) + " |")
    lines.append("|" + "---|" * len(table.columns))
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    lines.append("")
    lines += [f"- {' '.join(note.split())}" for note in table.notes]
    if table.notes:
        lines.append("")
    return lines


def render(repo: Path = REPO) -> str:
    results = load(repo)
    out = [HEADER]
    benches = list(BENCHES) + sorted({r.bench for r in results} - set(BENCHES))
    measured = [bench for bench in benches if any(r.bench == bench for r in results)]
    for bench in measured:
        out += [f"## {bench}", ""]
        if bench in BENCHES:
            out += [BENCHES[bench][0].upper() + BENCHES[bench][1:] + ".", ""]
        # Newest first; a file's tables in their order.
        for result in sorted(
            (r for r in results if r.bench == bench), key=lambda r: (r.date, r.name), reverse=True
        ):
            for table in result.tables:
                out += _render_table(result, table)
    awaited = [bench for bench in BENCHES if bench not in measured]
    if awaited:
        out += ["## Awaited", "", "No committed result yet for:", ""]
        out += [f"- `{bench}`: {BENCHES[bench]}." for bench in awaited]
        out.append("")
    out += [
        "## Dropped for want of data",
        "",
        "Figures the README used to quote, whose runs and bench output were not kept (they lived "
        "in the git-ignored `bench/out/` and `results/`). They are not published until a bench "
        "measures them again into `bench/results/`:",
        "",
    ]
    out += [f"- {name}: {what}." for name, what in DROPPED]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is not current")
    args = parser.parse_args(argv)
    try:
        text = render(args.repo)
    except ResultError as error:
        print(f"render_figures: {error}", file=sys.stderr)
        return 2
    page = args.repo / PAGE
    return generated_page.write_or_check(page, text, args.check, Path(__file__).name)


if __name__ == "__main__":
    sys.exit(main())
