#!/usr/bin/env python3
"""The engines under a worker failure on the test hosts: the recovery timeline per fault.

For each engine and setting (Flink: checkpoint interval 5 s and 30 s, one kill_taskmanager;
Storm: message timeout 5 s and 30 s, one kill_supervisor), REPS runs of COUNT messages at RATE
msg/s with the fault at FAULT_AT_S s for DURATION_S s, and the experiment's recovery_window_s of
producing after it, each analysed by the kit's own PySpark summary (docs/metrics.md). Per run,
and per setting as mean (min-max) over the repetitions:

- the verdict (at-least-once: nothing acknowledged lost) and the loss;
- the recovery timeline of the fault, on the driver clock, from its start: detected, engine whole
  again, first output of a message due during the outage, backlog caught up, recovery (5 s of
  on-time delivery); a recovery the run did not show is a lower bound (">= x");
- the failure cost (largest latency increase over the pre-fault median) and the replayed seconds
  (the fault's duplicate records over the input rate), with the duplicate share beside them;
- steady latency p50/p99 before the fault and after the recovery, and whether a steady state
  was reached before the fault;
- Flink's checkpoint age when the fault began;
- overloaded before the fault: the kit's overload flag over the lag samples from the steady
  start to the fault. An overloaded run is flagged in its row and left out of its setting's
  figures (it measured a queue, not the engine); an unknown one is counted and said so.
- wall clock moved: run.json `wall_clock.moved`. Such a run is flagged in its row and left out
  of its setting's figures as well (its engine and fault times cannot be set against the
  ledger's), as `compare` leaves it out of its means; its verdict and loss still count.

Beside them: the figures set beside the reference study's; recovery against the setting, split
into the stages of each run's own timeline (detection, the engine's return, after it was whole),
with a note per engine and fault that judges each step between neighbouring settings (and the
lowest against the highest) with 95 % t intervals and, where they separate, names the stage
that moved most with the replay figures beside it, or says no difference is shown or why the
step is not split; the share of the machine's CPU each kind of process took before the fault
and during the outage (bench/process_cpu.py, sampled beside each run); and each phase's median
per engine (run.json phases).

RATE defaults to 500 msg/s: on test hosts that share two cores, Storm's topology queues at
1,000 msg/s before any fault, and an overloaded run measures the queue, not the recovery.

Writes bench/out/faults/fault-figures.json in the format of docs/bench-results.md: copy it to
bench/results/ to publish it (tools/render_figures.py renders docs/figures.md from there).
`--from-results DIR` rebuilds the tables from the runs already in DIR (`--cpu-samples` gives
them the samples of a bench/process_cpu.py that ran beside them; `--study NAME` adds the study's
95 % intervals, what they show, its capacity search trial by trial and its time, from
DIR/NAME/study.json; `--bench` names what
made the runs in the file's header, as `make bench-user-study`). `--settings` and
`--recovery-window-s` narrow or change the runs. Needs converged test
hosts. Run as root from the repository: `make bench-faults`. All test hosts share this
machine's cores: the figures describe that lab, not a real cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
import uuid
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lab_playbooks
import process_cpu
import yaml

from analysis import compare, intervals
from analysis.compare import wall_clock_moved
from analysis.study.capacity import CapacitySpec, Trial, capacity_text, fraction_text
from analysis.study.kit import one_commit
from analysis.study.report import phase_medians, rates_run, study_time
from producer.lagsampler import LagSample
from producer.steady import overload

SETTINGS = {
    "flink": ("kill_taskmanager", "checkpoint_interval_s", (5, 30)),
    "storm": ("kill_supervisor", "storm_message_timeout_s", (5, 30)),
}
TIMELINE = ("detected_s", "engine_whole_s", "first_output_s", "caught_up_s", "recovery_s")


@dataclass(frozen=True)
class FaultRun:
    run_id: str
    engine: str
    fault: str
    setting: int | str
    target: str
    status: str
    holds: bool | None
    lost: int
    produced: int
    duplicate_records: int
    # The fault's timeline in seconds from its start (None where the run did not show it) and
    # whether each was censored: the run ended first, so the value is a lower bound.
    timeline: dict[str, float | None]
    censored: dict[str, bool]
    failure_cost_ms: float | None
    fault_duplicates: int | None
    replayed_s: float | None
    checkpoint_age_s: float | None
    before_p50: float | None
    before_p99: float | None
    after_p50: float | None
    after_p99: float | None
    steady_reached: bool | None
    overloaded: bool | None
    wall_s: float | None

    # Shares (%) of the machine's CPU per kind of process (process_cpu.shares) from the steady
    # start to the fault, and from the fault until the engine was whole again; {} unsampled.
    cpu_before: dict[str, float] = field(default_factory=dict)
    cpu_outage: dict[str, float] = field(default_factory=dict)
    # run.json `wall_clock.moved`: None when run.json cannot say.
    clock_moved: bool | None = None

    @property
    def counted(self) -> bool:
        """Whether the run's figures go into its setting's: neither overloaded before the fault
        nor with a wall clock that moved."""
        return self.overloaded is not True and self.clock_moved is not True

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
        **(
            {"recovery_window_s": args.recovery_window_s}
            if args.recovery_window_s is not None
            else {}
        ),
        "run_id": run_id,
        "experiment_results_dir": str(results),
    }
    started = time.monotonic()
    with process_cpu.ProcessSampler(cpu_samples(results / run_id)):
        lab_playbooks.run(("experiment.yml",), extravars)
    run = figures_of(results / run_id, time.monotonic() - started)
    print(f"  {run_line(run)}", flush=True)
    return run


def cpu_samples(out: Path) -> Path:
    """Where a run's CPU samples go: beside its result directory, which the kit owns."""
    return out.parent / f"{out.name}.cpu.jsonl"


def _phase(summary: dict[str, Any], name: str, figure: str) -> float | None:
    phase = (summary.get("latency_phases") or {}).get(name) or {}
    return phase.get(figure)


def replay_bound_of(record: dict[str, Any]) -> str:
    """The parameter that bounds the run's replay: its engine manifest's, as run.json names it
    (setting_roles), else the one the kit's analysis module for the engine names."""
    named = (record.get("setting_roles") or {}).get("replay_bound")
    if named:
        return str(named)
    from analysis.compare import sweep_parameters  # noqa: PLC0415  (only for older runs)

    known = sweep_parameters()
    if record["engine"] not in known:
        raise SystemExit(
            f"run {record.get('run_id')}: its run.json names no replay bound (setting_roles) "
            f"and the kit has no analysis module for engine {record['engine']!r}"
        )
    return known[record["engine"]]


def figures_of(out: Path, wall_s: float | None = None, cpu_file: Path | None = None) -> FaultRun:
    """One run's figures from its result directory (summary.json from the kit's analysis); the
    CPU shares from the samples the bench took beside it, else from cpu_file (a sampler that
    ran beside the whole bench: bench/process_cpu.py)."""
    record = json.loads((out / "run.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    (figures,) = summary["faults"]
    start = figures["start_ms"]
    lag = [
        LagSample.from_line(json.loads(line))
        for line in (out / "engine" / "lag.jsonl").read_text().splitlines()
    ]
    steady = summary.get("steady_state") or {}
    steady_from = steady.get("from_ms") or summary.get("steady_from_ms") or start
    before_fault = overload(lag, (steady_from, start), float(record["parameters"]["rate"]))
    timeline = {name: figures.get(name) for name in TIMELINE}
    censored = {name: False for name in TIMELINE}
    if figures.get("recovery_censored"):
        timeline["recovery_s"] = figures.get("recovery_at_least_s")
        censored["recovery_s"] = True
    if figures.get("caught_up_censored"):
        censored["caught_up_s"] = True
    verdict = summary.get("verdict") or record.get("verdict") or {}
    engine = record["engine"]
    samples = process_cpu.read_samples(cpu_samples(out))
    if not samples and cpu_file is not None:
        samples = process_cpu.read_samples(cpu_file)
    whole = figures.get("engine_whole_s")
    return FaultRun(
        run_id=record["run_id"],
        engine=engine,
        fault=record["fault"],
        setting=int(record["parameters"][replay_bound_of(record)]),
        target=figures.get("host") or "?",
        status=record["status"],
        holds=verdict.get("holds"),
        lost=summary["lost"],
        produced=summary["produced"],
        duplicate_records=summary["duplicate_records"],
        timeline=timeline,
        censored=censored,
        failure_cost_ms=figures.get("failure_cost_ms"),
        fault_duplicates=figures.get("duplicate_records"),
        replayed_s=figures.get("replayed_s"),
        checkpoint_age_s=figures.get("checkpoint_age_s"),
        before_p50=_phase(summary, "before_fault", "p50"),
        before_p99=_phase(summary, "before_fault", "p99"),
        after_p50=_phase(summary, "after_recovery", "p50"),
        after_p99=_phase(summary, "after_recovery", "p99"),
        steady_reached=steady.get("reached"),
        overloaded=before_fault["overloaded"],
        wall_s=wall_s,
        cpu_before=process_cpu.shares(samples, int(steady_from), int(start)),
        # No outage window without the engine's whole-again time.
        cpu_outage=process_cpu.shares(samples, int(start), start + int(1000 * whole))
        if whole is not None
        else {},
        clock_moved=wall_clock_moved(record),
    )


def seconds(run: FaultRun, name: str) -> str:
    value = run.timeline[name]
    if value is None:
        return "n/a"
    return f">= {value:.1f}" if run.censored[name] else f"{value:.1f}"


def run_line(run: FaultRun) -> str:
    timeline = ", ".join(f"{name.removesuffix('_s')} {seconds(run, name)}" for name in TIMELINE)
    wall = f", {run.wall_s:.0f} s wall" if run.wall_s is not None else ""
    return (
        f"{run.engine} {run.run_id} on {run.target}: {run.status}, verdict {run.holds}, lost "
        f"{run.lost}, duplicates {run.duplicate_records} ({run.duplicate_share:.2f} %); "
        f"{timeline}; replayed {run.replayed_s} s, failure cost {run.failure_cost_ms} ms, "
        f"overloaded before the fault {run.overloaded}, wall clock moved {run.clock_moved}{wall}"
    )


def spread(values: list[float | None], censored: list[bool] | None = None) -> str:
    """mean (min-max) over the known values; a censored value counts as its lower bound, and
    the figure then says it is one (">=", "k censored")."""
    known = [v for v in values if v is not None]
    if not known:
        return "n/a"
    bounds = sum(censored or [])
    text = f"{statistics.mean(known):.1f} ({min(known):.1f}-{max(known):.1f})"
    if bounds:
        text = f">= {text}, {bounds} censored"
    missing = len(values) - len(known)
    return text + (f", {missing} without" if missing else "")


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


YES_NO = {True: "yes", False: "no", None: "unknown"}

RUN_COLUMNS = [
    "engine",
    "setting",
    "run",
    "verdict",
    "lost",
    "duplicates %",
    *(f"{name.removesuffix('_s').replace('_', ' ')} s" for name in TIMELINE),
    "failure cost ms",
    "replayed s",
    "checkpoint age s",
    "p50 before ms",
    "p99 before ms",
    "p50 after ms",
    "p99 after ms",
    "steady before the fault",
    "overloaded before the fault",
    "wall clock moved",
]


def run_row(run: FaultRun, knob: str) -> list[Any]:
    verdict = {True: "held", False: "VIOLATED", None: "not judged"}[run.holds]
    return [
        run.engine,
        f"{knob}={run.setting}",
        run.run_id,
        verdict,
        run.lost,
        round(run.duplicate_share, 2),
        *(seconds(run, name) for name in TIMELINE),
        _round(run.failure_cost_ms, 0),
        _round(run.replayed_s, 2),
        _round(run.checkpoint_age_s),
        run.before_p50,
        run.before_p99,
        run.after_p50,
        run.after_p99,
        run.steady_reached,
        YES_NO[run.overloaded],
        YES_NO[run.clock_moved],
    ]


GROUP_COLUMNS = [
    "engine",
    "fault",
    "setting",
    "runs (counted)",
    "verdicts held",
    "lost",
    *(f"{name.removesuffix('_s').replace('_', ' ')} s" for name in TIMELINE),
    "failure cost ms",
    "replayed s per fault",
    "duplicates %",
    "checkpoint age s",
    "p50 / p99 before ms",
    "p50 / p99 after ms",
]


def group_row(engine: str, fault: str, knob: str, setting: int, runs: list[FaultRun]) -> list[Any]:
    counted = [r for r in runs if r.counted]
    unknown = sum(r.overloaded is None for r in counted)
    label = f"{len(runs)} ({len(counted)}" + (f", {unknown} overload unknown" if unknown else "")
    return [
        engine,
        fault,
        f"{knob}={setting}",
        label + ")",
        f"{sum(r.holds is True for r in runs)} of {len(runs)}",
        sum(r.lost for r in runs),
        *(
            spread([r.timeline[name] for r in counted], [r.censored[name] for r in counted])
            for name in TIMELINE
        ),
        spread([r.failure_cost_ms for r in counted]),
        spread([r.replayed_s for r in counted]),
        spread([r.duplicate_share for r in counted]),
        spread([r.checkpoint_age_s for r in counted]),
        f"{spread([r.before_p50 for r in counted])} / {spread([r.before_p99 for r in counted])}",
        f"{spread([r.after_p50 for r in counted])} / {spread([r.after_p99 for r in counted])}",
    ]


def markdown(columns: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join("" if c is None else str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def study_description(run_dirs: list[Path], reps: list[int], per: str, how: str = "") -> str:
    """What a study's fault runs were, from their run.json parameters: each value the runs had
    (a run directory set the bench did not make, say), then how the table's seconds are read."""
    records = [json.loads((out / "run.json").read_text()) for out in run_dirs]

    def agreed(key: str, spec: str = "") -> str:
        values = sorted({r["parameters"].get(key) for r in records}, key=str)
        return " or ".join(format(v, spec) if v is not None else "default" for v in values)

    return (
        f"{agreed('count', ',')} messages at {agreed('rate', ',.0f')}/s, {how}the worker process "
        f"killed {agreed('fault_at_s')} s in, {agreed('recovery_window_s')} s of producing after "
        f"the fault (recovery_window_s), {'/'.join(map(str, sorted(set(reps))))} repetitions per "
        f"{per}. Seconds from the fault's start on the driver clock, mean (min-max) over the runs "
        "neither flagged overloaded before the fault nor with a wall clock that moved; verdicts "
        "and loss over every run."
    )


def study_runs_from_arguments(
    description: str, runs: str, out: Path, argv: list[str] | None
) -> tuple[argparse.ArgumentParser, argparse.Namespace, list[Path]]:
    """A study-figures script's command line (--from-results, --runs, --out) and the summarised
    run directories it names; stops with a message when there are none."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--from-results", type=Path, required=True, help="the study's results")
    parser.add_argument("--runs", default=runs, help="which run directories")
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args(argv)
    done = summarised_runs(args.from_results, args.runs)
    if not done:
        parser.error(f"no summarised run matches {args.from_results / args.runs}")
    return parser, args, done


def summarised_runs(results: Path, pattern: str) -> list[Path]:
    """The run directories under results matching pattern that the analysis summarised."""
    return sorted(out.parent for out in results.glob(f"{pattern}/summary.json"))


def write_result(document: dict[str, Any], out_dir: Path, name: str) -> Path:
    """Print a result file's tables and write it as out_dir/name (docs/bench-results.md)."""
    for part in document["tables"]:
        print(f"\n{part['title']}\n{markdown(part['columns'], part['rows'])}")
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / name
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {out} (copy it to bench/results/ to publish it)")
    return out


def _git(*words: str) -> str:
    done = subprocess.run(
        ["git", *words], cwd=lab_playbooks.REPO, capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def hosts_of(run_dir: Path) -> list[str]:
    """The hosts a run recorded (run.json hosts, a list or a mapping), with their systems."""
    record = json.loads((run_dir / "run.json").read_text())
    hosts = record.get("hosts") or {}
    entries = hosts.items() if isinstance(hosts, dict) else ((h.get("name"), h) for h in hosts)
    return [
        f"{name} {entry.get('os') or ''}".strip()
        for name, entry in sorted(entries, key=lambda item: str(item[0]))
    ]


def commit_of(run_dirs: list[Path]) -> tuple[str, bool]:
    """The kit's commit the runs were measured at (run.json kit_commit), and whether its tree
    was dirty then; the checkout's own when the runs do not say or disagree."""
    return one_commit(run_dirs) or (_git("rev-parse", "--short", "HEAD"), tree_dirty())


def runs_commit(results: Path, runs: list[FaultRun]) -> tuple[str, bool]:
    return commit_of([results / run.run_id for run in runs])


def header_of(bench: str, run_dirs: list[Path]) -> dict[str, Any]:
    """A result file's bench, date, commit (the runs'), machine and hosts (the first run's)
    (docs/bench-results.md)."""
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "bench": bench,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": commit_of(run_dirs)[0],
        "machine": f"{os.cpu_count()} cores, {memory_gib:.0f} GiB; the test hosts share them",
        "hosts": hosts_of(run_dirs[0]) if run_dirs else [],
    }


def result_header(bench: str, results: Path, runs: list[FaultRun]) -> dict[str, Any]:
    return header_of(bench, [results / run.run_id for run in runs])


def tree_dirty() -> bool:
    return bool(_git("status", "--porcelain", "--untracked-files=no"))


def result_file(
    args: argparse.Namespace, table: list[tuple[str, str, str, int, list[FaultRun]]], results: Path
) -> dict[str, Any]:
    runs = [run for *_, chosen in table for run in chosen]
    dirty = runs_commit(results, runs)[1]
    return {
        **result_header(args.bench, results, runs),
        "tables": [
            {
                "title": "Recovery per fault, per engine and setting",
                "description": (
                    f"{args.count:,} messages at {args.rate:,.0f}/s, the fault at "
                    f"{args.fault_at_s} s for {args.duration_s} s and {args.window} s of "
                    f"producing after it (recovery_window_s), {args.reps} repetitions. "
                    "Seconds from the fault's start on the driver clock, mean (min-max) over "
                    "the runs neither flagged overloaded before the fault nor with a wall clock "
                    "that moved."
                ),
                "columns": GROUP_COLUMNS,
                "rows": [group_row(*row) for row in table],
                "notes": [
                    "A value marked >= is a lower bound: a run ended before it showed it.",
                    "replayed s: the fault's duplicate records divided by the input rate.",
                    "The test hosts are network namespaces on one machine and share its cores.",
                ]
                + (["The kit's tree was dirty when measured."] if dirty else []),
            },
            {
                "title": "Every run",
                "columns": RUN_COLUMNS,
                "rows": [run_row(run, knob) for _, _, knob, _, chosen in table for run in chosen],
            },
            reference_part(table),
            recovery_part(table),
            cpu_part(table),
            phase_part(results, runs),
        ],
    }


# The reference study's published figures: both engines at-least-once, runs of
# REFERENCE_COUNT messages with one TaskManager / supervisor failure.
REFERENCE_COUNT = 200_000
REFERENCE = {
    "loss": ("0", "0"),
    "duplicates, % of the run's messages": ("0.3 to 1.5", "1.5 to 2.5, peak near 4"),
    f"duplicates, % of {REFERENCE_COUNT:,} messages": ("0.3 to 1.5", "1.5 to 2.5, peak near 4"),
    "replayed s per fault": ("not given", "not given"),
    "steady p50 / p99 ms before the fault": ("88 / 341", "81 / 414"),
    "steady p50 / p99 ms after the recovery": ("not given", "not given"),
    "engine whole again s": ("not given", "not given"),
    "recovery s": (
        "about 65 at a 60 s interval, rising with it",
        "about 78 at a 60 s timeout, rising with it",
    ),
}


def _per_setting(
    table: list[tuple[str, str, str, int, list[FaultRun]]],
    engine: str,
    figure: Any,
    every_run: bool = False,
) -> str:
    """One cell: the figure of each of the engine's settings, over its counted runs (every run
    for every_run: loss counts in overloaded and clock-moved runs too), each named by its fault
    too where the engine had several."""
    faults = {fault for name, fault, *_ in table if name == engine}
    parts = [
        f"{f'{fault} ' if len(faults) > 1 else ''}{setting} s: "
        f"{figure([r for r in runs if every_run or r.counted])}"
        for name, fault, _, setting, runs in table
        if name == engine
    ]
    return "; ".join(parts) or "not measured"


def _range(values: list[float]) -> str:
    return f"{min(values):.2f} to {max(values):.2f}" if values else "n/a"


def reference_part(
    table: list[tuple[str, str, str, int, list[FaultRun]]],
) -> dict[str, Any]:
    """The bench's figures beside the reference study's, per engine and setting."""
    measured: dict[str, Any] = {
        "loss": lambda runs: (
            f"{sum(r.lost for r in runs)} in {len(runs)} run{'' if len(runs) == 1 else 's'}"
        ),
        "duplicates, % of the run's messages": lambda runs: _range(
            [r.duplicate_share for r in runs]
        ),
        f"duplicates, % of {REFERENCE_COUNT:,} messages": lambda runs: _range(
            [100.0 * r.duplicate_records / REFERENCE_COUNT for r in runs]
        ),
        "replayed s per fault": lambda runs: spread([r.replayed_s for r in runs]),
        "steady p50 / p99 ms before the fault": lambda runs: (
            f"{spread([r.before_p50 for r in runs])} / {spread([r.before_p99 for r in runs])}"
        ),
        "steady p50 / p99 ms after the recovery": lambda runs: (
            f"{spread([r.after_p50 for r in runs])} / {spread([r.after_p99 for r in runs])}"
        ),
        "engine whole again s": lambda runs: spread(
            [r.timeline["engine_whole_s"] for r in runs],
            [r.censored["engine_whole_s"] for r in runs],
        ),
        "recovery s": lambda runs: spread(
            [r.timeline["recovery_s"] for r in runs], [r.censored["recovery_s"] for r in runs]
        ),
    }
    return {
        "title": "Beside the reference study",
        "description": (
            "The reference study's figures as published (both engines at-least-once, "
            f"{REFERENCE_COUNT:,} messages per run, one failure) beside this bench's, per "
            "setting (Flink's checkpoint interval, Storm's message timeout), over the runs not "
            "flagged overloaded before the fault nor with a wall clock that moved (loss over "
            "every run): mean (min-max), ranges "
            "as min to max. A "
            "duplicate share depends on the run's length; the second duplicates row divides "
            f"each run's duplicate records by {REFERENCE_COUNT:,}, which matches the "
            "reference's share where its input rate was this bench's."
        ),
        "columns": ["figure", "reference: Flink", "here: Flink", "reference: Storm", "here: Storm"],
        "rows": [
            [
                name,
                reference[0],
                _per_setting(table, "flink", measured[name], every_run=name == "loss"),
                reference[1],
                _per_setting(table, "storm", measured[name], every_run=name == "loss"),
            ]
            for name, reference in REFERENCE.items()
        ],
    }


# A run's recovery in the stages its own timeline splits it into: each from one of its
# timeline's instants (None: the fault's start) to the next, in seconds.
STAGES = (
    ("detection", None, "detected_s"),
    ("the engine's return", "detected_s", "engine_whole_s"),
    ("after the engine was whole", "engine_whole_s", "recovery_s"),
)


def stage_s(run: FaultRun, since: str | None, until: str) -> float | None:
    end = run.timeline[until]
    start = 0.0 if since is None else run.timeline[since]
    return None if end is None or start is None else end - start


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.mean(known) if known and len(known) == len(values) else None


def _in_order(run: FaultRun) -> bool:
    """The run's timeline gives every stage, in order: 0 <= detected <= whole <= recovery (the
    engine's health and on-time delivery are measured apart, so this is not given)."""
    points = [0.0, *(run.timeline[until] for _, _, until in STAGES)]
    known = [p for p in points if p is not None]
    return len(known) == len(points) and known == sorted(known)


def _decomposable(runs: list[FaultRun]) -> list[FaultRun]:
    """The counted runs whose recovery was observed (not censored) and whose timeline gives
    every stage in order."""
    return [
        r
        for r in runs
        if r.counted
        and not r.censored["recovery_s"]
        and r.timeline["recovery_s"] is not None
        and _in_order(r)
    ]


def _why_not_split(setting: Any, runs: list[FaultRun]) -> str | None:
    """Why a setting's runs cannot be split into stages, None when every counted run can."""
    counted = [r for r in runs if r.counted]
    if not counted:
        return f"at {setting} no run is counted (overloaded or the clock moved)"
    censored = [r for r in counted if r.censored["recovery_s"] or r.timeline["recovery_s"] is None]
    if censored:
        bounds = ", ".join(
            f">= {r.timeline['recovery_s']:.1f} s"
            if r.timeline["recovery_s"] is not None
            else "n/a"
            for r in censored
        )
        shown = f"{len(censored)} of {len(counted)} runs did not show a recovery"
        return f"at {setting} {shown} ({bounds})"
    if len(_decomposable(counted)) < len(counted):
        return (
            f"at {setting} a run's timeline does not give detection, return and recovery in order"
        )
    return None


def _recovery(run: FaultRun) -> float:
    """An observed recovery: only called on runs _decomposable keeps."""
    value = run.timeline["recovery_s"]
    assert value is not None
    return float(value)


def _stage(run: FaultRun, since: str | None, until: str) -> float:
    """A stage of a run _decomposable keeps, where every stage is known."""
    value = stage_s(run, since, until)
    assert value is not None
    return value


def _step(a: Any, runs_a: list[FaultRun], b: Any, runs_b: list[FaultRun]) -> str:
    """One step between two settings whose runs all split: whether the 95 % intervals of
    recovery separate, and where they do, the stages that moved, with the replay figures beside
    the catch-up stage when it moved most."""
    seen_a, seen_b = _decomposable(runs_a), _decomposable(runs_b)
    verdict = intervals.separation(
        intervals.mean_interval([_recovery(r) for r in seen_a]),
        intervals.mean_interval([_recovery(r) for r in seen_b]),
    )
    if verdict == "overlap":
        return f"{a} to {b}: the 95 % intervals overlap: no difference shown."
    if verdict != "separate":
        return f"{a} to {b}: {verdict}."
    moves = []
    for stage, since, until in STAGES:
        before = statistics.mean(_stage(r, since, until) for r in seen_a)
        after = statistics.mean(_stage(r, since, until) for r in seen_b)
        moves.append((after - before, stage, before, after))
    parts = ", ".join(f"{stage} {before:.1f} to {after:.1f} s" for _, stage, before, after in moves)
    largest = max(moves, key=lambda move: abs(move[0]))
    evidence = ""
    if largest[1] == STAGES[2][0]:
        replayed = _mean([r.replayed_s for r in seen_a]), _mean([r.replayed_s for r in seen_b])
        ages = (
            _mean([r.checkpoint_age_s for r in seen_a]),
            _mean([r.checkpoint_age_s for r in seen_b]),
        )
        if replayed[0] is not None and replayed[1] is not None:
            evidence = (
                f"; replayed input per fault went from {replayed[0]:.1f} to {replayed[1]:.1f} s"
            )
        if ages[0] is not None and ages[1] is not None:
            evidence += f"; the checkpoint's age at the fault from {ages[0]:.1f} to {ages[1]:.1f} s"
    return (
        f"{a} to {b}: the 95 % intervals separate. By stage: {parts}; the largest move is "
        f"{largest[1]} ({largest[0]:+.1f} s){evidence}."
    )


def setting_note(engine: str, fault: str, knob: str, settings: list[tuple]) -> str:
    """How recovery moved between an engine's neighbouring settings and, with three or more,
    from the lowest to the highest, each step judged as the study's findings judge a pair (95 %
    t intervals over the runs, analysis/intervals.py) and split into the stages of the runs'
    own timelines where the intervals separate; a step the intervals do not show, or the runs
    do not split (said once per setting), is said to be so."""
    means = ", ".join(
        f"{setting}: {statistics.mean(values):.1f}"
        for setting, runs in settings
        if (values := [_recovery(r) for r in _decomposable(runs)])
    )
    why = {setting: _why_not_split(setting, runs) for setting, runs in settings}
    first, last = settings[0], settings[-1]
    pairs = list(zip(settings, settings[1:], strict=False))
    if len(settings) > 2:
        pairs.append((first, last))
    steps = [
        f"{a} to {b}: not split." if why[a] or why[b] else _step(a, runs_a, b, runs_b)
        for (a, runs_a), (b, runs_b) in pairs
    ]
    if len(settings) > 2:
        steps[-1] = f"Lowest to highest, {steps[-1]}"
    reasons = "; ".join(reason for reason in why.values() if reason)
    unsplit = [f"Not split: {reasons}."] if reasons else []
    head = f"{engine}, {fault}, {knob} {first[0]} to {last[0]} (mean recovery s, runs split: "
    return f"{head}{means or 'none'}). {' '.join([*unsplit, *steps])}"


def recovery_part(table: list[tuple[str, str, str, int, list[FaultRun]]]) -> dict[str, Any]:
    """Recovery against the setting, per engine and fault, in the stages each run's own
    timeline gives it: detection, the engine's return, and what followed the engine being
    whole (the catch-up of the replayed input)."""
    rows: list[list[Any]] = []
    notes: list[str] = []
    by_fault: dict[tuple[str, str, str], list[tuple[int, list[FaultRun]]]] = {}
    for engine, fault, knob, setting, runs in table:
        seen = _decomposable(runs)
        rows.append(
            [
                engine,
                fault,
                f"{knob}={setting}",
                f"{len(seen)} of {len(runs)}",
                _round(_mean([r.timeline["recovery_s"] for r in seen])),
                *(_round(_mean([stage_s(r, *stage[1:]) for r in seen])) for stage in STAGES),
                _round(_mean([r.replayed_s for r in seen]), 2),
                _round(_mean([r.checkpoint_age_s for r in seen])),
            ]
        )
        by_fault.setdefault((engine, fault, knob), []).append((setting, runs))
    for (engine, fault, knob), settings in by_fault.items():
        if len(settings) > 1:
            notes.append(setting_note(engine, fault, knob, sorted(settings, key=lambda i: i[0])))
    return {
        "title": "Recovery against the setting, by stage",
        "description": (
            "Per engine, fault and setting, the mean over the counted runs whose recovery was "
            "observed (a censored run is not split): recovery and the stages its run's own "
            "timeline splits it into, seconds from the fault's start: until the engine said it "
            "was unwell (detection), from then until it said it was whole again (return), and "
            "from then until delivery was back under the recovery threshold (after whole). "
            "A run whose timeline does not give every stage in order (detected, whole again, "
            "recovery) is not split either. Beside them, the replayed input per fault and, for "
            "Flink, the checkpoint's age at the fault (empty for Storm). An empty cell: no run "
            "of the row could be split. Each note compares an engine's neighbouring "
            "settings, and with three or more its lowest and highest, as the study's findings "
            "compare a pair (95 % t intervals over the runs), and splits a step only where they "
            "separate."
        ),
        "columns": [
            "engine",
            "fault",
            "setting",
            "runs split",
            "recovery s",
            *(f"{stage} s" for stage, *_ in STAGES),
            "replayed s per fault",
            "checkpoint age s",
        ],
        "rows": rows,
        "notes": notes,
    }


CPU_KINDS = (
    "kafka",
    "flink-taskmanager",
    "flink-jobmanager",
    "storm-worker",
    "storm-supervisor",
    "storm-nimbus",
    "producer",
    "collector",
    "kit samplers",
    "zookeeper",
    "spark",
    "ansible",
    "supervisord",
    "flink-client",
    process_cpu.OTHER,
    process_cpu.NO_PROCESS,
)


def cpu_part(table: list[tuple[str, str, str, int, list[FaultRun]]]) -> dict[str, Any]:
    """Per engine and setting, the mean share of the machine's CPU each kind of process took
    before the fault and during the outage."""
    rows = []
    for engine, fault, knob, setting, runs in table:
        for window in ("before", "outage"):
            sampled = [getattr(r, f"cpu_{window}") for r in runs]
            sampled = [s for s in sampled if s]
            if not sampled:
                continue
            label = "steady start to fault" if window == "before" else "fault to engine whole"
            rows.append(
                [
                    engine,
                    fault,
                    f"{knob}={setting}",
                    label,
                    len(sampled),
                    *(round(statistics.mean(s.get(k, 0.0) for s in sampled), 1) for k in CPU_KINDS),
                ]
            )
    return {
        "title": "Where the machine's CPU went, per kind of process",
        "description": (
            "Shares (%) of the machine's CPU time (all cores) per kind of process, sampled from "
            "/proc (bench/process_cpu.py) on the machine that runs every test host, mean over "
            "the runs sampled; from the steady start to the fault, and from the fault until the "
            "engine was whole again. idle or unsampled: idle, interrupts, stolen time and "
            "processes that started and ended between two samples."
        ),
        "columns": ["engine", "fault", "setting", "window", "runs", *CPU_KINDS],
        "rows": rows,
    }


def phase_part(results: Path, runs: list[FaultRun]) -> dict[str, Any]:
    """Where the runs' time went: each phase's median per engine, from run.json `phases`."""
    columns, rows = phase_medians([results / run.run_id for run in runs])
    return {
        "title": "Where a run's time went: each phase's median per engine",
        "description": (
            "From run.json phases (the control node's clock), over the runs above; around "
            "producing is the phases' span less the producer's own sending time."
        ),
        "columns": columns,
        "rows": rows,
    }


def grouped(runs: list[FaultRun]) -> list[tuple[str, str, str, int, list[FaultRun]]]:
    """The runs per engine, fault and setting, in SETTINGS' order of engines: a study may give
    an engine several faults (the user's study stops and kills Flink's TaskManager), which
    must not share a row."""
    table: list[tuple[str, str, str, int, list[FaultRun]]] = []
    for engine, (_, knob, _) in SETTINGS.items():
        mine = [r for r in runs if r.engine == engine]
        for fault in sorted({r.fault for r in mine}):
            for value in sorted({r.setting for r in mine if r.fault == fault}):
                chosen = [r for r in mine if (r.fault, r.setting) == (fault, value)]
                table.append((engine, fault, knob, value, chosen))  # type: ignore[arg-type]
    return table


# A capacity trial's figures as the result files show them (trial_cells).
TRIAL_COLUMNS = ["rate /s", "p50 ms", "p99 ms", "send lag p99 ms", "output /s", "overloaded"]


def trial_cells(trial: Trial) -> list[Any]:
    """A capacity trial's figures, rounded for a result file, under TRIAL_COLUMNS."""
    whole = [None if v is None else round(v) for v in (trial.p50_ms, trial.p99_ms)]
    lag = _round(trial.send_lag_p99_ms)
    output = None if trial.output_per_s is None else round(trial.output_per_s)
    return [round(trial.rate), *whole, lag, output, YES_NO[trial.overloaded]]


def _capacity_note(engine: str, entry: dict[str, Any], rates: list[float]) -> str:
    """An engine's capacity, what it was measured with and when, and the runs' fraction of it."""
    found, failing = capacity_text(entry), entry.get("lowest_failing")
    if entry.get("rate"):
        found += f" (lowest failing {failing:,.0f}/s)" if failing else " (no rate failed)"
    settings = ", ".join(f"{k} {v}" for k, v in sorted((entry.get("settings") or {}).items()))
    when = entry.get("measured_utc") or "an unrecorded time"
    fractions = "; ".join(f"{r:,.0f}/s, {fraction_text(r, entry)}" for r in rates)
    ran = f"; the study's runs sent at {fractions}" if fractions else ""
    return f"{engine}: capacity {found}, measured with {settings or 'no settings'} at {when}{ran}."


def capacity_part(record: dict[str, Any], run_dirs: list[Path]) -> dict[str, Any] | None:
    """The study's capacity search (study.json capacity): every trial with the criterion's
    verdict on it, and per engine its capacity and the fraction of it the runs sent at; None
    for a study that measured none."""
    measured = {
        engine: entry
        for engine, entry in (record.get("capacity") or {}).items()
        if isinstance(entry, dict) and isinstance(entry.get("capacity_spec"), dict)
    }
    if not measured:
        return None
    rows: list[list[Any]] = []
    notes: list[str] = []
    sent = {engine: sorted(rates) for engine, rates in rates_run(run_dirs).items()}
    for engine, entry in measured.items():
        spec = CapacitySpec(**entry["capacity_spec"])
        for data in entry.get("trials") or []:
            trial = Trial(**{f.name: data.get(f.name) for f in fields(Trial)})
            why = trial.why_not(spec.p99_bound_ms)
            verdict = f"no: {why}" if why else "yes"
            rows.append([engine, trial.run_id, *trial_cells(trial), verdict])
        notes.append(_capacity_note(engine, entry, sent.get(engine, [])))
    bound = next(iter(measured.values()))["capacity_spec"]["p99_bound_ms"]
    return {
        "title": "Each engine's capacity, measured before the runs",
        "description": (
            "The study's capacity search on the same hosts (study.json capacity): fault-free "
            "runs, doubling from the first rate, then bisecting. A rate passes when its run is "
            f"complete, not flagged overloaded, and its steady p99 is under {bound:g} ms (after "
            "the warm-up, over the steady window); the capacity is the highest rate that passed. "
            "Latencies are the collector's, per message from its intended send time; send lag is "
            "how far the producer itself fell behind its schedule."
        ),
        "columns": ["engine", "trial", *TRIAL_COLUMNS, "passed"],
        "rows": rows,
        "notes": notes,
    }


def study_parts(run_dirs: list[Path], results: Path, study: str) -> list[dict[str, Any]]:
    """The runs as their study compares them (analysis/compare.py): each group's mean and 95 %
    interval, with what the intervals show as notes, and the study's time against its
    producing time (results/<study>/study.json)."""
    groups = compare.group_runs(compare.load_runs(run_dirs))
    columns, rows = compare.interval_rows(groups)
    shown = compare.findings(groups).splitlines()
    parts: list[dict[str, Any]] = [
        {
            "title": "Means and 95 % intervals over repetitions",
            "description": compare.INTERVALS_NOTE
            + ' The notes are the study report\'s "What this study shows", written from the '
            "verdicts and these intervals alone. A run counts here unless its collector flagged "
            "it overloaded (warm-up to the fault) or its clock moved, so n can differ from the "
            "other tables', which judge overload from the lag samples after the steady start.",
            "columns": columns,
            "rows": rows,
            "notes": [line.removeprefix("- ") for line in shown if line.startswith("- ")]
            + [
                "Overlapping intervals say only that these repetitions show no difference, not "
                "that there is none."
            ],
        }
    ]
    record_path = results / study / "study.json"
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    if capacity := capacity_part(record, run_dirs):
        parts.append(capacity)
    spent = study_time(record, results) if record else None
    if spent is not None:
        parts.append(
            {
                "title": "The study's time",
                "description": (
                    "From study.json: every attempt's wall time on the control node's monotonic "
                    "clock (the study's starts added up, the time between them not counted), "
                    "against the producers' sending time of the complete runs "
                    "(produced.summary.json), and the capacity search's runs before them."
                ),
                "columns": [
                    "attempts",
                    "wall min",
                    "complete runs",
                    "producing min",
                    "producing % of wall",
                    "around producing per run s: min / median / max",
                    "capacity runs",
                    "capacity wall min",
                ],
                "rows": [
                    [
                        spent.attempts,
                        round(spent.wall_s / 60, 1),
                        spent.complete,
                        round(spent.producing_s / 60, 1),
                        round(100 * spent.producing_s / spent.wall_s),
                        f"{spent.around_s[0]:.0f} / {spent.around_median_s:.0f} / "
                        f"{spent.around_s[-1]:.0f}",
                        spent.capacity_runs,
                        round(spent.capacity_wall_s / 60, 1),
                    ]
                ],
            }
        )
    return parts


def described_by_runs(args: argparse.Namespace, run_dirs: list[Path]) -> None:
    """Set the description's figures (count, rate, fault schedule, window, repetitions) from
    the runs' own parameters where they all agree, not from this command's defaults."""
    records = [json.loads((out / "run.json").read_text()) for out in run_dirs]
    for name, key in (
        ("count", "count"),
        ("rate", "rate"),
        ("fault_at_s", "fault_at_s"),
        ("duration_s", "duration_s"),
        ("window", "recovery_window_s"),
    ):
        values = {record["parameters"].get(key) for record in records}
        if len(values) == 1 and None not in values:
            setattr(args, name, values.pop())
    groups: dict[tuple[str, str, Any], int] = {}
    for record in records:
        knob = SETTINGS[record["engine"]][1]
        group = (record["engine"], record["fault"], record["parameters"].get(knob))
        groups[group] = groups.get(group, 0) + 1
    if len(set(groups.values())) == 1:
        args.reps = next(iter(groups.values()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rate", type=float, default=500)
    parser.add_argument("--warmup-s", type=int, default=10)
    parser.add_argument("--fault-at-s", type=int, default=20)
    parser.add_argument("--duration-s", type=int, default=10)
    parser.add_argument(
        "--count",
        type=int,
        default=None,
        help="messages per run (default: enough for the experiment's recovery_window_s and 5 s "
        "more after the fault ends)",
    )
    parser.add_argument(
        "--settings",
        nargs="+",
        type=int,
        help="only these values of each engine's setting (default: both of SETTINGS)",
    )
    parser.add_argument(
        "--recovery-window-s",
        type=int,
        help="the experiment's recovery_window_s for these runs (default: the experiment's)",
    )
    parser.add_argument("--results", type=Path, default=Path("bench/out/faults"))
    parser.add_argument("--from-results", type=Path, help="only rebuild the tables of these runs")
    parser.add_argument(
        "--runs", default="bench-fault-*", help="with --from-results: which run directories"
    )
    parser.add_argument(
        "--bench",
        default="make bench-faults",
        help="what made the runs, for the result file's header (docs/bench-results.md)",
    )
    parser.add_argument(
        "--study",
        help="with --from-results: the study the runs are of (its study.json): its 95 %% "
        "intervals, what they show and its time join the tables",
    )
    parser.add_argument(
        "--cpu-samples",
        type=Path,
        help="with --from-results: CPU samples of bench/process_cpu.py for runs without their own",
    )
    args = parser.parse_args()
    if args.study and not args.from_results:
        parser.error("--study reads a study's runs: give --from-results too")
    defaults = yaml.safe_load(
        (lab_playbooks.REPO / "roles" / "experiment" / "defaults" / "main.yml").read_text()
    )
    args.window = (
        args.recovery_window_s
        if args.recovery_window_s is not None
        else int(defaults["experiment_recovery_window_s"])
    )
    if args.count is None:
        args.count = int((args.fault_at_s + args.duration_s + args.window + 5) * args.rate)
    table: list[tuple[str, str, str, int, list[FaultRun]]] = []
    results = args.from_results or args.results
    if args.from_results:
        done = sorted(out.parent for out in results.glob(f"{args.runs}/summary.json"))
        if not done:
            parser.error(f"no summarised run matches {results / args.runs}")
        runs = [figures_of(out, cpu_file=args.cpu_samples) for out in done]
        described_by_runs(args, done)
        table = grouped(runs)
    else:
        results.mkdir(parents=True, exist_ok=True)
        print(
            f"{args.count:,} messages at {args.rate:,.0f}/s, fault at {args.fault_at_s} s for "
            f"{args.duration_s} s, {args.reps} repetitions; results in {results}"
        )
        for engine in args.engines:
            fault, knob, values = SETTINGS[engine]
            for setting in args.settings or values:
                print(f"{engine}, {fault}, {knob}={setting}:", flush=True)
                runs = [run_once(engine, setting, args, results) for _ in range(args.reps)]
                table.append((engine, fault, knob, setting, runs))
    document = result_file(args, table, results)
    if args.from_results and args.study:
        document["tables"] += study_parts(done, results, args.study)
    for part in document["tables"]:
        print(f"\n{part['title']}\n{markdown(part['columns'], part['rows'])}")
    out = results / "fault-figures.json"
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {out} (copy it to bench/results/ to publish it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
