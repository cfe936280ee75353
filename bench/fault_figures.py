#!/usr/bin/env python3
"""The engines under a worker failure on the test hosts (issue 11's figures).

For each engine and setting (Flink: checkpoint interval 5 s and 30 s, one kill_taskmanager;
Storm: message timeout 5 s and 30 s, one kill_supervisor), REPS runs of COUNT messages at RATE
msg/s with the fault at FAULT_AT_S s for DURATION_S s, each analysed by the kit's own PySpark
summary (docs/metrics.md). Per run and per setting (mean, min-max over the repetitions):

- lost: acknowledged messages never received (every message counted, warm-up included);
- duplicates: duplicate records as a share of the messages produced;
- stall: the longest interval without any result after the fault (summary.json faults[0]);
- output recovery: from the fault to the first message that starts 5 s of on-time delivery;
- engine recovery: from the fault to the first second the engine itself reported the job whole
  again (engine/timeline.jsonl healthy, after it had reported it was not), and when it first
  noticed (unhealthy from);
- overloaded before the fault: the kit's overload flag (producer/steady.py) over the lag samples
  from the end of the warm-up to the fault (the fault's own stall grows the backlog, so the
  whole run says nothing about whether the lab kept up); an overloaded run is flagged, and runs
  the check could not judge are counted as unknown.

`--from-results DIR` prints the same tables again from the runs already in DIR.
Needs converged test hosts. Run as root from the repository: `make bench-faults` (or
`.venv/bin/python bench/fault_figures.py --help`). All test hosts share this machine's cores:
the figures describe that lab, not a real cluster.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import lab_playbooks

from producer.lagsampler import LagSample
from producer.steady import overload

SETTINGS = {
    "flink": ("kill_taskmanager", "checkpoint_interval_s", (5, 30)),
    "storm": ("kill_supervisor", "storm_message_timeout_s", (5, 30)),
}


@dataclass(frozen=True)
class FaultRun:
    run_id: str
    engine: str
    fault: str
    setting: int
    status: str
    lost: int
    produced: int
    duplicate_records: int
    stall_s: float | None
    recovery_s: float | None
    engine_unhealthy_after_s: float | None
    engine_recovery_s: float | None
    overloaded: bool | None
    # Flink: how long before the fault its last completed checkpoint was triggered (the replay
    # after the restart starts from there); Storm: the spout's failed tuples after the fault.
    checkpoint_age_s: float | None
    spout_failed: int | None
    # When the engine's own restart counter first moved after the fault (Flink numRestarts,
    # Storm's worker restarts as Nimbus saw them).
    restart_seen_after_s: float | None
    # Flink: the failovers its exception history holds after the fault, each with its cause.
    failovers: list[str] | None
    target: str
    wall_s: float

    @property
    def duplicate_share(self) -> float:
        return 100.0 * self.duplicate_records / self.produced if self.produced else 0.0


def run_once(engine: str, setting: int, args: argparse.Namespace, results: Path) -> FaultRun:
    fault, knob, _ = SETTINGS[engine]
    run_id = f"bench-fault-{engine}-{setting}s-{uuid.uuid4().hex[:6]}"
    extravars = {
        "engine": engine,
        "count": args.count,
        "rate": args.rate,
        "warmup_s": args.warmup_s,
        "fault": fault,
        "fault_at_s": args.fault_at_s,
        "duration_s": args.duration_s,
        knob: setting,
        "run_id": run_id,
        "experiment_results_dir": str(results),
    }
    started = time.monotonic()
    lab_playbooks.run(("experiment.yml",), extravars)
    run = figures_of(results / run_id, time.monotonic() - started)
    print(
        f"  {engine} {knob}={setting} {run_id} on {run.target}: {run.status}, lost {run.lost}, "
        f"duplicates {run.duplicate_records} ({run.duplicate_share:.2f} %), stall {run.stall_s} s, "
        f"output recovery {run.recovery_s} s, engine unwell after "
        f"{run.engine_unhealthy_after_s} s, whole again after {run.engine_recovery_s} s, "
        f"overloaded before the fault {run.overloaded}, {run.wall_s:.0f} s wall",
        flush=True,
    )
    return run


def figures_of(out: Path, wall_s: float | None = None) -> FaultRun:
    """One run's figures from its result directory (summary.json from the kit's analysis)."""
    record = json.loads((out / "run.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    received = json.loads((out / "received.summary.json").read_text())
    (figures,) = summary["faults"]
    health = (figures.get("engine_timeline") or {}).get("health") or {}
    start = figures["start_ms"]
    unwell = health.get("unhealthy_from_ms")
    lag = [
        LagSample.from_line(json.loads(line))
        for line in (out / "engine" / "lag.jsonl").read_text().splitlines()
    ]
    steady_start = received["latency_ms"]["steady_start_ms"]
    before_fault = overload(lag, (steady_start, start), float(record["parameters"]["rate"]))
    engine = record["engine"]
    timeline = [
        json.loads(line) for line in (out / "engine" / "timeline.jsonl").read_text().splitlines()
    ]
    before = [t for t in timeline if t["t_ms"] < start and t.get("last_checkpoint")]
    trigger = before[-1]["last_checkpoint"]["trigger_ms"] if before else None
    failed = [t["spout_failed"] for t in timeline if t.get("spout_failed") is not None]
    counter = "restarts" if engine == "flink" else "worker_restarts"
    counted = [t for t in timeline if t.get(counter) is not None]
    at_fault = max((t[counter] for t in counted if t["t_ms"] < start), default=0)
    moved = next((t["t_ms"] for t in counted if t["t_ms"] >= start and t[counter] > at_fault), None)
    history = None
    if engine == "flink":
        exceptions = json.loads((out / "engine" / "flink-exceptions.json").read_text())
        entries = (exceptions.get("exceptionHistory") or {}).get("entries") or []
        causes = {
            (round((e["timestamp"] - start) / 1000, 1), e["exceptionName"].rsplit(".", 1)[-1])
            for e in entries
            if e["timestamp"] >= start
        }
        history = [f"{cause} at {at} s" for at, cause in sorted(causes)]
    return FaultRun(
        run_id=record["run_id"],
        engine=engine,
        fault=record["fault"],
        setting=int(record["parameters"][SETTINGS[engine][1]]),
        status=record["status"],
        lost=summary["lost"],
        produced=summary["produced"],
        duplicate_records=summary["duplicate_records"],
        stall_s=figures.get("stall_s"),
        recovery_s=figures.get("recovery_s"),
        engine_unhealthy_after_s=None if unwell is None else (unwell - start) / 1000,
        engine_recovery_s=health.get("engine_recovery_s"),
        overloaded=before_fault["overloaded"],
        checkpoint_age_s=None if trigger is None else (start - trigger) / 1000,
        spout_failed=failed[-1] if failed else None,
        restart_seen_after_s=None if moved is None else (moved - start) / 1000,
        failovers=history,
        target=figures.get("host") or "?",
        wall_s=wall_s if wall_s is not None else float("nan"),
    )


def spread(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "n/a"
    missing = len(values) - len(known)
    text = f"{statistics.mean(known):.1f} ({min(known):.1f}-{max(known):.1f})"
    return text + (f", {missing} without" if missing else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--count", type=int, default=60_000)
    parser.add_argument("--rate", type=float, default=2_000)
    parser.add_argument("--warmup-s", type=int, default=10)
    parser.add_argument("--fault-at-s", type=int, default=20)
    parser.add_argument("--duration-s", type=int, default=10)
    parser.add_argument("--results", type=Path, default=Path("bench/out/faults"))
    parser.add_argument("--from-results", type=Path, help="only print the tables of these runs")
    parser.add_argument(
        "--runs",
        default="bench-fault-*",
        help="with --from-results: which run directories (a glob; a study's runs are "
        "<study>-*, e.g. flink-vs-storm-scale0p5-*)",
    )
    args = parser.parse_args()
    if args.from_results:
        pattern = f"{args.runs}/summary.json"
        done = sorted(out.parent for out in args.from_results.glob(pattern))
        if not done:
            parser.error(f"no summarised run matches {args.from_results / pattern}")
        runs = [figures_of(out) for out in done]
        table = []
        for engine, (_, knob, _) in SETTINGS.items():
            for value in sorted({r.setting for r in runs if r.engine == engine}):
                chosen = [r for r in runs if (r.engine, r.setting) == (engine, value)]
                table.append((engine, chosen[0].fault, knob, value, chosen))
        for row in table:
            for run in row[4]:
                print(
                    f"  {run.run_id}: duplicates {run.duplicate_records} "
                    f"({run.duplicate_share:.2f} %), last checkpoint {run.checkpoint_age_s} s "
                    f"before the fault, noticed after {run.engine_unhealthy_after_s} s, "
                    f"spout failed {run.spout_failed}, restart counted after "
                    f"{run.restart_seen_after_s} s"
                    + (f", failovers: {'; '.join(run.failovers)}" if run.failovers else "")
                )
        print_table([row for row in table if row[4]])
        return 0
    args.results.mkdir(parents=True, exist_ok=True)
    print(
        f"{args.count:,} messages at {args.rate:,.0f}/s, fault at {args.fault_at_s} s for "
        f"{args.duration_s} s, {args.reps} repetitions; results in {args.results}"
    )
    table = []
    for engine in args.engines:
        fault, knob, values = SETTINGS[engine]
        for setting in values:
            print(f"{engine}, {fault}, {knob}={setting}:", flush=True)
            runs = [run_once(engine, setting, args, args.results) for _ in range(args.reps)]
            table.append((engine, fault, knob, setting, runs))
    print_table(table)
    return 0


def unknown_text(runs: list[FaultRun]) -> str:
    """ ", k unknown" for the runs whose overload check could not tell (too few lag samples, or a
    backlog slope whose interval straddles the threshold)."""
    unknown = sum(r.overloaded is None for r in runs)
    return f", {unknown} unknown" if unknown else ""


def print_table(table: list[tuple[str, str, str, int, list[FaultRun]]]) -> None:
    print("\nmean (min-max) over the repetitions:")
    print(
        "| engine | fault | setting | runs | lost | duplicates % | stall s | output recovery s"
        " | engine noticed after s | restart counted after s | engine whole again after s"
        " | last checkpoint before the fault, s | spout failed (Storm's sampled count)"
        " | overloaded before the fault |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for engine, fault, knob, setting, runs in table:
        complete = sum(r.status == "complete" for r in runs)
        print(
            f"| {engine} | {fault} | {knob}={setting} | {complete}/{len(runs)} complete "
            f"| {sum(r.lost for r in runs)} | {spread([r.duplicate_share for r in runs])} "
            f"| {spread([r.stall_s for r in runs])} | {spread([r.recovery_s for r in runs])} "
            f"| {spread([r.engine_unhealthy_after_s for r in runs])} "
            f"| {spread([r.restart_seen_after_s for r in runs])} "
            f"| {spread([r.engine_recovery_s for r in runs])} "
            f"| {spread([r.checkpoint_age_s for r in runs])} "
            f"| {spread([r.spout_failed for r in runs])} "
            f"| {sum(r.overloaded is True for r in runs)} of {len(runs)}"
            f"{unknown_text(runs)} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
