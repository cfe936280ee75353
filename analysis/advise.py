"""advise: the checkpoint interval a failure rate calls for, next to the one that did best.

From Flink's own checkpoint durations (engine/flink-checkpoints.json, the REST API's
/jobs/<id>/checkpoints) it takes the checkpoint cost c, and with a mean time between failures M
(lambda = 1/M) computes two optimal intervals:

- Young/Daly, first order: T = sqrt(2 c M).
- The exponential-failure model: failures arrive at rate lambda, a failure loses the work since
  the last completed checkpoint, and each interval T spends c of its length checkpointing. The
  expected useful fraction of time (the utilisation) is U(T) = lambda (T - c) / (exp(lambda T) - 1),
  which is largest at T* = (c lambda + W(-exp(-c lambda - 1)) + 1) / lambda, W the principal
  branch of the Lambert W function (W >= -1; the other branch gives T* < 0).

Beside them: the measured runs grouped by checkpoint interval, and the interval that did best
(lowest duplicate rate and recovery time among those whose mean p99 latency is acceptable).
Reads only small JSON files (run.json, summary.json, engine/flink-checkpoints.json).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analysis import compare
from analysis.io import RUN_JSON, InputError, read_optional_json, read_run
from analysis.report import NO_RECOVERY, write_atomic, write_json

CHECKPOINTS_FILE = "engine/flink-checkpoints.json"
# A study's directory (results/<study>/) lists its runs here; the run directories are its siblings.
STUDY_RECORD = "study.json"
INTERVAL_PARAMETER = "checkpoint_interval_s"
# The kit's criterion for a sustainable rate (bench/engine_figures.py): steady-state p99 < 1 s.
DEFAULT_MAX_P99_MS = 1000.0
LAMBERT_ITERATIONS = 50


# ---------------------------------------------------------------- the models


def lambert_w(x: float) -> float:
    """The principal branch W0 of the Lambert W function: w with w exp(w) = x, w >= -1.

    Defined for x >= -1/e. Halley's iteration from a start that is already close: the series at
    the branch point near -1/e (where the function has a square-root shape), log(1 + x) for
    moderate x, log(x) - log(log(x)) for large x.
    """
    branch_point = -1 / math.e
    if math.isnan(x) or x < branch_point:
        if x < branch_point and branch_point - x < 1e-15:  # rounding at the branch point
            return -1.0
        raise ValueError(f"W0(x) is defined for x >= -1/e = {branch_point!r}, not {x!r}")
    if x == 0:
        return 0.0
    if x < -0.25:
        p = math.sqrt(max(0.0, 2 * (math.e * x + 1)))
        w = -1 + p - p * p / 3 + 11 / 72 * p**3
    elif x < 3:
        w = math.log1p(x)
    else:
        log_x = math.log(x)
        w = log_x - math.log(log_x)
    for _ in range(LAMBERT_ITERATIONS):
        if w == -1:
            return w
        exp_w = math.exp(w)
        residual = w * exp_w - x
        step = residual / (exp_w * (w + 1) - (w + 2) * residual / (2 * w + 2))
        w -= step
        if abs(step) <= 1e-15 * (1 + abs(w)):
            break
    return w


def _check_model_inputs(cost_s: float, mtbf_s: float) -> None:
    if not cost_s > 0:
        raise ValueError(f"checkpoint cost {cost_s!r} s must be above 0")
    if not mtbf_s > 0:
        raise ValueError(f"mean time between failures {mtbf_s!r} s must be above 0")


def young_daly_interval(cost_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum sqrt(2 c M)."""
    _check_model_inputs(cost_s, mtbf_s)
    return math.sqrt(2 * cost_s * mtbf_s)


def lambert_interval(cost_s: float, mtbf_s: float) -> float:
    """T* = (c lambda + W0(-exp(-c lambda - 1)) + 1) / lambda, the maximum of utilisation()."""
    _check_model_inputs(cost_s, mtbf_s)
    rate = 1 / mtbf_s
    cost_rate = cost_s * rate
    return (cost_rate + lambert_w(-math.exp(-cost_rate - 1)) + 1) / rate


def utilisation(interval_s: float, cost_s: float, mtbf_s: float) -> float:
    """Expected useful fraction of time, lambda (T - c) / (exp(lambda T) - 1); 0 when T <= c."""
    _check_model_inputs(cost_s, mtbf_s)
    if interval_s <= cost_s:
        return 0.0
    rate = 1 / mtbf_s
    return rate * (interval_s - cost_s) / math.expm1(rate * interval_s)


# ---------------------------------------------------------------- the measurements


@dataclass(frozen=True)
class CheckpointCost:
    """Flink checkpoint durations of one run: the mean of its completed checkpoints."""

    run_id: str
    interval_s: float | None
    mean_s: float
    completed: int


def checkpoint_cost(run_dir: Path, run: dict[str, Any]) -> CheckpointCost | None:
    """The run's mean end-to-end checkpoint duration, None without completed checkpoints.

    Flink's summary covers every completed checkpoint of the job; the history (its latest ones
    only) is the fallback when the summary has no average.
    """
    data = read_optional_json(run_dir / CHECKPOINTS_FILE)
    if not isinstance(data, dict):
        return None
    interval = (run.get("parameters") or {}).get(INTERVAL_PARAMETER)
    interval_s = float(interval) if _is_number(interval) else None
    completed = (data.get("counts") or {}).get("completed")
    average_ms = ((data.get("summary") or {}).get("end_to_end_duration") or {}).get("avg")
    if _is_number(completed) and completed > 0 and _is_number(average_ms):
        return CheckpointCost(run["run_id"], interval_s, average_ms / 1000, int(completed))
    durations = [
        entry["end_to_end_duration"]
        for entry in data.get("history") or []
        if isinstance(entry, dict)
        and entry.get("status") == "COMPLETED"
        and _is_number(entry.get("end_to_end_duration"))
    ]
    if not durations:
        return None
    mean_s = statistics.fmean(durations) / 1000
    return CheckpointCost(run["run_id"], interval_s, mean_s, len(durations))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class IntervalResult:
    """The measured runs at one checkpoint interval (means over the runs)."""

    interval_s: float
    runs: list[str]
    duplicate_rate: float | None
    recovery_s: float | None
    without_recovery: int
    latency_p99_ms: float | None
    checkpoint_cost_s: float | None
    utilisation: float
    acceptable_latency: bool = False


@dataclass
class Advice:
    mtbf_s: float
    max_p99_ms: float
    checkpoint_cost_s: float
    checkpoints: int
    cost_runs: list[str]
    young_daly_s: float
    young_daly_utilisation: float
    lambert_s: float
    lambert_utilisation: float
    measured: list[IntervalResult]
    best_measured_s: float | None
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def run_directories(paths: Sequence[Path]) -> list[Path]:
    """Each path is a run directory (it has run.json), a study's directory (study.json lists
    its runs, which sit beside it), or a directory holding run directories."""
    found: list[Path] = []
    for path in paths:
        if not path.is_dir():
            raise InputError(path, "not a directory")
        if (path / RUN_JSON).is_file():
            found.append(path)
        elif (path / STUDY_RECORD).is_file():
            found.extend(_study_runs(path))
        else:
            inside = sorted(p for p in path.iterdir() if (p / RUN_JSON).is_file())
            if not inside:
                raise InputError(
                    path, "holds no run directory (none of its folders has a run.json)"
                )
            found.extend(inside)
    return list(dict.fromkeys(found))


def _study_runs(study_dir: Path) -> list[Path]:
    record_path = study_dir / STUDY_RECORD
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        run_ids = [run["run_id"] for run in record["runs"]]
    except (ValueError, KeyError, TypeError) as error:
        raise InputError(record_path, f"not a study record ({error})") from error
    runs = [study_dir.parent / run_id for run_id in run_ids]
    present = [run for run in runs if (run / RUN_JSON).is_file()]
    if not present:
        raise InputError(record_path, "none of the study's runs has a result directory yet")
    return present


def _rank(values: Sequence[float | None]) -> list[int]:
    """Rank (0 best) of each value, lowest first; None ranks last."""
    order = sorted(range(len(values)), key=lambda i: (values[i] is None, values[i] or 0.0))
    ranks = [0] * len(values)
    for rank, index in enumerate(order):
        ranks[index] = rank
    return ranks


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _best_interval(results: Sequence[IntervalResult]) -> float | None:
    """Lowest duplicate rate and recovery time (sum of the two ranks; a group with a run that
    shows no recovery ranks last on recovery) among the groups with acceptable latency; ties go to
    the lower duplicate rate, then the shorter interval."""
    candidates = [r for r in results if r.acceptable_latency]
    if not candidates:
        return None
    duplicate_ranks = _rank([r.duplicate_rate for r in candidates])
    recovery_ranks = _rank([None if r.without_recovery else r.recovery_s for r in candidates])
    best = min(
        range(len(candidates)),
        key=lambda i: (
            duplicate_ranks[i] + recovery_ranks[i],
            duplicate_ranks[i],
            candidates[i].interval_s,
        ),
    )
    return candidates[best].interval_s


def advise(paths: Sequence[Path], mtbf_s: float, max_p99_ms: float = DEFAULT_MAX_P99_MS) -> Advice:
    """Raises InputError when the runs give no checkpoint cost or a Flink run has no summary."""
    if not mtbf_s > 0:
        raise ValueError(f"--mtbf-s {mtbf_s!r} must be above 0 (seconds between failures)")
    if not max_p99_ms > 0:
        raise ValueError(f"--max-p99-ms {max_p99_ms!r} must be above 0")
    notes: list[str] = []
    flink_runs: list[tuple[Path, dict[str, Any]]] = []
    for run_dir in run_directories(paths):
        run = read_run(run_dir)
        if run["engine"] != "flink":
            continue
        if run.get("status") != "complete":
            notes.append(f"{run['run_id']} left out: its run.json status is {run.get('status')!r}")
            continue
        flink_runs.append((run_dir, run))
    costs = [c for run_dir, run in flink_runs if (c := checkpoint_cost(run_dir, run)) is not None]
    if not costs:
        where = ", ".join(str(p) for p in paths)
        raise InputError(
            Path(where),
            f"no complete Flink run with completed checkpoints in {CHECKPOINTS_FILE}: advise "
            "needs the checkpoint durations Flink measured",
        )
    checkpoints = sum(c.completed for c in costs)
    cost_s = sum(c.mean_s * c.completed for c in costs) / checkpoints
    measured = _measured_intervals(flink_runs, costs, cost_s, mtbf_s, max_p99_ms, notes)
    young_daly = young_daly_interval(cost_s, mtbf_s)
    lambert = lambert_interval(cost_s, mtbf_s)
    return Advice(
        mtbf_s=mtbf_s,
        max_p99_ms=max_p99_ms,
        checkpoint_cost_s=cost_s,
        checkpoints=checkpoints,
        cost_runs=[c.run_id for c in costs],
        young_daly_s=young_daly,
        young_daly_utilisation=utilisation(young_daly, cost_s, mtbf_s),
        lambert_s=lambert,
        lambert_utilisation=utilisation(lambert, cost_s, mtbf_s),
        measured=measured,
        best_measured_s=_best_interval(measured),
        notes=notes,
    )


def _measured_intervals(
    flink_runs: Sequence[tuple[Path, dict[str, Any]]],
    costs: Sequence[CheckpointCost],
    cost_s: float,
    mtbf_s: float,
    max_p99_ms: float,
    notes: list[str],
) -> list[IntervalResult]:
    by_interval: dict[float, list[compare.Run]] = {}
    for run_dir, run in flink_runs:
        interval = (run.get("parameters") or {}).get(INTERVAL_PARAMETER)
        if not _is_number(interval):
            notes.append(
                f"{run['run_id']} left out of the measured intervals: no {INTERVAL_PARAMETER}"
            )
            continue
        (summary,) = compare.load_runs([run_dir])
        if summary.overloaded:  # as in the comparison: it measured a queue, not the interval
            notes.append(
                f"{run['run_id']} left out of the measured intervals: the collector found it "
                "overloaded before its first fault"
            )
            continue
        by_interval.setdefault(float(interval), []).append(summary)
    metric = {m.key: m for m in compare.METRICS}
    results = []
    for interval, runs in sorted(by_interval.items()):
        mine = [c.mean_s for c in costs if c.interval_s == interval]
        p99 = _mean([r.value(metric["latency_p99_ms"]) for r in runs])
        results.append(
            IntervalResult(
                interval_s=interval,
                runs=[r.run_id for r in runs],
                duplicate_rate=_mean([r.value(metric["duplicate_rate"]) for r in runs]),
                recovery_s=_mean([r.value(metric["recovery_s"]) for r in runs]),
                without_recovery=sum(r.shows_no_recovery() for r in runs),
                latency_p99_ms=p99,
                checkpoint_cost_s=statistics.fmean(mine) if mine else None,
                utilisation=utilisation(interval, cost_s, mtbf_s),
                acceptable_latency=p99 is not None and p99 <= max_p99_ms,
            )
        )
    return results


# ---------------------------------------------------------------- output


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} s"


def _percent(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value * 100:.{digits}g} %"


def markdown(advice: Advice, heading_level: int = 1) -> str:
    head = "#" * heading_level
    lines = [
        f"{head} Checkpoint interval advice",
        "",
        f"Checkpoint cost c = {advice.checkpoint_cost_s:.3f} s: the mean end-to-end duration of "
        f"{advice.checkpoints} completed Flink checkpoints in {len(advice.cost_runs)} run(s). "
        f"Mean time between failures M = {advice.mtbf_s:g} s. Utilisation is the expected useful "
        "fraction of time with failures at rate 1/M, each losing the work since the last "
        "checkpoint: lambda (T - c) / (exp(lambda T) - 1).",
        "",
        "| interval | T | utilisation |",
        "|---|---|---|",
        f"| Young/Daly sqrt(2 c M) | {_seconds(advice.young_daly_s)} | "
        f"{_percent(advice.young_daly_utilisation)} |",
        f"| Lambert W (c lambda + W0(-exp(-c lambda - 1)) + 1) / lambda | "
        f"{_seconds(advice.lambert_s)} | {_percent(advice.lambert_utilisation)} |",
    ]
    if advice.best_measured_s is not None:
        best = next(r for r in advice.measured if r.interval_s == advice.best_measured_s)
        lines.append(
            f"| best measured | {_seconds(best.interval_s)} | {_percent(best.utilisation)} |"
        )
    lines.append("")
    if advice.measured:
        lines += [
            f"{head}# Measured intervals",
            "",
            f"Means over each interval's runs. Acceptable latency: mean p99 <= "
            f"{advice.max_p99_ms:g} ms. Best: lowest duplicate rate and recovery time (sum of "
            "their ranks) among the acceptable ones.",
            "",
            "| interval | runs | duplicate rate | recovery | p99 | checkpoint cost | "
            "utilisation | acceptable |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for result in advice.measured:
            recovery = _seconds(result.recovery_s)
            if result.without_recovery:
                recovery += f" ({result.without_recovery} {NO_RECOVERY})"
            p99 = "–" if result.latency_p99_ms is None else f"{result.latency_p99_ms:.0f} ms"
            mark = " **best**" if result.interval_s == advice.best_measured_s else ""
            lines.append(
                f"| {result.interval_s:g} s{mark} | {len(result.runs)} | "
                f"{_percent(result.duplicate_rate)} | {recovery} | {p99} | "
                f"{_seconds(result.checkpoint_cost_s)} | {_percent(result.utilisation)} | "
                f"{'yes' if result.acceptable_latency else 'no'} |"
            )
        if advice.best_measured_s is None:
            lines += ["", "No measured interval had acceptable latency."]
        lines.append("")
    if advice.notes:
        lines += [f"{head}# Notes", "", *(f"- {note}" for note in advice.notes), ""]
    return "\n".join(lines)


def write(advice: Advice, out: Path) -> list[Path]:
    """advice.json and advice.md into out, each written whole."""
    written = [out / "advice.md", out / "advice.json"]
    write_atomic(written[0], markdown(advice))
    write_json(written[1], advice.as_json())
    return written
