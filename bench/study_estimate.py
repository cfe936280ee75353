"""How well `streamlab-study --dry-run` foresees a study's wall time: each spec given, in turn,
into one results directory, is dry-run (its estimate and what each engine's overhead was taken
from), then run, and timed from the study process's start to its end on this machine's clock.
A later spec's estimate may use the earlier ones' runs (their run.json phases), as a user's
second study would. Writes one result file (docs/bench-results.md)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from fault_figures import commit_of, header_of  # noqa: E402

BENCH = "bench/study_estimate.py"

# The dry run's last line: "to run: 6 of 6, estimated 12m 05s with the analysis ..." (the
# durations as analysis.study.progress.duration_text writes them).
ESTIMATED = re.compile(r"^to run: (\d+) of (\d+), estimated (.+?) with the analysis", re.M)
SOURCES = re.compile(r"^overhead taken from (.+)$", re.M)
DURATION = re.compile(r"^(?:(\d+)h (\d+)m|(\d+)m (\d+)s|(\d+)s)$")


def duration_s(text: str) -> int:
    """Seconds from duration_text's '1h 05m', '12m 05s' or '45s'."""
    found = DURATION.match(text.strip())
    if not found:
        raise ValueError(f"not a duration the dry run writes: {text!r}")
    hours, minutes, m_only, s_only, seconds = (int(g) if g else 0 for g in found.groups())
    return hours * 3600 + minutes * 60 + m_only * 60 + s_only + seconds


def read_dry_run(output: str) -> tuple[int, int, str]:
    """(runs to do, estimated seconds, where the overhead came from) from a dry run's output."""
    estimated = ESTIMATED.search(output)
    if not estimated:
        raise ValueError(f"the dry run printed no estimate:\n{output[-2000:]}")
    sources = SOURCES.search(output)
    return (
        int(estimated.group(1)),
        duration_s(estimated.group(3)),
        sources.group(1) if sources else "not said",
    )


def producing_s(record: dict[str, Any]) -> float:
    """The study's nominal producing time: count / rate summed over its runs, as study.json
    records their parameters (a load study's rates included)."""
    return sum(
        float(run["parameters"]["count"]) / float(run["parameters"]["rate"])
        for run in record["runs"]
    )


def study_command(spec: Path, inventory: str, results: Path, *extra: str) -> list[str]:
    return [
        *(sys.executable, "-m", "analysis.study", str(spec)),
        *("-i", inventory, "--results", str(results), *extra),
    ]


def measure(spec: Path, inventory: str, results: Path) -> dict[str, Any]:
    """Dry-run the spec, run it, and return what was foreseen against what it took."""
    dry = subprocess.run(
        study_command(spec, inventory, results, "--dry-run"),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if dry.returncode != 0:
        raise SystemExit(f"{spec}: the dry run failed:\n{dry.stdout}{dry.stderr}")
    _, estimate_s, source = read_dry_run(dry.stdout)
    started = time.monotonic()
    done = subprocess.run(study_command(spec, inventory, results), cwd=REPO, check=False)
    wall_s = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{spec}: the study failed (exit {done.returncode}); not recorded")
    record = json.loads((results / spec.stem / "study.json").read_text())
    complete = [run for run in record["runs"] if run.get("status") == "complete"]
    attempts = sum(len(run.get("attempts") or []) for run in record["runs"])
    return {
        "spec": spec.relative_to(REPO).as_posix() if spec.is_relative_to(REPO) else str(spec),
        "runs": len(record["runs"]),
        "attempts": attempts,
        "complete": len(complete),
        "producing_s": producing_s(record),
        "estimate_s": estimate_s,
        "wall_s": round(wall_s, 1),
        "source": source,
        "run_dirs": [str(results / run["run_id"]) for run in complete],
    }


def result(measured: Sequence[dict[str, Any]], results: Path) -> dict[str, Any]:
    run_dirs = [Path(d) for m in measured for d in m["run_dirs"]]
    rows = [
        [
            m["spec"],
            m["runs"],
            m["attempts"],
            round(m["producing_s"]),
            m["estimate_s"],
            round(m["wall_s"]),
            round(100 * (m["estimate_s"] - m["wall_s"]) / m["wall_s"], 1),
            m["source"],
        ]
        for m in measured
    ]
    commit, dirty = commit_of(run_dirs)
    notes = [
        "Studies run in the order of the rows, into one results directory that held no run "
        "before the first: a later study's dry run may take its overhead from the earlier "
        "studies' runs (their run.json phases), as a user's next study would.",
        "Measured: the study process from its start to its exit, the analysis after the last "
        "run included, on this machine's monotonic clock.",
    ]
    if dirty:
        notes.append("Some runs were made with uncommitted changes to the kit.")
    return {
        **header_of(BENCH, run_dirs),
        "commit": commit,
        "tables": [
            {
                "title": "The dry run's estimate against the study's measured wall time",
                "description": (
                    "Each study dry-run (`streamlab-study --dry-run`), then run, on the test "
                    "hosts. Error: (estimate - measured) / measured."
                ),
                "columns": [
                    "study",
                    "runs",
                    "attempts",
                    "producing s",
                    "estimate s",
                    "measured s",
                    "error %",
                    "each engine's overhead taken from",
                ],
                "rows": rows,
                "notes": notes,
            }
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("specs", nargs="+", type=Path, help="study specs, run in this order")
    parser.add_argument("-i", "--inventory", default="inventory/lab/hosts.yml")
    parser.add_argument("--results", type=Path, default=REPO / "bench/out/estimate-studies")
    parser.add_argument("--out", type=Path, default=REPO / "bench/out/study-estimate.json")
    args = parser.parse_args(argv)
    if args.results.exists() and any(args.results.iterdir()):
        parser.error(
            f"{args.results} is not empty: the first study's estimate must not see earlier runs "
            "(give another --results, or remove it)"
        )
    specs = [spec.resolve() for spec in args.specs]
    for spec in specs:
        if not spec.is_file():
            parser.error(f"{spec}: no such study spec")
    measured = [measure(spec, args.inventory, args.results) for spec in specs]
    data = result(measured, args.results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    for row in data["tables"][0]["rows"]:
        print(f"{row[0]}: estimate {row[4]} s, measured {row[5]} s, error {row[6]} % ({row[7]})")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
