#!/usr/bin/env python3
"""The delivery guarantees side by side: each engine under each guarantee it offers, with its
worker process killed mid-run (bench/studies/guarantees-lab.yml, run by `make bench-guarantees`).

Per engine and guarantee, over the study's repetitions (mean (min-max), the same rules as
bench/fault_figures.py: runs flagged overloaded before the fault or whose wall clock moved are
left out of the means, never out of the verdicts and the loss):

- the verdicts (at most once: nothing delivered twice; at least once: nothing acknowledged
  lost; exactly once: both) and the loss, counted in every run;
- the duplicates (replayed seconds per fault: the fault's duplicate records over the input
  rate), which exactly once and at most once must keep at 0;
- what a guarantee costs without a failure: the steady latency p50 / p99 before the fault, all
  at the same input rate;
- the recovery timeline of the fault (detected, engine whole again, first output, caught up,
  recovery), a value the run did not show being a lower bound.

    python bench/guarantee_figures.py --from-results bench/out/studies --runs 'guarantees-lab-*'

Writes bench/out/guarantees/guarantee-figures.json in the format of docs/bench-results.md: copy
it to bench/results/ to publish it. All test hosts share this machine's cores: the figures
describe that lab, not a real cluster.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fault_figures
from fault_figures import FaultRun, figures_of, group_row, markdown, run_row

GUARANTEES = ("at_most_once", "at_least_once", "exactly_once")
AXIS = "guarantee"
# (engine, fault, axis, guarantee, runs) per engine and guarantee.
Table = list[tuple[str, str, str, str, list[FaultRun]]]
# What the issue that asked for this bench set it beside: PGVal (PVLDB 18(3)) compares Flink's
# at-least-once and exactly-once through window outputs.
PGVAL_NOTE = (
    "PGVal (PVLDB 18(3)) reports that exactly-once cost Flink little throughput. This bench "
    "does not measure throughput; it measures steady latency at one input rate, where an "
    "exactly-once result waits for the checkpoint that commits its transaction."
)


def guarantee_of(out: Path) -> str:
    record = json.loads((out / "run.json").read_text())
    return str((record.get("parameters") or {}).get(AXIS) or "at_least_once")


def load(run_dirs: list[Path]) -> Table:
    """(engine, fault, axis, guarantee, runs) per engine and guarantee, in GUARANTEES order."""
    runs = [dataclasses.replace(figures_of(out), setting=guarantee_of(out)) for out in run_dirs]
    table = []
    for engine in sorted({r.engine for r in runs}):
        for guarantee in GUARANTEES:
            chosen = [r for r in runs if (r.engine, r.setting) == (engine, guarantee)]
            if chosen:
                faults = sorted({r.fault for r in chosen})
                table.append((engine, ", ".join(faults), AXIS, guarantee, chosen))
    return table


def description(run_dirs: list[Path], table: Table) -> str:
    records = [json.loads((out / "run.json").read_text()) for out in run_dirs]

    def agreed(key: str, spec: str = "") -> str:
        """The runs' value, or each value they had (a run directory set the bench did not
        make, say)."""
        values = sorted({r["parameters"].get(key) for r in records}, key=str)
        return " or ".join(format(v, spec) if v is not None else "default" for v in values)

    reps = sorted({len(runs) for *_, runs in table})
    return (
        f"{agreed('count', ',')} messages at {agreed('rate', ',.0f')}/s, the worker process killed "
        f"{agreed('fault_at_s')} s in, {agreed('recovery_window_s')} s of producing after the "
        f"fault (recovery_window_s), {'/'.join(map(str, reps))} repetitions per engine and "
        "guarantee. Seconds from the fault's start on the driver clock, mean (min-max) over "
        "the runs neither flagged overloaded before the fault nor with a wall clock that moved; "
        "verdicts and loss over every run."
    )


def result_file(run_dirs: list[Path], table: Table, results: Path) -> dict[str, Any]:
    runs = [run for *_, chosen in table for run in chosen]
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    dirty = bool(fault_figures._git("status", "--porcelain", "--untracked-files=no"))
    return {
        "bench": "make bench-guarantees",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": fault_figures._git("rev-parse", "--short", "HEAD"),
        "machine": f"{os.cpu_count()} cores, {memory_gib:.0f} GiB; the test hosts share them",
        "hosts": fault_figures.hosts_of(results, runs),
        "tables": [
            {
                "title": "Per engine and delivery guarantee, under a worker failure",
                "description": description(run_dirs, table),
                "columns": fault_figures.GROUP_COLUMNS,
                "rows": [group_row(*row) for row in table],  # type: ignore[arg-type]
                "notes": [
                    "A value marked >= is a lower bound: a run ended before it showed it.",
                    "lost counts acknowledged messages never received: at most once allows it, "
                    "the other two do not.",
                    "Exactly once, the results are the committed output: the collector reads "
                    "read_committed.",
                    PGVAL_NOTE,
                    "The test hosts are network namespaces on one machine and share its cores.",
                ]
                + (["The kit's tree was dirty when measured."] if dirty else []),
            },
            {
                "title": "Every run",
                "columns": fault_figures.RUN_COLUMNS,
                "rows": [run_row(run, AXIS) for *_, chosen in table for run in chosen],
            },
            fault_figures.phase_part(results, runs),
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-results", type=Path, required=True, help="the study's results")
    parser.add_argument("--runs", default="guarantees-lab-*", help="which run directories")
    parser.add_argument("--out", type=Path, default=Path("bench/out/guarantees"))
    args = parser.parse_args(argv)
    done = sorted(out.parent for out in args.from_results.glob(f"{args.runs}/summary.json"))
    if not done:
        parser.error(f"no summarised run matches {args.from_results / args.runs}")
    table = load(done)
    document = result_file(done, table, args.from_results)
    for part in document["tables"]:
        print(f"\n{part['title']}\n{markdown(part['columns'], part['rows'])}")
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "guarantee-figures.json"
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {out} (copy it to bench/results/ to publish it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
