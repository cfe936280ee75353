#!/usr/bin/env python3
"""How well `streamlab-study --dry-run` foresees a study's wall time.

    bench/study_estimate.py SPEC.yml [SPEC.yml ...] [-i INVENTORY] [--results DIR]
    bench/study_estimate.py SPEC.yml [SPEC.yml ...] --append      # run only the new specs
    bench/study_estimate.py SPEC.yml [SPEC.yml ...] --from-results  # the table again

Each spec, in turn, into one results directory that held no run before the first: dry-run (its
estimate and where each engine's overhead was taken from), then run, timed from the study
process's start to its exit on this machine's monotonic clock. A later spec's estimate may use
the earlier ones' runs (their run.json phases), as a user's next study would; each spec is also
dry-run against an empty results directory, which gives the kit's fixed model, so the two can be
set side by side. What each start measured is kept in <study>/estimate.json beside study.json;
--append adds studies after those a directory already holds, and the table lists every spec given.
Writes one result file (docs/bench-results.md)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from fault_figures import header_of  # noqa: E402

from analysis.io import read_optional_json  # noqa: E402
from analysis.study.kit import Kit, recorded_commit, run_commits  # noqa: E402
from analysis.study.plan import PlannedRun, produce_s  # noqa: E402
from analysis.study.report import phase_medians  # noqa: E402
from analysis.study.spec import load as load_spec  # noqa: E402

BENCH = "bench/study_estimate.py"
MEASURED = "estimate.json"

# What analysis.study's dry run prints: its first line names the study, its last gives the
# estimate (durations as analysis.study.progress.duration_text writes them).
STUDY = re.compile(r"^study (\S+) \(", re.M)
# analysis.study.report's Time section: the analysis after the last run, in seconds.
ANALYSIS = re.compile(r"analysed in one local Spark application \(\d+ summarised\), in (\d+) s ")
ESTIMATED = re.compile(r"^to run: \d+ of \d+, estimated (.+?) with the analysis", re.M)
SOURCES = re.compile(r"^overhead taken from (.+)$", re.M)
DURATION = re.compile(r"^(?:(?P<h>\d+)h (?P<hm>\d+)m|(?P<m>\d+)m (?P<ms>\d+)s|(?P<s>\d+)s)$")


def duration_s(text: str) -> int:
    """Seconds from duration_text's '1h 05m', '12m 05s' or '45s'."""
    found = DURATION.match(text.strip())
    if not found:
        raise ValueError(f"not a duration the dry run writes: {text!r}")
    part = {k: int(v) if v else 0 for k, v in found.groupdict().items()}
    return part["h"] * 3600 + (part["hm"] + part["m"]) * 60 + part["ms"] + part["s"]


def read_dry_run(output: str) -> tuple[str, int, str]:
    """(study name, estimated seconds, where the overhead came from) from a dry run's output."""
    study, estimated = STUDY.search(output), ESTIMATED.search(output)
    if not study or not estimated:
        raise ValueError(f"the dry run printed no study or no estimate:\n{output[-2000:]}")
    sources = SOURCES.search(output)
    return study.group(1), duration_s(estimated.group(1)), sources.group(1) if sources else ""


def nominal_producing_s(record: dict[str, Any], kit: Kit) -> int:
    """What the estimate counts as producing: plan.produce_s of each recorded run, plus each
    capacity trial's warm-up and steady seconds."""
    total = sum(
        produce_s(
            PlannedRun(
                run["run_id"], run["engine"], run["fault"], run["parameters"], run["repetition"]
            ),
            kit,
        )
        for run in record["runs"]
    )
    for entry in (record.get("capacity") or {}).values():
        if not isinstance(entry, dict):
            continue
        spec = entry.get("capacity_spec") or {}
        trial_s = int(spec.get("warmup_s") or 0) + int(spec.get("steady_s") or 0)
        total += trial_s * len(entry.get("trials") or [])
    return total


def earlier_runs(results: Path, record: dict[str, Any]) -> int:
    """Complete runs in the results directory that ended before the study's first run started:
    the runs its dry run could take its overhead from (analysis.study.estimate)."""
    own = {run["run_id"] for run in record["runs"]}
    starts = [
        int(found["start_ms"])
        for run_id in own
        if isinstance(found := read_optional_json(results / run_id / "run.json"), dict)
        and found.get("start_ms") is not None
    ]
    if not starts:
        return 0
    count = 0
    for path in results.glob("*/run.json"):
        found = read_optional_json(path)
        if (
            path.parent.name not in own
            and isinstance(found, dict)
            and found.get("status") == "complete"
            and found.get("end_ms") is not None
            and int(found["end_ms"]) < min(starts)
        ):
            count += 1
    return count


def dry_run(spec: Path, inventory: str, results: Path) -> tuple[str, int, str]:
    done = subprocess.run(
        [*study_command(spec, inventory, results), "--dry-run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{spec}: the dry run failed:\n{done.stdout}{done.stderr}")
    return read_dry_run(done.stdout)


def study_command(spec: Path, inventory: str, results: Path) -> list[str]:
    return [
        *(sys.executable, "-m", "analysis.study", str(spec)),
        *("-i", inventory, "--results", str(results)),
    ]


def measure(spec: Path, inventory: str, results: Path) -> None:
    """Dry-run the spec, run it, time it, and keep what was measured beside its study.json."""
    study, estimate_s, source = dry_run(spec, inventory, results)
    fixed_s = fixed_model_s(spec, inventory)
    started = time.monotonic()
    done = subprocess.run(study_command(spec, inventory, results), cwd=REPO, check=False)
    wall_s = round(time.monotonic() - started, 1)
    if done.returncode != 0:
        raise SystemExit(f"{spec}: the study failed (exit {done.returncode}); not recorded")
    measured = {"estimate_s": estimate_s, "source": source, "fixed_s": fixed_s, "wall_s": wall_s}
    (results / study / MEASURED).write_text(json.dumps(measured, indent=2) + "\n")


def fixed_model_s(spec: Path, inventory: str) -> int:
    """The kit's fixed-model estimate of the spec: its dry run against an empty directory."""
    with tempfile.TemporaryDirectory() as empty:
        return dry_run(spec, inventory, Path(empty))[1]


def row_of(spec: Path, results: Path, kit: Kit) -> tuple[list[Any], list[Path]]:
    """A table row from what a start measured (its estimate.json) and its study.json: both
    estimates are the kit's as it was when the study was measured, never a later kit's."""
    study = load_spec(spec, kit).name  # the bench runs no study at another --scale
    measured = json.loads((results / study / MEASURED).read_text())
    if "fixed_s" not in measured:
        raise SystemExit(
            f"{results / study / MEASURED} keeps no fixed-model estimate (fixed_s): a start "
            "of an older bench; measure the study again"
        )
    fixed_s = measured["fixed_s"]
    record = json.loads((results / study / "study.json").read_text())
    complete = [run["run_id"] for run in record["runs"] if run.get("status") == "complete"]
    wall_s = round(measured["wall_s"])
    run_dirs = [results / run_id for run_id in complete]
    row = [
        spec.relative_to(REPO).as_posix() if spec.is_relative_to(REPO) else str(spec),
        len(record["runs"]),
        sum(len(run.get("attempts") or []) for run in record["runs"]),
        earlier_runs(results, record),
        nominal_producing_s(record, kit),
        analysis_s(results / study),
        wall_s,
        measured["estimate_s"],
        error_percent(measured["estimate_s"], wall_s),
        measured["source"] or "not said",
        fixed_s,
        error_percent(fixed_s, wall_s),
        commits_text(run_dirs),
    ]
    return row, run_dirs


def analysis_s(study_dir: Path) -> int | None:
    """The analysis after the study's last run, as its report gives it; None where it says none."""
    report = study_dir / "report.md"
    found = ANALYSIS.search(report.read_text()) if report.is_file() else None
    return int(found.group(1)) if found else None


def first_start_ms(results: Path, run_dirs: list[Path]) -> int:
    """When the study's first run started (run.json start_ms); the rows are in this order."""
    starts = [
        int(found["start_ms"])
        for run_dir in run_dirs
        if isinstance(found := read_optional_json(run_dir / "run.json"), dict)
        and found.get("start_ms") is not None
    ]
    return min(starts, default=0)


def commits_text(run_dirs: list[Path]) -> str:
    """The kit commits a study's runs recorded, each marked when a run had uncommitted changes."""
    found: dict[str, bool] = {}
    for run_dir in run_dirs:
        record = json.loads((run_dir / "run.json").read_text())
        commit = recorded_commit(record)
        found[commit] = found.get(commit, False) or bool(record.get("kit_dirty"))
    return ", ".join(f"{c}{' (dirty tree)' if dirty else ''}" for c, dirty in sorted(found.items()))


def error_percent(estimate_s: float, wall_s: float) -> float:
    return round(100 * (estimate_s - wall_s) / wall_s, 1)


def where_of(inventory: str) -> str:
    """The hosts an inventory names, in the words of the result's description."""
    given = Path(inventory)
    # The studies run from the repository, so a relative inventory is the repository's.
    path = (given if given.is_absolute() else REPO / given).resolve()
    if path.is_relative_to(REPO / "inventory" / "local"):
        return "the embedded default (every component on this one machine)"
    if path.is_relative_to(REPO / "inventory" / "lab"):
        return "the test hosts"
    return f"the hosts of {inventory}"


def result(rows: Sequence[list[Any]], run_dirs: list[Path], where: str) -> dict[str, Any]:
    first_alone = bool(rows) and rows[0][3] == 0
    notes = [
        "Rows in the order the studies ran, into one results directory"
        + (", which held no run before the first" if first_alone else "")
        + ": a later study's dry run may take its overhead from the earlier studies' runs "
        "(their run.json phases), as a user's next study would. Earlier runs: the complete "
        "runs there, of any engine, that ended before the study's first run started (the "
        "estimate uses an engine's when 2 or more of its runs recorded phases).",
        "Measured: the study process from its start to its exit, the analysis after the last "
        "run included, on this machine's monotonic clock. Each estimate includes the analysis "
        "too. Producing: ceil(count / rate) per run, as the estimate counts it.",
        "Fixed model: the same spec dry-run against an empty results directory (115 s of "
        "overhead per run, the kit's fallback when it has no run to measure).",
    ]
    commits, dirty = run_commits(run_dirs)
    if len(commits) > 1:
        notes.append(
            "The runs ran at several kit commits (the last column); the header's is the "
            "checkout's that built the table."
        )
    if dirty:
        notes.append(f"{len(dirty)} run(s) ran with uncommitted changes: see the last column.")
    header = header_of(BENCH, run_dirs)
    if where != "the test hosts":
        header["machine"] = header["machine"].replace("; the test hosts share them", "")
    phase_columns, phase_rows = phase_medians(run_dirs)
    faulted = sum(
        1
        for run_dir in run_dirs
        if str(json.loads((run_dir / "run.json").read_text()).get("fault") or "none") != "none"
    )
    tables = [
        {
            "title": "The dry run's estimate against the study's measured wall time",
            "description": (
                "Each study dry-run (`streamlab-study --dry-run`), then run and timed, on "
                f"{where}. Error: (estimate - measured) / measured."
            ),
            "columns": [
                "study",
                "runs",
                "attempts",
                "earlier runs",
                "producing s",
                "analysis s",
                "measured s",
                "estimate s",
                "error %",
                "each engine's overhead taken from",
                "fixed-model estimate s",
                "fixed-model error %",
                "runs' kit commit",
            ],
            "rows": list(rows),
            "notes": notes,
        },
    ]
    if phase_rows:
        with_fault = (
            f", {faulted} of them with a fault (fault_setup is theirs alone, and a fault's "
            "replays can lengthen their drain)"
            if faulted
            else ", none with a fault"
        )
        tables.append(
            {
                "title": "Where the studies' runs spent their time: each phase's median",
                "description": (
                    "Over every complete run of the studies above, per engine: each phase of "
                    "run.json `phases` (the control node's clock), and around producing, a run's "
                    "phases from first to last less its producer's own sending time."
                ),
                "columns": phase_columns,
                "rows": phase_rows,
                "notes": [f"{len(run_dirs)} run{'s' if len(run_dirs) != 1 else ''}{with_fault}."],
            }
        )
    return {**header, "tables": tables}


def to_measure(
    specs: Sequence[Path],
    inventory: str,
    results: Path,
    append: bool,
    parser: argparse.ArgumentParser,
) -> list[Path]:
    """The specs to run, in order; refuses a results directory the table could not trust."""
    if not results.exists() or not any(results.iterdir()):
        return list(specs)
    if not append:
        parser.error(
            f"{results} is not empty: the first study's estimate must not see earlier runs "
            "(give another --results, remove it, or --append to add studies after its own)"
        )
    todo = []
    for spec in specs:
        study, _, _ = dry_run(spec, inventory, results)
        if (results / study / MEASURED).is_file():
            continue
        if (results / study).exists():
            parser.error(
                f"{results / study} holds a start of {spec.name} that this bench did not "
                "finish: its wall time is unknown (remove that directory and its runs)"
            )
        todo.append(spec)
    return todo


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("specs", nargs="+", type=Path, help="study specs, run in this order")
    parser.add_argument("-i", "--inventory", default="inventory/lab/hosts.yml")
    parser.add_argument("--results", type=Path, default=REPO / "bench/out/estimate-studies")
    parser.add_argument(
        "--from-results",
        action="store_true",
        help="run nothing: the table from what earlier starts kept in --results",
    )
    parser.add_argument(
        "--append",
        action="store_true",
        help="--results may hold earlier starts: run only the specs it has no measurement of",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench/out/study-estimate.json")
    args = parser.parse_args(argv)
    results = args.results.resolve()
    specs = [spec.resolve() for spec in args.specs]
    for spec in specs:
        if not spec.is_file():
            parser.error(f"{spec}: no such study spec")
    if not args.from_results:
        for spec in to_measure(specs, args.inventory, results, args.append, parser):
            measure(spec, args.inventory, results)
    kit = Kit.load()
    built = sorted(
        (row_of(spec, results, kit) for spec in specs),
        key=lambda built: first_start_ms(results, built[1]),
    )
    rows = [row for row, _ in built]
    run_dirs = [run_dir for _, dirs in built for run_dir in dirs]
    data = result(rows, run_dirs, where_of(args.inventory))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    for row in rows:
        print(
            f"{row[0]}: measured {row[6]} s; estimate {row[7]} s ({row[8]:+} %), "
            f"fixed model {row[10]} s ({row[11]:+} %)"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
