"""The study's report: `compare` over its complete runs into results/<study>/, the checkpoint
interval advice when the spec asks for it, and report.md saying what ran (scale, order seed,
runs that are not complete)."""

from __future__ import annotations

import csv
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis import advise, compare
from analysis.io import InputError, read_optional_json
from analysis.report import NO_RECOVERY, headline, write_atomic, write_json
from analysis.study.capacity import fraction_text
from analysis.study.kit import NOT_RECORDED, run_commits
from analysis.study.plan import Plan
from analysis.study.runner import COMPLETE, SUMMARY, StudyOutcome, load_record

REPORT = "report.md"
ADVICE_JSON = "advice.json"

SummarizeRuns = Callable[[Sequence[Path]], None]

# The terminal's table: each group's mean over its repetitions (comparison.csv `mean` rows).
TABLE_COLUMNS = (
    "group",
    "n",
    "verdict",
    "loss %",
    "replayed s",
    "dup %",
    "p50 ms",
    "p99 ms",
    "recovery s",
)


def _number(
    text: str, scale: float = 1.0, digits: int = 0, unit: str = "", blank: str = "–"
) -> str:
    if text in ("", None):
        return blank
    return f"{float(text) * scale:.{digits}f}{unit}"


def _recovery(row: dict[str, str]) -> str:
    """The group's mean recovery: over observed values and censored bounds (`>= 41.0`, a lower
    bound, with how many were censored) from recovery_bound_s; from recovery_s for a
    comparison.csv written before it. Blank with no counted run or no fault."""
    if not int(row["n"]) or row.get("fault") == "none":
        return _number(row.get("recovery_bound_s", row.get("recovery_s", "")), digits=1)
    bound = row.get("recovery_bound_s")
    if bound is None:  # an older comparison.csv: runs without a recovery were left out
        return _number(row["recovery_s"], digits=1, blank=NO_RECOVERY)
    if bound == "":
        return NO_RECOVERY
    censored = int(float(row.get("recovery_censored") or 0))
    text = _number(bound, digits=1)
    return f">= {text} ({censored} censored)" if censored else text


def comparison_rows(comparison_csv: Path) -> list[tuple[str, ...]]:
    """One row per group (its mean; compare has left overloaded and clock-moved runs out of it),
    in TABLE_COLUMNS order, for the terminal after the study."""
    with comparison_csv.open(encoding="utf-8", newline="") as handle:
        means = [row for row in csv.DictReader(handle) if row.get("kind") == "mean"]
    return [
        (
            row["group"],
            row["n"],
            row.get("verdict") or "–",
            _number(row["loss_rate"], 100, 2),
            _number(row.get("replayed_s", ""), digits=2),
            _number(row["duplicate_rate"], 100, 2),
            _number(row["latency_p50_ms"]),
            _number(row["latency_p99_ms"]),
            _recovery(row),
        )
        for row in means
    ]


def comparison_table(comparison_csv: Path) -> str:
    """comparison_rows under TABLE_COLUMNS, in aligned columns (the group left, numbers right)."""
    rows = [TABLE_COLUMNS, *comparison_rows(comparison_csv)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS))]
    lines = [
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])


class ReportError(Exception):
    """Complete runs, but none the report can compare: what went wrong and what to do."""


def spark_summarize(run_dirs: Sequence[Path]) -> None:
    """Summarise runs that have no summary.json yet, in one local Spark session: every complete
    run of the study (its experiments run with analyze_on=none). A run that cannot be summarised
    is named with its error and left without summary.json; the others go on."""
    from analysis import session, summarize

    print(f"analysing {len(run_dirs)} run(s) in one local Spark application", flush=True)
    try:
        spark = session.build()
    except Exception as error:  # no Java, no memory: every run stays unsummarised
        print(f"cannot start Spark to summarise the runs: {error}", file=sys.stderr)
        return
    try:
        for run_dir in run_dirs:
            try:
                summary = summarize.summarize(spark, run_dir)
            except Exception as error:  # the report leaves the run out and says so
                print(f"cannot summarise {run_dir}: {error}", file=sys.stderr)
                continue
            print(f"{run_dir.name}:\n{headline(summary)}", flush=True)
    finally:
        spark.stop()


def _scale_text(plan: Plan) -> list[str]:
    if plan.scale == 1:
        return ["Scale: 1, the durations as the spec gives them.", ""]
    lines = [
        f"**Scale {plan.scale:g}**: every duration the spec gives was multiplied by "
        f"{plan.scale:g} (whole seconds, at least 1) so the study fits a smaller lab; "
        "its figures describe the shortened runs.",
        "",
        "| setting | spec | ran with |",
        "|---|---|---|",
    ]
    lines += [f"| {value.key} | {value.before:g} | {value.after:g} |" for value in plan.scaled]
    return [*lines, ""]


def rates_run(run_dirs: Iterable[Path]) -> dict[str, set[float]]:
    """engine -> the rates its runs were sent at, as their run.json records them."""
    rates: dict[str, set[float]] = {}
    for run_dir in run_dirs:
        record = read_optional_json(run_dir / "run.json")
        if not isinstance(record, dict):
            continue
        rate = (record.get("parameters") or {}).get("rate")
        if isinstance(rate, int | float):
            rates.setdefault(str(record.get("engine")), set()).add(float(rate))
    return rates


def _load_section(plan: Plan, results_dir: Path, complete: Sequence[str]) -> list[str]:
    """At what fraction of its measured capacity each engine ran (docs/studies.md)."""
    record = load_record(results_dir / plan.study) or {}
    capacity = record.get("capacity") or {}
    rates = rates_run(results_dir / run_id for run_id in complete)
    spec = plan.spec
    lines = ["## Load", ""]
    if spec.capacity is None:
        return [
            *lines,
            "Each engine ran at the spec's rate; its capacity on these hosts was not measured "
            "(give the spec `capacity:` to measure it and report the fraction).",
            "",
        ]
    bound = spec.capacity.p99_bound_ms
    how = (
        f"at {spec.load:g} of each engine's sustainable rate, {spec.produce_s} s of producing per "
        "run"
        if spec.load is not None
        else "at the spec's rate"
    )
    lines += [
        f"The runs sent {how}. Capacity is the highest rate of the search that passed: a "
        f"fault-free run, complete, not flagged overloaded, steady-state p99 under {bound:g} ms "
        f"(at most {spec.capacity.runs} runs from {spec.capacity.from_rate:,.0f}/s, each "
        f"{spec.capacity.warmup_s} s of warm-up and {spec.capacity.steady_s} s of steady state, "
        "with the engine's first setting of the study; the trials are in study.json). With no "
        "rate failed it is a lower bound (≥), and the fraction an upper bound (≤).",
        "",
        "| engine | capacity /s | lowest failing /s | trials | ran at /s | fraction of capacity |",
        "|---|---|---|---|---|---|",
    ]
    for engine in spec.engines:
        entry = capacity.get(engine)
        ran = sorted(rates.get(engine) or ())
        measured = (entry or {}).get("rate")
        failing = (entry or {}).get("lowest_failing")
        prefix = "≥ " if (entry or {}).get("lower_bound") else ""
        lines.append(
            f"| {engine} "
            f"| {prefix + f'{measured:,.0f}' if measured else '–'} "
            f"| {f'{failing:,.0f}' if failing else '–'} "
            f"| {len((entry or {}).get('trials') or [])} "
            f"| {', '.join(f'{r:,.0f}' for r in ran) or '–'} "
            f"| {'; '.join(fraction_text(r, entry) for r in ran) or '–'} |"
        )
    return [*lines, ""]


def _kit_text(results_dir: Path, run_ids: Sequence[str]) -> list[str]:
    """Which kit the complete runs ran with (run.json kit_commit, kit_dirty): a study resumed
    over days may have run parts of it with different commits, which its reader must know."""
    commits, dirty = run_commits(results_dir / run_id for run_id in run_ids)
    if not commits:
        return []
    if set(commits) == {NOT_RECORDED}:
        text = "The complete runs' run.json records no kit commit (kit_commit)."
    elif len(commits) == 1:
        (commit,) = commits
        text = f"All {len(run_ids)} complete runs ran with the kit at commit {commit}."
    else:
        counts = "; ".join(f"{c}: {n} run{'' if n == 1 else 's'}" for c, n in commits.items())
        text = (
            f"The complete runs ran with {len(commits)} commits of the kit ({counts}): a group "
            "whose runs span them also spans what changed between those commits."
        )
    if dirty:
        text += (
            f" {len(dirty)} of them ran with uncommitted changes in the kit's tree "
            f"(run.json kit_dirty): {', '.join(dirty)}."
        )
    return [text, ""]


def kit_change_note(
    results_dir: Path, run_ids: Sequence[str], checkout: tuple[str, bool] | None
) -> str | None:
    """Said before a study resumes when its complete runs ran with another kit commit than this
    checkout's (commit, dirty), or this checkout has uncommitted changes: the runs still to do
    will record this one. None when they agree, or nothing is known."""
    commits, _ = run_commits(results_dir / run_id for run_id in run_ids)
    commits.pop(NOT_RECORDED, None)
    if checkout is None or not commits:
        return None
    head, dirty = checkout[0][:7], checkout[1]
    other = {c: n for c, n in commits.items() if c != head}
    if not other and not dirty:
        return None
    earlier = ", ".join(f"{n} at {c}" for c, n in commits.items())
    state = " with uncommitted changes" if dirty else ""
    advice = (
        f"; to run the rest with {next(iter(other))}, start the study from a worktree of it "
        f"(git worktree add <dir> {next(iter(other))}) with the same --results"
        if len(other) == 1 and head not in commits
        else ""
    )
    return (
        f"this study's complete runs ran with the kit {earlier}; this checkout is at "
        f"{head}{state}, which the runs still to do will record, and the report names every "
        f"commit{advice}"
    )


def _not_complete(plan: Plan, results_dir: Path) -> list[str]:
    record = load_record(results_dir / plan.study) or {}
    rows = []
    for entry in record.get("runs") or []:
        if entry.get("status") == COMPLETE:
            continue
        attempts = entry.get("attempts") or []
        reasons = "; ".join(attempts[-1].get("reasons") or []) if attempts else ""
        status = entry.get("status") if not attempts else attempts[-1].get("status")
        rows.append(f"| {entry['run_id']} | {status} | {len(attempts)} | {reasons or '–'} |")
    if not rows:
        return []
    return [
        "## Runs that are not complete",
        "",
        "Left out of the comparison. Start the study again to repeat them (earlier attempts are "
        "kept in attempts/ and their logs in logs/).",
        "",
        "| run | status | attempts | reasons of the last attempt |",
        "|---|---|---|---|",
        *rows,
        "",
    ]


def attempt_directories(
    results_dir: Path, entry: dict[str, Any]
) -> list[tuple[dict[str, Any], Path | None]]:
    """Each attempt of a run (study.json) with where its result directory is now: an attempt
    followed by another was moved aside before it (the next attempt's `moved_aside`); the last
    attempt's is results/<run id>. None when nothing says (an attempt without a successor's
    record of the move)."""
    attempts = [a for a in entry.get("attempts") or [] if isinstance(a, dict)]
    found: list[tuple[dict[str, Any], Path | None]] = []
    for index, attempt in enumerate(attempts):
        if index + 1 < len(attempts):
            moved = attempts[index + 1].get("moved_aside")
            found.append((attempt, Path(moved) if isinstance(moved, str) and moved else None))
        else:
            found.append((attempt, results_dir / str(entry.get("run_id"))))
    return found


def attempt_loss(run_dir: Path | None, attempt: dict[str, Any] | None = None) -> dict[str, Any]:
    """What is known of one attempt's loss: the verdict of its summary.json (the analysis'
    exact count), else the verdict study.json kept for the attempt (run.json's, from the
    collector's tally), else its run.json's, else the collector's count in first-summary.json
    (`missing` of `acknowledged`); source None when none of them is there."""
    loss: dict[str, Any] = {"lost": None, "acknowledged": None, "holds": None, "source": None}
    kept = (attempt or {}).get("verdict")
    sources: list[tuple[str, Any]] = []
    if run_dir is not None:
        sources.append((SUMMARY, read_optional_json(run_dir / SUMMARY)))
    sources.append(("study.json attempt", {"verdict": kept}))
    if run_dir is not None:
        sources.append(("run.json", read_optional_json(run_dir / "run.json")))
    for name, data in sources:
        verdict = data.get("verdict") if isinstance(data, dict) else None
        if isinstance(verdict, dict) and isinstance(verdict.get("lost"), int):
            produced = data.get("produced") if name == SUMMARY else None
            holds = verdict.get("holds")
            return {
                "lost": verdict["lost"],
                "acknowledged": produced if isinstance(produced, int) else None,
                "holds": holds if isinstance(holds, bool) else None,
                "source": f"{name} verdict",
            }
    if run_dir is None:
        return loss
    first = read_optional_json(run_dir / "first-summary.json")
    if isinstance(first, dict) and isinstance(first.get("missing"), int):
        acknowledged = first.get("acknowledged")
        return {
            "lost": first["missing"],
            "acknowledged": acknowledged if isinstance(acknowledged, int) else None,
            "holds": None,
            "source": "first-summary.json missing",
        }
    return loss


def _loss_section(plan: Plan, results_dir: Path) -> list[str]:
    """Loss over every attempt of the study, those moved aside and repeated included: a
    run that lost acknowledged messages is never hidden by a repetition."""
    record = load_record(results_dir / plan.study) or {}
    rows, attempts, lossy, unknown, total_lost = [], 0, 0, 0, 0
    for entry in record.get("runs") or []:
        for number_, (attempt, run_dir) in enumerate(
            attempt_directories(results_dir, entry), start=1
        ):
            attempts += 1
            loss = attempt_loss(
                run_dir if run_dir is not None and run_dir.is_dir() else None, attempt
            )
            if loss["lost"] is None:
                unknown += 1
            elif loss["lost"] > 0:
                lossy += 1
                total_lost += loss["lost"]
            held = {True: "held", False: "VIOLATED", None: "–"}[loss["holds"]]
            where = "–" if run_dir is None else str(run_dir)
            lost = "–" if loss["lost"] is None else f"{loss['lost']:,}"
            acknowledged = "–" if loss["acknowledged"] is None else f"{loss['acknowledged']:,}"
            rows.append(
                f"| {entry.get('run_id')} | {number_} | {attempt.get('status')} | {lost} | "
                f"{acknowledged} | {held} | {loss['source'] or '–'} | {where} |"
            )
    if not rows:
        return []
    unknown_text = (
        f" For {unknown} the result directory has no verdict nor collector count (it stopped "
        "before recording them, or is gone)."
        if unknown
        else ""
    )
    return [
        "## Loss over every attempt",
        "",
        f"{attempts} attempt(s), those moved aside and repeated included: {lossy} lost "
        f"acknowledged messages, {total_lost:,} in all.{unknown_text} The count is the "
        "analysis' (summary.json) where the attempt was summarised, else the collector's "
        "(run.json's verdict as study.json kept it, or first-summary.json).",
        "",
        "| run | attempt | status | lost | acknowledged | guarantee | from | result directory |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def producing_s(run_dir: Path) -> float | None:
    """How long the producer sent: its summary's first to last send, in seconds."""
    summary = read_optional_json(run_dir / "produced.summary.json")
    try:
        return (int(summary["end_ms"]) - int(summary["start_ms"])) / 1000
    except (ValueError, KeyError, TypeError):  # absent, unreadable or not a summary
        return None


def phase_medians(run_dirs: Sequence[Path]) -> tuple[list[str], list[list[str]]]:
    """Per engine, the median length of each phase of run.json `phases` over the given runs,
    and of the time around producing (the phases' span less the producer's own sending time):
    the table's columns and rows, each cell "median (runs)"; no rows when no run recorded its
    phases."""
    lengths: dict[str, dict[str, list[float]]] = {}
    # Rows in the order runs reach their phases: by the median start, from each run's first.
    offsets: dict[str, list[float]] = {}
    for run_dir in run_dirs:
        record = read_optional_json(run_dir / "run.json") or {}
        phases = [p for p in record.get("phases") or [] if isinstance(p, dict)]
        sending = producing_s(run_dir)
        if not phases or sending is None:
            continue
        engine = lengths.setdefault(str(record.get("engine")), {})
        for phase in phases:
            offsets.setdefault(phase["name"], []).append(phase["start_ms"] - phases[0]["start_ms"])
            engine.setdefault(phase["name"], []).append(
                (phase["end_ms"] - phase["start_ms"]) / 1000
            )
        span = (phases[-1]["end_ms"] - phases[0]["start_ms"]) / 1000
        engine.setdefault(AROUND, []).append(span - sending)
    engines = sorted(lengths)
    columns = ["phase", *(f"{engine}: median s (runs)" for engine in engines)]
    if not lengths:
        return columns, []

    def cell(engine: str, name: str) -> str:
        values = lengths[engine].get(name)
        return f"{statistics.median(values):.1f} ({len(values)})" if values else "–"

    names = [*sorted(offsets, key=lambda name: statistics.median(offsets[name])), AROUND]
    return columns, [[name, *(cell(engine, name) for engine in engines)] for name in names]


def phase_table(run_dirs: Sequence[Path]) -> list[str]:
    """phase_medians as Markdown lines; none when no run recorded its phases."""
    columns, rows = phase_medians(run_dirs)
    if not rows:
        return []
    return [
        "| " + " | ".join(columns) + " |",
        "|---|" + "---|" * (len(columns) - 1),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


# The phase table's last row: a run's phases from first to last, less the producer's sending.
AROUND = "around producing"


def _analysis_text(tried: int, summarised: int, analysis_s: float) -> str:
    if not tried:
        return ""
    return (
        f" After the last run, {tried} run(s) without a summary.json were analysed in one local "
        f"Spark application ({summarised} summarised), in {analysis_s:.0f} s of wall time "
        "besides."
    )


@dataclass(frozen=True)
class StudyTime:
    """What a study cost (study.json attempts, on the control node's monotonic clock) against
    the time its producers sent (each complete run's produced.summary.json)."""

    attempts: int
    wall_s: float
    complete: int  # complete attempts with a producer's summary
    producing_s: float
    around_s: list[float]  # per complete attempt: its wall time less its producing, sorted
    capacity_runs: int
    capacity_wall_s: float
    run_ids: tuple[str, ...]  # the runs of the complete attempts counted, in record order

    @property
    def around_median_s(self) -> float:
        return statistics.median(self.around_s)


def study_time(record: dict[str, Any], results_dir: Path) -> StudyTime | None:
    """The study's time from its record; None before a complete run with a producer's summary."""
    attempts = [a for entry in record.get("runs") or [] for a in entry.get("attempts") or []]
    walls = [float(a["wall_s"]) for a in attempts if isinstance(a.get("wall_s"), int | float)]
    complete = [
        (entry["run_id"], a)
        for entry in record.get("runs") or []
        for a in entry.get("attempts") or []
        if a.get("status") == COMPLETE
    ]
    producing = {run_id: producing_s(results_dir / run_id) for run_id, _ in complete}
    known = [(run_id, float(a["wall_s"]), producing[run_id]) for run_id, a in complete]
    known = [(run_id, wall, sent) for run_id, wall, sent in known if sent is not None]
    if not known or sum(walls) <= 0:
        return None
    trials = [
        float(trial["wall_s"])
        for entry in (record.get("capacity") or {}).values()
        for trial in (entry or {}).get("trials") or []
        if isinstance(trial.get("wall_s"), int | float)
    ]
    return StudyTime(
        attempts=len(walls),
        wall_s=sum(walls),
        complete=len(known),
        producing_s=sum(sent for _, _, sent in known),
        around_s=sorted(wall - sent for _, wall, sent in known),
        capacity_runs=len(trials),
        capacity_wall_s=sum(trials),
        run_ids=tuple(dict.fromkeys(run_id for run_id, _, _ in known)),
    )


def _time_section(
    plan: Plan, results_dir: Path, tried: int, summarised: int, analysis_s: float
) -> list[str]:
    """The study's own cost: the wall time of every attempt (what the runner spent, on the
    control node's monotonic clock) against the time the producers sent, and the one analysis
    of the runs at the end."""
    record = load_record(results_dir / plan.study) or {}
    spent = study_time(record, results_dir)
    if spent is None:
        return []
    return [
        "## Time",
        "",
        f"{spent.attempts} attempt(s) took {spent.wall_s / 60:.1f} min of wall time in all "
        "(each from the playbook's start to its end: checks, topics, job submission, producing, "
        "drain, recording, recovery). The producers sent for "
        f"{spent.producing_s / 60:.1f} min of it ({spent.complete} complete runs), so producing "
        f"was {100 * spent.producing_s / spent.wall_s:.0f} % of the study's time. Per complete "
        f"run, the time around producing was {spent.around_s[0]:.0f} to "
        f"{spent.around_s[-1]:.0f} s (median {spent.around_median_s:.0f} s)."
        f"{_analysis_text(tried, summarised, analysis_s)}"
        f"{_capacity_time(spent)} Not counted: the rest of this report, and for a resumed "
        "study, the time between its starts and the analysis and report of earlier starts.",
        "",
        *_phase_lines([results_dir / run_id for run_id in spent.run_ids]),
    ]


def _capacity_time(spent: StudyTime) -> str:
    """The capacity search's runs, which came before the study's (not in the figures above)."""
    if not spent.capacity_runs:
        return ""
    return (
        f" Before the runs, the capacity search took {spent.capacity_runs} run(s) and "
        f"{spent.capacity_wall_s / 60:.1f} min of wall time."
    )


def _phase_lines(run_dirs: Sequence[Path]) -> list[str]:
    table = phase_table(run_dirs)
    if not table:
        return []
    return [
        "Each complete run's phases (run.json `phases`, the control node's clock; "
        "docs/results.md), median per engine:",
        "",
        *table,
        "",
    ]


def _advice_section(
    plan: Plan, run_dirs: Sequence[Path], study_dir: Path
) -> tuple[list[str], dict[str, Any] | None]:
    spec = plan.spec.advice
    if spec is None or "flink" not in plan.spec.engines:
        return [], None
    max_p99 = spec.max_p99_ms or advise.DEFAULT_MAX_P99_MS
    try:
        advice = advise.advise(run_dirs, spec.mtbf_s, max_p99)
    except InputError as error:
        return ["## Checkpoint interval advice", "", f"No advice: {error}", ""], None
    text = advise.markdown(advice, heading_level=2)
    write_json(study_dir / ADVICE_JSON, advice.as_json())
    return [text, ""], advice.as_json()


def write_report(
    plan: Plan,
    results_dir: Path,
    outcome: StudyOutcome,
    summarize_runs: SummarizeRuns = spark_summarize,
    clock: Callable[[], float] = time.monotonic,
) -> Path | None:
    """compare, advice and report.md into results/<study>/; None when no run is complete.
    Complete runs without summary.json (the study's experiments leave the analysis to it) are
    summarised first, together. ReportError when none of the complete runs could be."""
    study_dir = results_dir / plan.study
    run_dirs = [results_dir / run_id for run_id in outcome.complete]
    if not run_dirs:
        return None
    missing = [run_dir for run_dir in run_dirs if not (run_dir / SUMMARY).is_file()]
    analysis_started = clock()
    if missing:
        summarize_runs(missing)
    analysis_s = clock() - analysis_started
    unsummarised = [run_dir for run_dir in missing if not (run_dir / SUMMARY).is_file()]
    run_dirs = [run_dir for run_dir in run_dirs if run_dir not in unsummarised]
    if not run_dirs:
        raise ReportError(
            f"{len(unsummarised)} complete run(s), none could be summarised (errors above): fix "
            "the cause, or run `python -m analysis summarize` on them, then start the study "
            "again to write its report"
        )
    groups = compare.compare(run_dirs, study_dir)
    comparison = (study_dir / "comparison.md").read_text(encoding="utf-8")
    comparison = comparison.replace("# Comparison", "## Comparison", 1).replace(
        "\n## Plots", "\n### Plots", 1
    )
    advice_lines, _ = _advice_section(plan, run_dirs, study_dir)
    spec = plan.spec
    total = len(plan.runs)
    lines = [
        f"# Study {plan.study}",
        "",
        *([spec.description, ""] if spec.description else []),
        f"Spec: {spec.source}. Engines: {', '.join(spec.engines)}; {spec.repetitions} "
        f"repetition(s) of each combination; {total} runs, in an order shuffled with seed "
        f"{plan.order_seed} (study.json).",
        "",
        *_scale_text(plan),
        *_load_section(plan, results_dir, outcome.complete),
        f"Complete: {len(outcome.complete)} of {total} runs"
        + ("." if outcome.finished else " (the comparison covers those)."),
        "",
        *_kit_text(results_dir, outcome.complete),
        *_not_complete(plan, results_dir),
        *_loss_section(plan, results_dir),
        *(
            [
                "Complete but left out, as `python -m analysis summarize` could not summarise "
                "them (see its error): " + ", ".join(run_dir.name for run_dir in unsummarised),
                "",
            ]
            if unsummarised
            else []
        ),
        comparison,
        *advice_lines,
        *_time_section(
            plan, results_dir, len(missing), len(missing) - len(unsummarised), analysis_s
        ),
        compare.findings(groups),
    ]
    path = study_dir / REPORT
    write_atomic(path, "\n".join(lines).rstrip() + "\n")
    return path
