#!/usr/bin/env python3
"""The engines' figures on the test hosts: repetitions at a fixed rate, then each engine's
sustainable rate.

1. For each configuration (an engine, with settings of its manifest: `spark`,
   `spark:spark_trigger=continuous`), REPS runs of COUNT messages at RATE msg/s: steady-state
   latency p50/p99 (after the warm-up; mean and spread over the repetitions), producer send
   lag, output rate and the overload flag, from each run's first-summary.json.
2. For each configuration, the highest rate (at most SEARCH_RUNS runs, doubling up from
   --search-from until a run fails the criterion, then bisecting) at which the overload check
   cleared the run (`overloaded` false: the backlog slope's whole 95 % interval at or below the
   threshold; a run it could not judge, `overloaded` null, fails the criterion) and steady-state
   p99 stays under --p99-limit-ms (1 s unless given).

Needs converged test hosts (`make lab`, then site.yml). Run as root from the repository:
`make bench-engines` (or `.venv/bin/python bench/engine_figures.py --help`). Every figure
printed is measured in this run; the runs stay in --results for a closer look, and the figures
go to --out/engine-figures.json in the format of docs/bench-results.md (copy it to
bench/results/ to publish it). All test hosts share this machine's cores: the figures describe
that lab, not a real cluster.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fault_figures
import lab_playbooks

from analysis.study.capacity import (
    FAILED,
    FIRST_SUMMARY,
    CapacitySpec,
    Trial,
    search,
    trial_from_summary,
)

P99_LIMIT_MS = 1000
# In a configuration, the rate search's own bound for it, not a setting of the engine.
BOUND_KEY = "p99_limit_ms"


@dataclass(frozen=True)
class Config:
    """An engine and the manifest settings it runs with (given as extra variables), with the
    rate search's p99 bound for it (None: --p99-limit-ms)."""

    engine: str
    settings: tuple[tuple[str, str], ...] = ()
    p99_limit_ms: float | None = None

    @property
    def label(self) -> str:
        given = ", ".join(f"{key}={value}" for key, value in self.settings)
        return f"{self.engine} ({given})" if given else self.engine

    @classmethod
    def parse(cls, text: str) -> Config:
        engine, _, rest = text.partition(":")
        settings = []
        limit = None
        for item in filter(None, rest.split(",")):
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise argparse.ArgumentTypeError(
                    f"{text!r}: give a configuration as ENGINE or ENGINE:KEY=VALUE[,KEY=VALUE]"
                )
            if key == BOUND_KEY:
                try:
                    limit = float(value)
                except ValueError:
                    raise argparse.ArgumentTypeError(
                        f"{text!r}: {BOUND_KEY} takes milliseconds, as {BOUND_KEY}=5000"
                    ) from None
            else:
                settings.append((key, value))
        return cls(engine, tuple(settings), limit)


@dataclass(frozen=True)
class RunFigures:
    """One run of a configuration: the collector's figures, as a study's capacity trial reads
    them."""

    config: Config
    trial: Trial


def run_once(config: Config, count: int, rate: float, warmup_s: int, results: Path) -> RunFigures:
    run_id = f"bench-{config.engine}-{int(rate)}-{uuid.uuid4().hex[:6]}"
    extravars: dict[str, Any] = {
        **dict(config.settings),
        "engine": config.engine,
        "count": count,
        "rate": rate,
        "warmup_s": warmup_s,
        "run_id": run_id,
        "experiment_results_dir": str(results),
        # The figures come from the run's own first-summary.json; the PySpark report is not needed.
        "analyze_on": "none",
    }
    started = time.monotonic()
    lab_playbooks.run(("experiment.yml",), extravars)
    trial = trial_from_summary(run_id, rate, results / run_id, time.monotonic() - started)
    if trial.status == FAILED or None in (trial.p50_ms, trial.p99_ms, trial.send_lag_p99_ms):
        # No summary, or one without the collector's figures (it left none): nothing to tabulate.
        raise SystemExit(
            f"{run_id} left no latency figures in {results / run_id / FIRST_SUMMARY} (status "
            f"{trial.status}): see the run's logs and files"
        )
    print(
        f"  {config.label} {rate:>7,.0f}/s {run_id}: "
        f"p50 {trial.p50_ms:,.0f} ms, p99 {trial.p99_ms:,.0f} ms, "
        f"send lag p99 {trial.send_lag_p99_ms:,.1f} ms, output {trial.output_per_s:,.0f}/s, "
        f"overloaded={trial.overloaded}, {trial.status}, {trial.wall_s:.0f} s",
        flush=True,
    )
    return RunFigures(config, trial)


def spread(values: list[float]) -> str:
    mean = statistics.fmean(values)
    low, high = min(values), max(values)
    relative = (high - low) / mean * 100 if mean else 0.0
    return f"mean {mean:,.0f} (min {low:,.0f}, max {high:,.0f}, range {relative:.0f}% of the mean)"


def cell(values: list[float], digits: int = 0) -> str:
    """Mean (min-max), as the other benches' tables print a spread over repetitions."""
    spec = f",.{digits}f"
    return (
        f"{format(statistics.fmean(values), spec)} "
        f"({format(min(values), spec)}-{format(max(values), spec)})"
    )


def number(value: float | None) -> float:
    """A run's figure (run_once refuses a run whose summary lacks its latency figures)."""
    assert value is not None
    return value


def values(runs: list[RunFigures], name: str) -> list[float]:
    """One of the trials' figures (Trial's field `name`), over the runs."""
    return [number(getattr(run.trial, name)) for run in runs]


def repetitions(config: Config, args: argparse.Namespace) -> list[RunFigures]:
    print(
        f"{config.label}: {args.reps} runs of {args.count:,} messages at {args.rate:,.0f}/s",
        flush=True,
    )
    runs = [
        run_once(config, args.count, args.rate, args.warmup_s, args.results)
        for _ in range(args.reps)
    ]
    print(f"{config.label} steady-state p50 ms: {spread(values(runs, 'p50_ms'))}")
    print(f"{config.label} steady-state p99 ms: {spread(values(runs, 'p99_ms'))}")
    print(f"{config.label} send lag p99 ms: {spread(values(runs, 'send_lag_p99_ms'))}")
    print(
        f"{config.label} overloaded: {[r.trial.overloaded for r in runs]}, "
        f"status: {[r.trial.status for r in runs]}"
    )
    return runs


def sustainable_rate(
    config: Config, args: argparse.Namespace
) -> tuple[float | None, float | None, list[RunFigures]]:
    """The study's capacity search (analysis/study/capacity.py) over this bench's runs.
    Returns the highest rate that passed, the lowest that failed, and the runs."""
    limit = config.p99_limit_ms if config.p99_limit_ms is not None else args.p99_limit_ms
    spec = CapacitySpec(
        p99_bound_ms=limit,
        from_rate=args.search_from,
        runs=args.search_runs,
        steady_s=args.search_steady_s,
        warmup_s=args.warmup_s,
    )
    runs: list[RunFigures] = []

    def measure(rate: float) -> Trial:
        runs.append(run_once(config, spec.count(rate), rate, args.warmup_s, args.results))
        return runs[-1].trial

    found = search(measure, spec)
    good, bad = found.rate, found.lowest_failing
    print(
        f"{config.label} sustainable rate on the test hosts: "
        f"{f'{good:,.0f}/s' if good is not None else 'none found'} "
        f"(lowest failing: {f'{bad:,.0f}/s' if bad is not None else 'none found'}; criterion: "
        f"cleared by the overload check and steady-state p99 < {limit:,.0f} ms)",
        flush=True,
    )
    return good, bad, runs


RUN_COLUMNS = ["configuration", "run", *fault_figures.TRIAL_COLUMNS, "status", "wall s"]


def run_row(run: RunFigures) -> list[Any]:
    trial = run.trial
    return [
        run.config.label,
        trial.run_id,
        *fault_figures.trial_cells(trial),
        trial.status,
        round(trial.wall_s),
    ]


def settings_read_back(results: Path, run: RunFigures) -> str:
    """The settings that shape latency, as the job ran them (run.json settings)."""
    settings = (
        json.loads((results / run.trial.run_id / "run.json").read_text()).get("settings") or {}
    )
    keys = (
        "trigger",
        "trigger_interval_ms",
        "checkpoint_interval_ms",
        "source_tasks",
        "parallelism",
        "workers",
        "sink.linger_ms",
        "kafka.security_protocol",
        "tls_internal",
    )
    return ", ".join(f"{key} {settings[key]}" for key in keys if key in settings)


def result_file(
    args: argparse.Namespace,
    steady: dict[Config, list[RunFigures]],
    searched: dict[Config, tuple[float | None, float | None, list[RunFigures]]],
) -> dict[str, Any]:
    every = [run for runs in steady.values() for run in runs] + [
        run for *_, runs in searched.values() for run in runs
    ]
    trials = [run.trial for run in every]  # what the header needs of a run: its run_id
    commit, dirty = fault_figures.runs_commit(args.results, trials)  # type: ignore[arg-type]
    header = fault_figures.result_header("make bench-engines", args.results, trials)  # type: ignore[arg-type]
    tables: list[dict[str, Any]] = []
    common = [
        "The test hosts are network namespaces on one machine and share its cores.",
        *(["The kit's tree was dirty when measured."] if dirty else []),
    ]
    if steady:
        tables.append(
            {
                "title": f"Steady-state latency at {args.rate:,.0f} msg/s",
                "description": (
                    f"{args.reps} runs of {args.count:,} messages at {args.rate:,.0f}/s per "
                    f"configuration, no fault, {args.warmup_s} s of warm-up left out. Latency "
                    "from the producer's send to the collector's receipt, each on its host's "
                    "clock corrected by the run's measured offsets (first-summary.json), "
                    "mean (min-max) over the runs."
                ),
                "columns": [
                    "configuration",
                    "runs",
                    "p50 ms",
                    "p99 ms",
                    "send lag p99 ms",
                    "output /s",
                    "overloaded",
                    "settings as run",
                ],
                "rows": [
                    [
                        config.label,
                        len(runs),
                        cell(values(runs, "p50_ms")),
                        cell(values(runs, "p99_ms")),
                        cell(values(runs, "send_lag_p99_ms"), 1),
                        cell(values(runs, "output_per_s")),
                        ", ".join(fault_figures.YES_NO[r.trial.overloaded] for r in runs),
                        settings_read_back(args.results, runs[0]),
                    ]
                    for config, runs in steady.items()
                ],
                "notes": [
                    "overloaded: the collector's backlog check per run (unknown: too few lag "
                    "samples to judge).",
                    *common,
                ],
            }
        )
    if searched:
        limits = {
            config: config.p99_limit_ms if config.p99_limit_ms is not None else args.p99_limit_ms
            for config in searched
        }
        contradicted = [
            config.label
            for config, (good, bad, _) in searched.items()
            if good is not None and bad is not None and good > bad
        ]
        tables.append(
            {
                "title": "Sustainable rate",
                "description": (
                    f"The highest input rate at which a run of {args.warmup_s} s of warm-up and "
                    f"{args.search_steady_s} s of steady state was cleared by the overload "
                    "check and kept steady-state p99 under the configuration's bound; at "
                    f"most {args.search_runs} runs per configuration, doubling from "
                    f"{args.search_from:,.0f}/s until a run fails, then bisecting."
                ),
                "columns": [
                    "configuration",
                    "p99 bound ms",
                    "sustainable /s",
                    "lowest failing /s",
                    "rates tried /s",
                ],
                "rows": [
                    [
                        config.label,
                        round(limits[config]),
                        None if good is None else round(good),
                        None if bad is None else round(bad),
                        "; ".join(f"{r.trial.rate:,.0f}" for r in runs),
                    ]
                    for config, (good, bad, runs) in searched.items()
                ],
                "notes": [
                    "An empty cell: no rate tried passed (sustainable) or failed (lowest "
                    "failing); with no rate failed, the sustainable rate is a lower bound. The "
                    "producer's send lag at each rate is in the runs' table.",
                    *(
                        [
                            "Not monotone: a rate passed above one that failed for "
                            + ", ".join(contradicted)
                            + "; the runs (below) show where."
                        ]
                        if contradicted
                        else []
                    ),
                    *common,
                ],
            }
        )
    tables.append(
        {"title": "Every run", "columns": RUN_COLUMNS, "rows": [run_row(r) for r in every]}
    )
    return {**header, "commit": commit, "tables": tables}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--engines",
        nargs="+",
        type=Config.parse,
        default=[Config("flink"), Config("storm")],
        metavar="ENGINE[:KEY=VALUE,...]",
        help="an engine, with settings of its manifest: spark:spark_trigger=continuous",
    )
    parser.add_argument("--reps", type=int, default=3, help="0 skips the repetitions")
    parser.add_argument("--count", type=int, default=60_000)
    parser.add_argument("--rate", type=float, default=2_000)
    parser.add_argument("--warmup-s", type=int, default=10)
    parser.add_argument("--search-runs", type=int, default=6, help="0 skips the rate search")
    parser.add_argument("--search-from", type=float, default=4_000)
    parser.add_argument("--search-steady-s", type=int, default=20)
    parser.add_argument("--p99-limit-ms", type=float, default=P99_LIMIT_MS)
    parser.add_argument(
        "--inventory", type=Path, default=lab_playbooks.INVENTORY, help="the test hosts' inventory"
    )
    parser.add_argument(
        "--results", type=Path, default=lab_playbooks.REPO / "bench" / "out" / "engine-figures"
    )
    parser.add_argument(
        "--out", type=Path, default=lab_playbooks.REPO / "bench" / "out" / "engine-figures"
    )
    args = parser.parse_args()
    lab_playbooks.INVENTORY = args.inventory.resolve()
    # Storm's worker traffic has no TLS: Flink with it is not on equal footing (docs/engines.md).
    engines = {config.engine for config in args.engines}
    if len(engines) > 1 and "flink" in engines and lab_playbooks.flink_tls_internal():
        sys.exit(
            f"the inventory {args.inventory} runs Flink with internal TLS (flink_tls_internal, "
            "which the test lab turns on) and the other engines have none between their "
            "workers, so the engines' figures would not be on equal footing: give an inventory "
            "with flink_tls_internal and flink_tls_rest false (a copy of inventory/lab with "
            "them changed), run playbooks/site.yml with it, then this again with --inventory"
        )
    args.results.mkdir(parents=True, exist_ok=True)
    steady = {config: repetitions(config, args) for config in args.engines} if args.reps else {}
    searched = (
        {config: sustainable_rate(config, args) for config in args.engines}
        if args.search_runs
        else {}
    )
    fault_figures.write_result(result_file(args, steady, searched), args.out, "engine-figures.json")


if __name__ == "__main__":
    main()
