"""A run's overhead for the study's estimate: from the study's own finished runs, else from the
phases of earlier runs in the same results directory, else the kit's fixed model."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis.io import read_optional_json
from analysis.study.kit import Kit, KitError, current
from analysis.study.plan import (
    RUN_OVERHEAD_S,
    Plan,
    PlannedRun,
    estimated_s,
)

# The earlier runs' phases are the estimate only when this many of an engine's runs have them:
# one run is often a first one, which built the job and fetched what later runs have cached.
MIN_EARLIER_RUNS = 2


@dataclass(frozen=True)
class Overhead:
    """A run's time beyond producing, the commit wait and the quiet period, and where it was
    taken from (said by the dry run)."""

    seconds: float
    source: str


def phase_overhead_s(run_dir: Path) -> tuple[str, bool, float] | None:
    """(engine, whether it had a fault, overhead) of one recorded run: the span of its run.json
    phases less what estimated_s adds itself for the run's parameters (the nominal producing
    time, ceil(count / rate), the commit wait and the quiet period), so that a producer that
    fell behind its rate counts in the overhead as it does in a study's own runs; None for a
    run without phases."""
    record = read_optional_json(run_dir / "run.json")
    if not isinstance(record, dict):
        return None
    phases = [p for p in record.get("phases") or [] if isinstance(p, dict)]
    parameters = record.get("parameters") or {}
    try:
        span_s = (int(phases[-1]["end_ms"]) - int(phases[0]["start_ms"])) / 1000
        sending_s = math.ceil(float(parameters["count"]) / float(parameters["rate"]))
        engine = str(record["engine"])
        roles = record.get("setting_roles")
        commit = (
            roles.get("commits_offsets")
            if isinstance(roles, dict) and roles.get("commits_offsets")
            else kit_commits_offsets(engine)
        )
        waits_s = float(parameters.get(commit) or 0 if commit else 0) + float(
            parameters.get("quiet_s") or 0
        )
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    faulted = str(record.get("fault") or "none") != "none"
    return engine, faulted, max(0.0, span_s - sending_s - waits_s)


def kit_commits_offsets(engine: str) -> str | None:
    """For a run recorded before run.json named it: the setting the checkout's manifest marks
    commits_offsets, None where there is no checkout to read."""
    try:
        return current().commits_offsets.get(engine)
    except KitError:
        return None


def earlier_overheads(results_dir: Path) -> dict[tuple[str, bool], list[float]]:
    """Every complete run's phase overhead under results_dir, per engine and fault or not."""
    found: dict[tuple[str, bool], list[float]] = {}
    for record_path in sorted(results_dir.glob("*/run.json")):
        record = read_optional_json(record_path)
        if not isinstance(record, dict) or record.get("status") != "complete":
            continue
        measured = phase_overhead_s(record_path.parent)
        if measured is not None:
            engine, faulted, seconds = measured
            found.setdefault((engine, faulted), []).append(seconds)
    return found


def overhead_for(
    run: PlannedRun,
    plan: Plan,
    kit: Kit,
    walls: Mapping[str, float],
    earlier: Mapping[tuple[str, bool], Sequence[float]],
) -> Overhead:
    """The run's overhead, from the best evidence there is: the mean of this study's finished
    runs of the same engine (their wall time beyond the estimate without overhead); else the
    median phase overhead of earlier runs in the results directory, same engine and fault or
    not, then same engine; else the mean of this study's finished runs of any engine; else the
    fixed model."""
    beyond = {
        other.run_id: wall - estimated_s(other, kit, overhead_s=0)
        for other in plan.runs
        if (wall := walls.get(other.run_id)) is not None
    }
    same = [v for k, v in beyond.items() if _engine(plan, k) == run.engine]
    if same:
        return Overhead(
            max(0.0, statistics.mean(same)),
            f"this study's {len(same)} finished {run.engine} run(s)",
        )
    faulted = run.fault != "none"
    kind = "fault" if faulted else "fault-free"
    same_kind = list(earlier.get((run.engine, faulted)) or [])
    either_kind = same_kind + list(earlier.get((run.engine, not faulted)) or [])
    for values, words in ((same_kind, f"{kind} {run.engine}"), (either_kind, run.engine)):
        if len(values) >= MIN_EARLIER_RUNS:
            return Overhead(
                statistics.median(values),
                f"median of {len(values)} earlier {words} runs' phases in the results directory",
            )
    if beyond:
        return Overhead(
            max(0.0, statistics.mean(beyond.values())),
            f"this study's {len(beyond)} finished run(s) of other engines",
        )
    return Overhead(RUN_OVERHEAD_S, "the kit's fixed model (no earlier run to measure)")


def _engine(plan: Plan, run_id: str) -> str | None:
    return next((r.engine for r in plan.runs if r.run_id == run_id), None)
