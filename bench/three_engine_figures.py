#!/usr/bin/env python3
"""Flink, Storm and Spark side by side under a worker failure (studies/three-engines.yml, run by
`make bench-three-engines`), set beside OSPBench's worker-failure figures.

Per engine, over the study's repetitions (mean (min-max), the rules of bench/fault_figures.py:
runs flagged overloaded before the fault or whose wall clock moved are left out of the means,
never out of the verdicts and the loss): the verdicts and loss, the duplicates (replayed seconds
per fault), the steady latency before and after the fault, and the recovery timeline of the fault,
a value the run did not show being a lower bound. Beside them, each engine's failure-detection
and replay bounds as its runs recorded them (run.json settings), which is what the notes compare
the timeline with.

    python bench/three_engine_figures.py --from-results bench/out/studies --runs 'three-engines-*'

Writes bench/out/three-engines/three-engine-figures.json in the format of docs/bench-results.md:
copy it to bench/results/ to publish it. All test hosts share this machine's cores: the figures
describe that lab, not a real cluster.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fault_figures
from fault_figures import FaultRun, figures_of, group_row, replay_bound_of, run_row

# OSPBench's fault-recovery study (van Dongen and Van den Poel, "A Performance Analysis of Fault
# Recovery in Stream Processing Frameworks", IEEE Access 9, 2021), worker failure: the recovery
# time each framework needed.
OSPBENCH = {
    "flink": (53, 58),
    "spark": (20, 22),
}
OSPBENCH_NOTE = (
    "OSPBench (van Dongen and Van den Poel, IEEE Access 9, 2021) measured the time to recover "
    "from a worker failure: "
    "Structured Streaming 20 to 22 s, Flink 53 to 58 s, Storm not measured. Its clusters, "
    "workloads and its own definition of recovery differ from this bench's (docs/metrics.md): "
    "set the figures side by side, not as a replication."
)
# The settings of each engine, as run.json records them, that bound when a lost worker is
# noticed and how much input is replayed (docs/engines.md, failure detection and replay bound).
BOUNDS = {
    "flink": (
        "heartbeat_timeout",
        "heartbeat_interval",
        "checkpoint_interval_ms",
        "restart_delay_ms",
    ),
    "storm": ("supervisor_worker_timeout_s", "nimbus_task_timeout_s", "message_timeout_s"),
    "spark": (
        "network_timeout",
        "executor_heartbeat_interval",
        "worker_timeout_s",
        "trigger_interval_ms",
        "restart_delay_ms",
    ),
}
# (engine, fault, knob, setting, runs) per engine.
Table = list[tuple[str, str, str, int, list[FaultRun]]]


def load(results: Path, run_dirs: list[Path]) -> Table:
    runs = [figures_of(out) for out in run_dirs]
    table: Table = []
    for engine in sorted({r.engine for r in runs}):
        chosen = [r for r in runs if r.engine == engine]
        record = json.loads((results / chosen[0].run_id / "run.json").read_text())
        knob = replay_bound_of(record)
        for setting in sorted({r.setting for r in chosen}):
            same = [r for r in chosen if r.setting == setting]
            table.append((engine, ", ".join(sorted({r.fault for r in same})), knob, setting, same))
    return table


def settings_of(results: Path, run: FaultRun) -> dict[str, Any]:
    return json.loads((results / run.run_id / "run.json").read_text()).get("settings") or {}


def bounds_row(results: Path, engine: str, runs: list[FaultRun]) -> list[Any]:
    """The engine's detection and replay settings as its runs recorded them (one value when the
    runs agree, each value otherwise), with the security each run's traffic had."""
    recorded = [settings_of(results, run) for run in runs]

    def agreed(key: str, missing: str = "not recorded") -> str:
        values = sorted({str(s.get(key, missing)) for s in recorded})
        return " or ".join(values)

    names = BOUNDS.get(engine, ())
    return [
        engine,
        "; ".join(f"{name} {agreed(name)}" for name in names),
        agreed("kafka.security_protocol"),
        # Only Flink's jobs record it: the kit gives the other engines no TLS of their own.
        agreed("tls_internal", "none"),
        agreed("source_tasks"),
        agreed("sink.linger_ms"),
    ]


def restarts_after_fault(results: Path, run: FaultRun) -> int | None:
    """How often the engine restarted its job (Flink) or query (Spark) from the fault to the
    run's end, from its timeline's `restarts`; None when the timeline does not record it."""
    out = results / run.run_id
    try:
        fault = json.loads((out / "summary.json").read_text())["faults"][0]["start_ms"]
        lines = (out / "engine" / "timeline.jsonl").read_text().splitlines()
    except (OSError, ValueError, KeyError, IndexError):
        return None
    counts = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:  # a line cut when the run stopped
            continue
        if isinstance(entry, dict) and isinstance(entry.get("restarts"), int):
            counts.append((entry.get("t_ms", 0), entry["restarts"]))
    before = [n for t, n in counts if t < fault]
    after = [n for t, n in counts if t >= fault]
    if not after:
        return None
    return max(after) - (before[-1] if before else min(after))


# The driver's log lines (Spark's TaskSchedulerImpl and TaskSetManager) for a lost executor and
# for each task that was running on it.
LOST_EXECUTOR = re.compile(r"Lost executor \S+ on \S+: (.*)$")
LOST_TASK = re.compile(r"TaskSetManager: Lost task .*ExecutorLostFailure")


def spark_losses(results: Path, run: FaultRun) -> tuple[list[str], int] | None:
    """The reasons the driver logged for each executor it lost, and how many tasks were lost
    with them (engine/spark-driver.log); None without the log."""
    try:
        text = (results / run.run_id / "engine" / "spark-driver.log").read_text(errors="replace")
    except OSError:
        return None
    lines = text.splitlines()
    reasons = [m.group(1).strip() for m in map(LOST_EXECUTOR.search, lines) if m]
    return reasons, sum(1 for line in lines if LOST_TASK.search(line))


def latency_finding(table: Table, batches: Callable[[FaultRun], Any] | None) -> list[str]:
    """Each engine's steady p50 before the fault; Spark's set against its own batches (a record
    waits for the next batch to start, half a batch on average, then for at most its whole batch:
    above half a median batch, at most one and a half), the others said to be unexplained."""
    notes = []
    p50 = {engine: _mean([r.before_p50 for r in runs if r.counted]) for engine, *_, runs in table}
    known = {engine: value for engine, value in p50.items() if value is not None}
    if len(known) < 2:
        return notes
    listed = ", ".join(f"{engine.capitalize()} {value:,.0f} ms" for engine, value in known.items())
    others = [engine.capitalize() + "'s" for engine in known if engine != "spark"]
    notes.append(
        f"Steady p50 before the fault: {listed}, at the same input rate."
        + (
            f" Where {' and '.join(others)} time goes the runs did not sample: "
            + ("their difference is" if len(others) > 1 else "it is")
            + " unexplained by them."
            if others
            else ""
        )
    )
    spark = next((runs for engine, *_, runs in table if engine == "spark"), None)
    if spark and batches:
        checked = [
            (run.before_p50, found["median_before_s"] * 1000)
            for run in spark
            if run.counted and run.before_p50 is not None
            for found in [batches(run)]
            if found
        ]
        if checked:
            within = sum(d / 2 < p <= 1.5 * d for p, d in checked)
            notes.append(
                "Spark: a record waits for the next batch to start, half a batch on average, "
                "then for at most its whole batch until it is written, so its steady p50 should "
                "lie above half a median batch and at most one and a half: in "
                f"{within} of {len(checked)} runs it does "
                f"(p50 {span_s(p / 1000 for p, _ in checked)} s, median batch "
                f"{span_s(d / 1000 for _, d in checked)} s)"
                + (
                    "."
                    if within == len(checked)
                    else "; the other runs' p50 is unexplained by their batches."
                )
            )
    return notes


def flink_exceptions(results: Path, run: FaultRun) -> tuple[float, str, int] | None:
    """From the job's exception history (engine/flink-exceptions.json): seconds from the fault to
    the first exception at or after it, that exception's first line without its class names, and
    how many of the later ones are for want of a slot (NoResourceAvailableException). None
    without the file or any such exception."""
    out = results / run.run_id
    try:
        start = json.loads((out / "summary.json").read_text())["faults"][0]["start_ms"]
        history = json.loads((out / "engine" / "flink-exceptions.json").read_text())
        entries = history["exceptionHistory"]["entries"]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    after = sorted(
        (e for e in entries if isinstance(e.get("timestamp"), int) and e["timestamp"] >= start),
        key=lambda e: e["timestamp"],
    )
    if not after:
        return None
    first = (after[0].get("stacktrace") or after[0].get("exceptionName") or "").splitlines()
    message = re.sub(r"^(?:[\w.$]+Exception: )+", "", first[0] if first else "").strip()
    no_slot = sum("NoResourceAvailableException" in (e.get("stacktrace") or "") for e in after)
    return (after[0]["timestamp"] - start) / 1000, message, no_slot


def flink_finding(runs: list[FaultRun], exceptions: Callable[[FaultRun], Any]) -> str | None:
    """How the job learnt of the lost TaskManager and what it failed on until whole again, from
    its exception history."""
    read = [found for found in map(exceptions, runs) if found]
    if not read:
        return None
    messages = sorted({re.sub(r"id \S+", "id <id>", message) for _, message, _ in read})
    no_slot = sorted(n for *_, n in read)
    failures = f"{no_slot[0]}" + (f" to {no_slot[-1]}" if no_slot[-1] != no_slot[0] else "")
    return (
        f"Flink, in {len(read)} of {len(runs)} runs with an exception history: the job's first "
        f"exception after the fault came {span_s(at for at, _, _ in read)} s after it, "
        + " or ".join(f"'{m}'" for m in messages)
        + f"; then {failures} failures for want of a slot "
        "(NoResourceAvailableException) before the engine was whole again "
        "(engine/flink-exceptions.json)."
    )


def batch_finding(runs: list[FaultRun], batches: Callable[[FaultRun], Any]) -> str | None:
    """The longest batch after the fault against the batches before it, and when the fault's
    host had an executor again, over the runs that report them; the cause is not measured."""
    read = [found for found in map(batches, runs) if found]
    if not read:
        return None
    back = [r["executor_back_s"] for r in read if r["executor_back_s"] == r["executor_back_s"]]
    line = (
        f"Spark, in {len(read)} of {len(runs)} runs with progress reports: the longest batch "
        f"reported in the 60 s after the fault took {span_s(r['longest_s'] for r in read)} s, "
        f"of which {span_s(r['longest_add_batch_s'] for r in read)} s running its tasks "
        "(addBatch), against a median batch of "
        f"{span_s(r['median_before_s'] for r in read)} s in the 20 s before it "
        "(engine/spark-progress.jsonl)"
    )
    if back:
        line += (
            f"; the fault's host listed an executor again {span_s(back)} s after the fault "
            "(the timeline's executors)"
        )
    return line + ". What made those batches longer the runs do not measure."


def span_s(values: Any) -> str:
    """One value, or low to high, to a tenth of a second."""
    known = sorted(values)
    low, high = known[0], known[-1]
    return f"{low:.1f}" if round(low, 1) == round(high, 1) else f"{low:.1f} to {high:.1f}"


def spark_finding(runs: list[FaultRun], losses: Callable[[FaultRun], Any]) -> str | None:
    """What the driver logs say about the killed executor and the tasks lost with it, beside
    each run's duplicates."""
    read = [(run, losses(run)) for run in runs]
    if not read or any(found is None for _, found in read):
        return None
    lost_in = [run for run, (reasons, _) in read if reasons]
    reasons = sorted({reason for _, (found, _) in read for reason in found})
    with_tasks = [(run, tasks) for run, (_, tasks) in read if tasks]
    without = [run for run, (_, tasks) in read if not tasks]
    line = (
        "Spark: the driver log names the killed executor lost in "
        f"{len(lost_in)} of {len(read)} runs"
    )
    if reasons:
        line += " (the reason its worker reported: " + "; ".join(f"'{r}'" for r in reasons) + ")"
    line += f"; tasks lost with it: {sum(t for _, t in with_tasks)}, in {len(with_tasks)} "
    line += f"run{'' if len(with_tasks) == 1 else 's'}."
    if with_tasks:
        dups = sum(run.fault_duplicates or 0 for run, _ in with_tasks)
        line += f" The runs that lost tasks have {dups:,} duplicate records from the fault."
    if without:
        dups = sum(run.fault_duplicates or 0 for run in without)
        line += (
            f" The {len(without)} run(s) that lost none have {dups:,} duplicate records from the "
            "fault" + (": nothing was replayed." if dups == 0 else ", unexplained by the logs.")
        )
    return line


def spark_batches(results: Path, run: FaultRun) -> dict[str, float] | None:
    """Around the fault, from the query's own progress reports (engine/spark-progress.jsonl,
    durationMs per batch, by when each was reported): the median batch in the 20 s before the
    fault, the longest reported in the 60 s from it with its addBatch (running the batch's
    tasks), all in seconds, and when the fault's host listed an executor again (the timeline).
    None without progress reports on both sides of the fault."""
    out = results / run.run_id
    try:
        summary = json.loads((out / "summary.json").read_text())
        fault = summary["faults"][0]
        start, host = int(fault["start_ms"]), fault.get("host")
        record = json.loads((out / "run.json").read_text())
        progress = (out / "engine" / "spark-progress.jsonl").read_text().splitlines()
        timeline = (out / "engine" / "timeline.jsonl").read_text().splitlines()
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    before, after = [], []
    for line in progress:
        try:
            entry = json.loads(line)
            took = entry["progress"]["durationMs"]
            at = int(entry["t_ms"]) - start
        except (ValueError, KeyError, TypeError):
            continue  # not a progress report, or a line cut when the run stopped
        if -20_000 <= at < 0:
            before.append(took.get("triggerExecution", 0) / 1000)
        elif 0 <= at < 60_000:
            after.append((took.get("triggerExecution", 0) / 1000, took.get("addBatch", 0) / 1000))
    if not before or not after:
        return None
    longest = max(after)
    hosts = record.get("hosts") or []
    address = next((h.get("address") for h in hosts if h.get("name") == host), None)
    back = None
    for line in timeline:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        at = entry.get("t_ms", 0) - start
        lost = at > 0 and address is not None and not (entry.get("executors") or {}).get(address)
        if lost:
            back = None
        elif at > 0 and back is None and address is not None and "executors" in entry:
            back = at / 1000
    return {
        "median_before_s": statistics.median(before),
        "longest_s": longest[0],
        "longest_add_batch_s": longest[1],
        "executor_back_s": back if back is not None else float("nan"),
    }


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def findings(
    table: Table,
    restarts: Callable[[FaultRun], int | None] | None = None,
    losses: Callable[[FaultRun], Any] | None = None,
    batches: Callable[[FaultRun], Any] | None = None,
    exceptions: Callable[[FaultRun], Any] | None = None,
) -> list[str]:
    """Each engine's recovery beside OSPBench's, and what in its own timeline the recovery is
    made of; a difference the runs do not account for is said to be unexplained. restarts(run)
    gives how often the engine restarted the job or query after the fault (None: not
    recorded). A censored recovery is a lower bound: it is placed against a range only when it
    already lies above it."""
    notes = []
    recoveries: dict[str, tuple[float, bool]] = {}
    for engine, _, _, _, runs in table:
        counted = [r for r in runs if r.counted]
        if not counted:
            notes.append(
                f"{engine.capitalize()}: no run was counted (each was overloaded before the "
                "fault or its wall clock moved)."
            )
            continue
        recovery = _mean([r.timeline.get("recovery_s") for r in counted])
        censored = any(r.censored["recovery_s"] for r in counted)
        whole = _mean([r.timeline.get("engine_whole_s") for r in counted])
        detected = _mean([r.timeline.get("detected_s") for r in counted])
        replayed = _mean([r.replayed_s for r in counted])
        if recovery is None:
            notes.append(f"{engine.capitalize()}: no counted run showed its recovery.")
            continue
        recoveries[engine] = (recovery, censored)
        parts = [
            f"{engine.capitalize()}: recovery {'at least ' if censored else ''}{recovery:.1f} s"
        ]
        if detected is not None:
            parts.append(f"the failure detected {detected:.1f} s after the fault")
        if whole is not None:
            parts.append(f"the engine whole again at {whole:.1f} s")
        if replayed is not None:
            parts.append(f"{replayed:.1f} s of input replayed per fault")
        line = ", ".join(parts) + "."
        if engine in OSPBENCH:
            low, high = OSPBENCH[engine]
            unexplained = (
                " The runs record this lab's timeline, not OSPBench's: the difference is "
                "unexplained by them."
            )
            if recovery > high:
                line += f" OSPBench: {low} to {high} s; this is above it.{unexplained}"
            elif censored:
                line += f" OSPBench: {low} to {high} s; a lower bound cannot be placed in it."
            elif recovery >= low:
                line += f" OSPBench: {low} to {high} s, which this falls within."
            else:
                line += f" OSPBench: {low} to {high} s; this is below it.{unexplained}"
        notes.append(line)
    spark_runs = [r for engine, *_, runs in table if engine == "spark" for r in runs]
    said = spark_finding(spark_runs, losses) if losses and spark_runs else None
    if said:
        notes.append(said)
    said = batch_finding(spark_runs, batches) if batches and spark_runs else None
    if said:
        notes.append(said)
    notes.extend(latency_finding(table, batches))
    replayed = {
        engine: _mean([r.replayed_s for r in runs if r.counted]) for engine, *_, runs in table
    }
    shown = {engine: value for engine, value in replayed.items() if value is not None}
    if len(shown) > 1:
        notes.append(
            "Replayed per fault: "
            + ", ".join(f"{engine.capitalize()} {value:.1f} s" for engine, value in shown.items())
            + ". Which records each engine replayed the runs do not record (beyond Spark's "
            "tasks lost, above): the differences are unexplained by them."
        )
    flink_runs = [r for engine, *_, runs in table if engine == "flink" for r in runs]
    said = flink_finding(flink_runs, exceptions) if exceptions and flink_runs else None
    if said:
        notes.append(said)
    flink, spark = recoveries.get("flink"), recoveries.get("spark")
    by_engine = {engine: runs for engine, *_, runs in table}
    if flink and spark:
        (flink_rec, flink_censored), (spark_rec, spark_censored) = flink, spark
        # A lower bound decides only when the other's full recovery lies below it.
        undecided = (flink_censored and spark_censored) or (
            (flink_censored and spark_rec >= flink_rec)
            or (spark_censored and flink_rec >= spark_rec)
        )
        if undecided:
            notes.append(
                "Flink and Spark: a recovery the runs did not show in full (a lower bound) "
                "leaves which one recovered first unsaid."
            )
        elif flink_rec == spark_rec:
            notes.append(f"Flink and Spark recovered in the same {flink_rec:.1f} s here.")
        else:
            first = "Spark" if spark_rec < flink_rec else "Flink"
            line = (
                f"{first} recovered first here ({'as' if first == 'Spark' else 'unlike'} "
                f"OSPBench): Flink {'at least ' * flink_censored}{flink_rec:.1f} s, Spark "
                f"{'at least ' * spark_censored}{spark_rec:.1f} s."
            )
            counts = {
                name: [restarts(run) if restarts else None for run in runs if run.counted]
                for name, runs in (
                    ("Flink's job", by_engine["flink"]),
                    ("Spark's query", by_engine["spark"]),
                )
            }
            known = all(n is not None for values in counts.values() for n in values)
            if known:
                line += (
                    " "
                    + " and ".join(
                        f"{name} restarted in {sum(bool(n) for n in values)} of {len(values)} runs"
                        for name, values in counts.items()
                    )
                    + " (engine/timeline.jsonl `restarts`, from the fault to the run's end)."
                )
            if (
                known
                and first == "Spark"
                and all(counts["Flink's job"])
                and not any(counts["Spark's query"])
            ):
                line += (
                    " Every Flink recovery includes a restart of its job (restarts counts "
                    "every restart, of a failover region or the whole job) and no Spark one a "
                    "restart of its query: that is the difference the runs show; how much of "
                    "the gap it accounts for they do not measure."
                )
            else:
                line += " The runs do not account for the difference: it is unexplained."
            notes.append(line)
    return notes


def result_file(table: Table, results: Path, description: str) -> dict[str, Any]:
    runs = [run for *_, chosen in table for run in chosen]
    dirty = fault_figures.runs_commit(results, runs)[1]
    return {
        **fault_figures.result_header("make bench-three-engines", results, runs),
        "tables": [
            {
                "title": "Flink, Storm and Spark at least once, under a worker failure",
                "description": description,
                "columns": fault_figures.GROUP_COLUMNS,
                "rows": [group_row(*row) for row in table],
                "notes": [
                    "A value marked >= is a lower bound: a run ended before it showed it.",
                    "replayed s: the fault's duplicate records divided by the input rate.",
                    OSPBENCH_NOTE,
                    *findings(
                        table,
                        lambda run: restarts_after_fault(results, run),
                        lambda run: spark_losses(results, run),
                        lambda run: spark_batches(results, run),
                        lambda run: flink_exceptions(results, run),
                    ),
                    "The test hosts are network namespaces on one machine and share its cores.",
                ]
                + (["The kit's tree was dirty when measured."] if dirty else []),
            },
            {
                "title": "What bounded detection and replay, as the runs recorded it",
                "description": "Per engine, from run.json settings (each value the runs had).",
                "columns": [
                    "engine",
                    "detection and replay settings",
                    "Kafka clients",
                    "engine-internal TLS",
                    "source tasks",
                    "sink linger ms",
                ],
                "rows": [bounds_row(results, engine, chosen) for engine, *_, chosen in table],
            },
            {
                "title": "Every run",
                "columns": fault_figures.RUN_COLUMNS,
                "rows": [run_row(run, knob) for _, _, knob, _, chosen in table for run in chosen],
            },
            fault_figures.phase_part(results, runs),
        ],
    }


def describe(run_dirs: list[Path], table: Table) -> str:
    reps = [len(runs) for *_, runs in table]
    return fault_figures.study_description(run_dirs, reps, "engine", "at least once, ")


def main(argv: list[str] | None = None) -> int:
    parser, args, done = fault_figures.study_runs_from_arguments(
        __doc__.splitlines()[0], "three-engines-*", Path("bench/out/three-engines"), argv
    )
    unequal = [
        out.name
        for out in done
        if json.loads((out / "run.json").read_text()).get("settings", {}).get("tls_internal")
    ]
    if unequal:
        parser.error(
            f"{len(unequal)} run(s) ran Flink with internal TLS ({unequal[0]}, ...), which the "
            "other engines do not have: the figures would not be on equal footing. Run the "
            "study on an inventory with Flink's TLS off (`make bench-three-engines` does)."
        )
    table = load(args.from_results, done)
    document = result_file(table, args.from_results, describe(done, table))
    for note in document["tables"][0]["notes"]:
        print(f"- {note}")
    fault_figures.write_result(document, args.out, "three-engine-figures.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
