"""streamlab-study SPEC.yml [-i INVENTORY] [--scale F] [--dry-run]: run a study (docs/studies.md).

Exit codes: 0 every run complete and the report written; 1 some runs are not complete (the
report covers the complete ones) or the study stopped at its failure limit; 2 a bad spec or
argument (nothing ran); 130 interrupted (start it again to resume).
"""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path

from analysis.study import kit as kit_module
from analysis.study import plan as plan_module
from analysis.study import spec as spec_module
from analysis.study.capacity import capacity_text
from analysis.study.progress import duration_text
from analysis.study.runner import (
    COMPLETE,
    LOGS_DIR,
    RunExperiment,
    StudyError,
    StudyOutcome,
    StudyRunner,
    load_record,
    run_status,
)

EXIT_OK, EXIT_RUNS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
PROG = "streamlab-study"


def scale_factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(
            f"{text} must be above 0 and at most 1 (0.1 runs every duration 10 times shorter)"
        )
    return value


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run playbooks/experiment.yml for every combination of a study spec, "
        "resuming where an earlier start stopped, and compare the runs (docs/studies.md).",
    )
    parser.add_argument("spec", type=Path, metavar="SPEC.yml", help="the study spec")
    parser.add_argument(
        "-i",
        "--inventory",
        type=Path,
        help="the lab's inventory (default: ansible.cfg's, as for ansible-playbook)",
    )
    parser.add_argument(
        "--scale",
        type=scale_factor,
        default=1.0,
        help="multiply every duration the spec gives by this factor (0 < F <= 1) to fit a "
        "smaller lab; the study gets its own name and its report says the scale",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list the runs and the estimated duration only"
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=kit_module.REPO / "results",
        help="results directory (default: the checkout's results/)",
    )
    parser.add_argument(
        "--max-failures",
        type=positive_int,
        help="stop after this many runs that are not complete (default: the spec's "
        f"max_failures, else {spec_module.DEFAULT_MAX_FAILURES})",
    )
    return parser.parse_args(argv)


def error(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def dry_run(plan: plan_module.Plan, runner: StudyRunner, seed_note: str, inventory: str) -> int:
    measured = (runner.load_record() or {}).get("capacity") or {}
    runner.refuse_changed_capacity(measured)
    todo = runner.check_existing()
    forecast = runner.forecast(todo)
    scale = "" if plan.scale == 1 else f", scale {plan.scale:g}"
    print(f"study {plan.study} ({plan.spec.source}{scale}): {len(plan.runs)} runs")
    print(f"run order: shuffled with seed {plan.order_seed} ({seed_note})")
    print(f"inventory: {inventory}")
    print(f"results: {runner.results_dir}/<run id>, report in {runner.study_dir}")
    for value in plan.scaled:
        print(f"  scaled {value.key}: {value.before} -> {value.after}")
    capacity = plan.spec.capacity
    if capacity is not None:
        for engine in plan.spec.engines:
            entry = measured.get(engine)
            if entry and runner.reusable(engine, entry):
                measured_text = capacity_text(entry)
                print(f"  capacity of {engine}: {measured_text}, measured by an earlier start")
            else:
                longest = capacity.runs * (capacity.warmup_s + capacity.steady_s)
                print(
                    f"  capacity of {engine}: to measure first, at most {capacity.runs} "
                    f"fault-free runs of {capacity.warmup_s + capacity.steady_s} s of producing "
                    f"from {capacity.from_rate:,.0f}/s (at most {duration_text(longest)} of "
                    "producing, plus each run's overhead; in the estimate below)"
                )
    if plan.spec.load is not None:
        rates = ", ".join(f"{e} {r:,.0f}/s" for e, r in plan.rates.items()) or "not known yet"
        print(
            f"  load {plan.spec.load:g} of each engine's capacity, {plan.spec.produce_s} s of "
            f"producing per run: {rates}"
        )
    width = max(len(run.run_id) for run in plan.runs)
    for position, run in enumerate(plan.runs, start=1):
        status = run_status(runner.results_dir / run.run_id)
        if status == COMPLETE:
            note = "complete, skipped"
        else:
            state = "to run" if status is None else "to repeat (incomplete, moved aside)"
            note = f"{state}, ~{duration_text(forecast.estimates[run.run_id])}"
        print(f"  {position:>3}  {run.run_id.ljust(width)}  {note}")
    engines = {run.run_id: run.engine for run in plan.runs}
    sources = sorted({(engines[k], v) for k, v in forecast.sources.items()})
    if sources:
        print("each run's estimate: producing, the commit wait and the quiet period, plus its")
        print("overhead taken from " + "; ".join(f"{e}: {source}" for e, source in sources))
    print(
        f"to run: {len(todo)} of {len(plan.runs)}, estimated "
        f"{duration_text(forecast.remaining_s())} with the analysis after the last run "
        f"(~{duration_text(forecast.analysis_s)}; at most {runner.max_failures} failures)"
    )
    return EXIT_OK


def _print_comparison(comparison_csv: Path) -> None:
    """The groups' means (comparison.csv) as a plain table on the terminal."""
    from analysis.study.report import comparison_table

    if comparison_csv.is_file():
        print("Mean over each group's complete runs (overloaded and clock-moved runs left out):")
        print(comparison_table(comparison_csv))


def main(
    argv: Sequence[str] | None = None,
    kit: kit_module.Kit | None = None,
    run_experiment: RunExperiment | None = None,
) -> int:
    """kit and run_experiment replace this checkout and ansible-runner (for the tests)."""
    args = parse_args(argv)
    try:
        kit = kit or kit_module.Kit.load()
        spec = spec_module.load(args.spec, kit)
        study = plan_module.study_name(spec, args.scale)
        results_dir = args.results.resolve()
        record = load_record(results_dir / study) or {}
        if spec.order_seed is not None:
            order_seed, seed_note = spec.order_seed, "the spec's order_seed"
        elif isinstance(record.get("order_seed"), int):
            order_seed, seed_note = record["order_seed"], "recorded when the study first started"
        else:
            order_seed, seed_note = secrets.randbelow(2**31), "new; recorded in study.json"
        plan = plan_module.make_plan(spec, kit, args.scale, order_seed)
    except (kit_module.KitError, spec_module.SpecError, StudyError) as problem:
        return error(str(problem))
    if args.inventory is not None:
        inventory: Path | None = args.inventory.resolve()
        if not inventory.exists():
            return error(f"-i {args.inventory}: no such inventory")
        inventory_text = str(inventory)
    else:
        inventory = None
        inventory_text = f"{kit.default_inventory()} (ansible.cfg's)"
    from analysis.study.ansible import AnsibleExperiment
    from analysis.study.interrupt import StopSwitch
    from analysis.study.progress import RichProgress

    switch = StopSwitch()
    runner = StudyRunner(
        plan,
        kit,
        results_dir,
        run_experiment
        or AnsibleExperiment(kit, inventory, results_dir / plan.study / LOGS_DIR, switch),
        RichProgress(),
        max_failures=args.max_failures,
        inventory=inventory_text,
        stop_requested=switch,
    )
    from analysis.study.report import kit_change_note

    done = [r.run_id for r in plan.runs if run_status(results_dir / r.run_id) == COMPLETE]
    if note := kit_change_note(results_dir, done, kit_module.checkout_state(kit.root)):
        print(f"{PROG}: note: {note}", file=sys.stderr)
    # Under load:, the rates of the capacities an earlier start measured that still stand.
    rates = runner.recorded_rates()
    if rates:
        runner.plan = plan = plan_module.with_rates(plan, rates)
    try:
        if args.dry_run:
            return dry_run(plan, runner, seed_note, inventory_text)
        # One start at a time, from the first run through the report (and its analysis).
        with runner.locked():
            with switch.installed():
                outcome = runner.run()
            # Under load:, the runner set the runs' rates from the measured capacities.
            return _finish(runner.plan, runner, results_dir, outcome)
    except StudyError as problem:
        return error(str(problem))
    except KeyboardInterrupt:
        print(
            f"{PROG}: interrupted; start it again to resume (complete runs are kept, "
            "the interrupted one is repeated)",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


# Where a study stops before its report, its complete runs have no summary.json yet.
UNSUMMARISED = (
    "The complete runs are summarised when the study writes its report (or run `python -m "
    "analysis summarize` on them)."
)


def _finish(
    plan: plan_module.Plan, runner: StudyRunner, results_dir: Path, outcome: StudyOutcome
) -> int:
    """After the runs: the report, or why there is none."""
    if outcome.stopped_by_request:
        print(
            f"{PROG}: stopped as asked; {len(outcome.complete)} of {len(plan.runs)} runs "
            f"complete. Start it again to run the rest. {UNSUMMARISED}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if outcome.stopped_early:
        print(
            f"{PROG}: stopped after {len(outcome.failed)} runs that are not complete "
            f"(the limit); {len(outcome.complete)} of {len(plan.runs)} complete. See "
            f"{runner.study_dir / 'study.json'} and logs/; start it again to resume. "
            f"{UNSUMMARISED}",
            file=sys.stderr,
        )
        return EXIT_RUNS
    from analysis.study.report import ReportError, write_report

    try:
        report = write_report(plan, results_dir, outcome)
    except ReportError as problem:
        print(f"{PROG}: no report: {problem}", file=sys.stderr)
        return EXIT_RUNS
    except KeyboardInterrupt:
        print(
            f"{PROG}: interrupted while writing the report; every run is kept: start the "
            "study again to write it",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if report is None:
        print(f"{PROG}: no run is complete: nothing to compare", file=sys.stderr)
        return EXIT_RUNS
    _print_comparison(report.parent / "comparison.csv")
    print(f"wrote {report} (comparison.md, comparison.csv, plots/ beside it)")
    if not outcome.finished:
        print(
            f"{PROG}: {len(outcome.failed) + len(outcome.not_run)} runs are not complete; "
            "start the study again to repeat them",
            file=sys.stderr,
        )
        return EXIT_RUNS
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
