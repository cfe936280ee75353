#!/usr/bin/env python3
"""Where a run's time goes, per phase, for two sets of runs side by side (a commit before and
after a change, measured alternately on the same hosts), and the floor of a run.

Reads finished run directories only (run.json `phases`, produced.summary.json); runs nothing.
Writes a result file in the format of docs/bench-results.md:

    bench/phase_compare.py --before 'DIR/cmp-before-*' --after 'DIR/cmp-after-*' \
        --before-commit ecd3fa8 --after-commit HEAD --out bench/out/phases.json

The floor of a run is what no change to the kit's own steps can remove without shortening
something that makes a number right: submitting the job and waiting for every task (phase
submit), the readiness probe (ready), the collector's quiet_s (part of drain) and stopping the
job (stop).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import fault_figures  # noqa: E402

from analysis.study.report import AROUND, phase_medians, producing_s  # noqa: E402

FLOOR_PHASES = ("submit", "ready", "stop")


def run_dirs(pattern: str) -> list[Path]:
    """The run directories a glob names that hold a run.json, sorted; exits when there are none."""
    found = sorted(Path(p) for p in glob.glob(pattern) if (Path(p) / "run.json").is_file())
    if not found:
        sys.exit(f"no run directory with a run.json matches {pattern}")
    return found


def floor_s(run_dir: Path) -> tuple[str, float] | None:
    """(engine, seconds) of the run's floor: submit, ready and stop phases plus its quiet_s."""
    record = json.loads((run_dir / "run.json").read_text())
    lengths = {p["name"]: (p["end_ms"] - p["start_ms"]) / 1000 for p in record.get("phases") or []}
    quiet = (record.get("parameters") or {}).get("quiet_s")
    if quiet is None or any(name not in lengths for name in FLOOR_PHASES):
        return None
    return str(record.get("engine")), sum(lengths[n] for n in FLOOR_PHASES) + float(quiet)


def steps_s(run_dir: Path) -> tuple[str, float] | None:
    """(engine, seconds) around producing less the drain: the drain's length follows the fault's
    recovery, the rest the kit's own steps."""
    record = json.loads((run_dir / "run.json").read_text())
    phases = record.get("phases") or []
    sending = producing_s(run_dir)
    if not phases or sending is None:
        return None
    span = (phases[-1]["end_ms"] - phases[0]["start_ms"]) / 1000
    drain = sum((p["end_ms"] - p["start_ms"]) / 1000 for p in phases if p["name"] == "drain")
    return str(record.get("engine")), span - sending - drain


def median_row(runs: list[Path], engines: list[str], figure: Any) -> list[str]:
    """Per engine, "median (runs)" of figure(run) over the runs it gives a value for."""
    values: dict[str, list[float]] = {}
    for run in runs:
        found = figure(run)
        if found:
            values.setdefault(found[0], []).append(found[1])
    return [
        f"{statistics.median(values[e]):.1f} ({len(values[e])})" if e in values else "–"
        for e in engines
    ]


def side_by_side(before: list[Path], after: list[Path]) -> tuple[list[str], list[list[str]]]:
    """Columns and rows: each phase's median per engine, before then after, and the floor."""
    sides = [phase_medians(before), phase_medians(after)]
    engines = sorted(
        {c.split(":")[0] for columns, _ in sides for c in columns[1:]},
    )
    by_side: list[dict[str, dict[str, str]]] = []
    for columns, rows in sides:
        table: dict[str, dict[str, str]] = {}
        for row in rows:
            for column, cell in zip(columns[1:], row[1:], strict=True):
                table.setdefault(column.split(":")[0], {})[row[0]] = cell
        by_side.append(table)
    names: list[str] = []
    for _, rows in sides:
        names += [row[0] for row in rows if row[0] not in names and row[0] != AROUND]
    columns = ["phase"]
    for engine in engines:
        columns += [f"{engine} before: median s (runs)", f"{engine} after: median s (runs)"]
    rows = []
    for name in [*names, AROUND]:
        row = [name]
        for engine in engines:
            row += [by_side[i].get(engine, {}).get(name, "–") for i in (0, 1)]
        rows.append(row)
    for label, figure in (
        (f"{AROUND}, drain left out", steps_s),
        ("floor: submit + ready + stop + quiet_s", floor_s),
    ):
        cells = [median_row(side, engines, figure) for side in (before, after)]
        rows.append([label] + [cells[i][j] for j in range(len(engines)) for i in (0, 1)])
    return columns, rows


def commit(rev: str) -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=REPO, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="glob of the runs before the change")
    parser.add_argument("--after", required=True, help="glob of the runs after it")
    parser.add_argument("--before-commit", required=True)
    parser.add_argument("--after-commit", default="HEAD")
    parser.add_argument("--description", default="", help="how the runs were made")
    parser.add_argument("--note", action="append", default=[], help="a note under the table")
    parser.add_argument("--out", type=Path, default=Path("bench/out/phases.json"))
    args = parser.parse_args()
    before, after = run_dirs(args.before), run_dirs(args.after)
    columns, rows = side_by_side(before, after)
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    before_commit, after_commit = commit(args.before_commit), commit(args.after_commit)
    document: dict[str, Any] = {
        "bench": "bench/phase_compare.py",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": after_commit,
        "machine": f"{os.cpu_count()} cores, {memory_gib:.0f} GiB; the test hosts share them",
        "hosts": fault_figures.hosts_of(after[0]),
        "title": f"Where a run's time went, per phase: {before_commit} against {after_commit}",
        "description": (
            f"{args.description} From run.json phases (the control node's clock); around "
            "producing is the phases' span less the producer's own sending time. The floor is "
            "what no change to the kit's steps removes: submitting the job until every task "
            "runs, the readiness probe, stopping the job, and the collector's quiet_s."
        ).strip(),
        "columns": columns,
        "rows": rows,
        "notes": args.note,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    widths = [max(len(str(r[i])) for r in [columns, *rows]) for i in range(len(columns))]
    for row in [columns, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    print(f"wrote {args.out} (copy it to bench/results/ to publish it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
