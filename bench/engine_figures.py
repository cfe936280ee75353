#!/usr/bin/env python3
"""The engines' figures on the test hosts (issue 10): repetitions at a fixed rate, then each
engine's sustainable rate.

1. For each engine, REPS runs of COUNT messages at RATE msg/s: steady-state latency p50/p99
   (after the warm-up; mean and spread over the repetitions), producer send lag, output rate and
   the overload flag, from each run's first-summary.json.
2. For each engine, the highest rate (at most SEARCH_RUNS runs, doubling up from --search-from
   until a run fails the criterion, then bisecting) at which the overload check cleared the run
   (`overloaded` false: the backlog slope's whole 95 % interval at or below the threshold; a run
   it could not judge, `overloaded` null, fails the criterion) and steady-state p99 stays under
   1 s.

Needs converged test hosts (`make lab`, then site.yml). Run as root from the repository:
`make bench-engines` (or `.venv/bin/python bench/engine_figures.py --help`). Every figure
printed is measured in this run; the runs stay in --results for a closer look.
All test hosts share this machine's cores: the figures describe that lab, not a real cluster.
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

import lab_playbooks

P99_LIMIT_MS = 1000


@dataclass(frozen=True)
class RunFigures:
    run_id: str
    rate: float
    p50: float
    p99: float
    send_lag_p99: float
    output_rate: float
    overloaded: bool | None
    status: str
    wall_s: float

    @property
    def sustainable(self) -> bool:
        return self.status == "complete" and self.overloaded is False and self.p99 < P99_LIMIT_MS


def run_once(engine: str, count: int, rate: float, warmup_s: int, results: Path) -> RunFigures:
    run_id = f"bench-{engine}-{int(rate)}-{uuid.uuid4().hex[:6]}"
    extravars = {
        "engine": engine,
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
    wall = time.monotonic() - started
    summary = json.loads((results / run_id / "first-summary.json").read_text())
    latency = summary["latency_ms"]
    figures = RunFigures(
        run_id=run_id,
        rate=rate,
        p50=latency["p50"],
        p99=latency["p99"],
        send_lag_p99=summary["send_lag_ms"]["p99"],
        output_rate=summary["output_rate"]["messages_per_s"],
        overloaded=summary["overload"]["overloaded"],
        status=summary["status"],
        wall_s=wall,
    )
    print(
        f"  {engine} {rate:>7,.0f}/s {run_id}: "
        f"p50 {figures.p50:,.0f} ms, p99 {figures.p99:,.0f} ms, "
        f"send lag p99 {figures.send_lag_p99:,.1f} ms, output {figures.output_rate:,.0f}/s, "
        f"overloaded={figures.overloaded}, {figures.status}, {wall:.0f} s",
        flush=True,
    )
    return figures


def spread(values: list[float]) -> str:
    mean = statistics.fmean(values)
    low, high = min(values), max(values)
    relative = (high - low) / mean * 100 if mean else 0.0
    return f"mean {mean:,.0f} (min {low:,.0f}, max {high:,.0f}, range {relative:.0f}% of the mean)"


def repetitions(engine: str, args: argparse.Namespace) -> None:
    print(
        f"{engine}: {args.reps} runs of {args.count:,} messages at {args.rate:,.0f}/s", flush=True
    )
    runs = [
        run_once(engine, args.count, args.rate, args.warmup_s, args.results)
        for _ in range(args.reps)
    ]
    print(f"{engine} steady-state p50 ms: {spread([r.p50 for r in runs])}")
    print(f"{engine} steady-state p99 ms: {spread([r.p99 for r in runs])}")
    print(f"{engine} send lag p99 ms: {spread([r.send_lag_p99 for r in runs])}")
    print(
        f"{engine} overloaded: {[r.overloaded for r in runs]}, status: {[r.status for r in runs]}"
    )


def sustainable_rate(engine: str, args: argparse.Namespace) -> None:
    """Double the rate until a run fails the criterion, then bisect; at most search_runs runs."""
    good: float | None = None
    bad: float | None = None
    rate = args.search_from
    for _ in range(args.search_runs):
        # Long enough for the warm-up plus at least 20 s of steady state at every rate.
        count = int(rate * (args.warmup_s + args.search_steady_s))
        figures = run_once(engine, count, rate, args.warmup_s, args.results)
        if figures.sustainable:
            good = rate
        else:
            bad = rate
        if bad is None:
            rate *= 2
        elif good is None:
            rate = bad / 2
        else:
            rate = (good + bad) / 2
        rate = max(float(round(rate, -2)), 100.0)
    print(
        f"{engine} sustainable rate on the test hosts: "
        f"{f'{good:,.0f}/s' if good is not None else 'none found'} "
        f"(lowest failing: {f'{bad:,.0f}/s' if bad is not None else 'none found'}; criterion: "
        f"cleared by the overload check and steady-state p99 < {P99_LIMIT_MS} ms)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=["flink", "storm"])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--count", type=int, default=60_000)
    parser.add_argument("--rate", type=float, default=2_000)
    parser.add_argument("--warmup-s", type=int, default=10)
    parser.add_argument("--search-runs", type=int, default=6, help="0 skips the rate search")
    parser.add_argument("--search-from", type=float, default=4_000)
    parser.add_argument("--search-steady-s", type=int, default=20)
    parser.add_argument(
        "--results", type=Path, default=lab_playbooks.REPO / "bench" / "out" / "engine-figures"
    )
    args = parser.parse_args()
    # Storm's worker traffic has no TLS: Flink with it is not on equal footing (docs/engines.md).
    if {"flink", "storm"} <= set(args.engines) and lab_playbooks.flink_tls_internal():
        sys.exit(
            "the test hosts run Flink with internal TLS (flink_tls_internal, which the test lab "
            "turns on) and Storm has none between its workers, so the engines' figures would not "
            "be on equal footing: set flink_tls_internal and flink_tls_rest to false in "
            "inventory/lab/group_vars/all.yml, run playbooks/site.yml, then this again"
        )
    args.results.mkdir(parents=True, exist_ok=True)
    for engine in args.engines:
        repetitions(engine, args)
    if args.search_runs:
        for engine in args.engines:
            sustainable_rate(engine, args)


if __name__ == "__main__":
    main()
