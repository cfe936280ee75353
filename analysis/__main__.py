"""python -m analysis: summarise one run directory, or compare several.

python -m analysis summarize RUN_DIR... [--master URL] [--conf KEY=VALUE ...] [--driver-memory 1g]
python -m analysis compare RUN_DIR... --out DIR
python -m analysis advise RESULTS_DIR... --mtbf-s SECONDS [--max-p99-ms 1000] [--out DIR]

Exit codes: 0 done, 1 bad input (the message names the file and line), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_OK, EXIT_INPUT, EXIT_USAGE = 0, 1, 2


def conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (a Spark property), got {text!r}")
    return key.strip(), value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m analysis",
        description="Summarise streamlab run directories with Spark (docs/metrics.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    summarize = commands.add_parser(
        "summarize",
        help="write RUN_DIR/summary.json, report.md, report.html and plots/",
        description="Compute each run's figures (docs/metrics.md) and write its reports. "
        "Several runs share one Spark application (one start of its JVM and executors).",
    )
    summarize.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    summarize.add_argument(
        "--master",
        default="local[*]",
        help="Spark master: local[*] (default) or spark://HOST:7077 (standalone cluster; every "
        "worker must see RUN_DIR at the same path)",
    )
    summarize.add_argument(
        "--conf",
        type=conf_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark property (repeatable), e.g. spark.driver.host=10.0.0.5",
    )
    summarize.add_argument(
        "--driver-memory",
        default="1g",
        help="heap of the driver JVM (default 1g); in local mode it also holds the executors' "
        "cache, which spills to disk beyond it, so memory stays flat however many records",
    )
    summarize.add_argument(
        "--no-plots", action="store_true", help="skip the plots (the reports have none)"
    )
    compare = commands.add_parser(
        "compare",
        help="one table and the study's plots over several summarised runs",
        description="Compare summarised runs, grouped by engine and parameters.",
    )
    compare.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    compare.add_argument("--out", type=Path, required=True, help="output directory")
    from analysis.advise import DEFAULT_MAX_P99_MS

    advise = commands.add_parser(
        "advise",
        help="the optimal Flink checkpoint interval for a failure rate, beside the measured best",
        description="From Flink's measured checkpoint durations and a mean time between "
        "failures: the Young/Daly and Lambert W optimal intervals, their utilisation, and the "
        "interval that did best in the runs (docs/studies.md).",
    )
    advise.add_argument(
        "results",
        type=Path,
        nargs="+",
        metavar="RESULTS_DIR",
        help="a run directory, a study's directory (results/<study>/) or a directory of runs",
    )
    advise.add_argument(
        "--mtbf-s",
        type=positive_float,
        required=True,
        metavar="SECONDS",
        help="mean time between failures in seconds",
    )
    advise.add_argument(
        "--max-p99-ms",
        type=positive_float,
        default=DEFAULT_MAX_P99_MS,
        help=f"acceptable mean p99 latency of a measured interval (default {DEFAULT_MAX_P99_MS:g})",
    )
    advise.add_argument("--out", type=Path, help="also write advice.md and advice.json here")
    return parser.parse_args(argv)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def run_summarize(args: argparse.Namespace) -> int:
    from analysis import report, session, summarize
    from analysis.io import InputError

    duplicated = sorted({str(d) for d in args.run_dirs if args.run_dirs.count(d) > 1})
    if duplicated:
        print(
            f"python -m analysis summarize: error: {', '.join(duplicated)} named twice; "
            "name each run once",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:  # every run before Spark starts: fast errors, and nothing written on a bad one
        runs = [(run_dir, summarize.prepare(run_dir)) for run_dir in args.run_dirs]
    except InputError as error:
        print(f"python -m analysis summarize: error: {error}", file=sys.stderr)
        return EXIT_INPUT
    spark = session.build(args.master, dict(args.conf), args.driver_memory)
    failed = 0
    try:
        # A run's outputs are written once all its figures are computed: a run with a bad line
        # is left untouched (the error names the file and line), and the others are summarised.
        for run_dir, inputs in runs:
            try:
                summary, plot_data = summarize.compute(spark, inputs)
            except InputError as error:
                print(f"python -m analysis summarize: error: {error}", file=sys.stderr)
                failed += 1
                continue
            written = summarize.write_outputs(
                run_dir, summary, None if args.no_plots else plot_data
            )
            if len(runs) > 1:
                print(f"== {run_dir.name}")
            print(report.headline(summary))
            print(f"wrote {', '.join(str(path) for path in written)}")
    finally:
        spark.stop()
    return EXIT_INPUT if failed else EXIT_OK


def run_compare(args: argparse.Namespace) -> int:
    from analysis import compare
    from analysis.io import InputError

    try:
        groups = compare.compare(args.run_dirs, args.out)
    except InputError as error:
        print(f"python -m analysis compare: error: {error}", file=sys.stderr)
        return EXIT_INPUT
    print(compare.printable(groups))
    print(f"wrote {args.out / 'comparison.md'}, {args.out / 'comparison.csv'}")
    return EXIT_OK


def run_advise(args: argparse.Namespace) -> int:
    from analysis import advise
    from analysis.io import InputError

    try:
        advice = advise.advise(args.results, args.mtbf_s, args.max_p99_ms)
    except InputError as error:
        print(f"python -m analysis advise: error: {error}", file=sys.stderr)
        return EXIT_INPUT
    print(advise.markdown(advice))
    if args.out is not None:
        written = advise.write(advice, args.out)
        print(f"wrote {', '.join(str(path) for path in written)}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "summarize":
        return run_summarize(args)
    if args.command == "advise":
        return run_advise(args)
    return run_compare(args)


if __name__ == "__main__":
    sys.exit(main())
