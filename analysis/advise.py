"""advise: the checkpoint interval a failure rate calls for, beside what the runs measured.

The checkpoint cost c is what a checkpoint costs the job, per checkpoint interval: for each
completed checkpoint, the longest any subtask was kept from processing records by it, its
synchronous part plus its barrier alignment (checkpoint.sync + alignment.duration of Flink's
per-subtask checkpoint details, engine/flink-checkpoint-details.json). The asynchronous part
runs beside the processing and the start delay is the barrier's way through the queues, so
neither is counted; the end-to-end duration (engine/flink-checkpoints.json) counts both and is
only an upper bound on c, used (and said to be) when a run has no details.

With a mean time between failures M (lambda = 1/M), each interval's c gives two what-if optima:

- Young/Daly, first order: T = sqrt(2 c M).
- The exponential-failure model: failures arrive at rate lambda, a failure loses the work since
  the last completed checkpoint, and each interval T spends c of its length checkpointing. The
  expected useful fraction of time (the utilisation) is U(T) = lambda (T - c) / (exp(lambda T) - 1),
  which is largest at T* = (c lambda + W(-exp(-c lambda - 1)) + 1) / lambda, W the principal
  branch of the Lambert W function (W >= -1; the other branch gives T* < 0).

Beside them, what the runs measure, per interval: checkpoint overhead (c / T of the time, in
seconds per hour) against the seconds of input replayed after each fault (faults[i].replayed_s)
at the failure rate 1/M, steady-state latency before the first fault and after the last
recovery (latency_phases), and recovery, censored values as lower bounds. The measured best is
judged on the steady latency and the recovery; a tie or an interval that cannot be judged is
said so, never settled by the order of the intervals.
Reads only small JSON files (run.json, summary.json, engine/flink-checkpoint*.json).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analysis import compare, engine
from analysis.io import RUN_JSON, InputError, read_optional_json, read_run
from analysis.report import write_atomic, write_json

CHECKPOINTS_FILE = "engine/flink-checkpoints.json"
DETAILS_FILE = "engine/flink-checkpoint-details.json"
# A study's directory (results/<study>/) lists its runs here; the run directories are its siblings.
STUDY_RECORD = "study.json"
INTERVAL_PARAMETER = "checkpoint_interval_s"
# The kit's criterion for a sustainable rate (bench/engine_figures.py): steady-state p99 < 1 s.
DEFAULT_MAX_P99_MS = 1000.0
LAMBERT_ITERATIONS = 50
HOUR_S = 3600.0
# Where the cost of an interval comes from.
COST_BLOCKING = "sync + alignment"
COST_END_TO_END = "end-to-end (upper bound)"
COST_DEFINITION = (
    "c per checkpoint is the longest any subtask was kept from processing records by it: its "
    "synchronous part plus its barrier alignment (Flink's per-subtask checkpoint.sync + "
    "alignment.duration); the asynchronous part runs beside the processing and is not counted"
)
# Said with every advice: what the model does not price.
LEAVES_OUT = (
    "Restart downtime: every failure also costs detection, restart and catch-up (the measured "
    "recovery), whatever the interval; the model counts only the work since the last checkpoint.",
    "Duplicates are the real price: at least once, the work lost is input replayed, which the "
    "output receives again (replayed seconds per fault); the model prices it only as time.",
    "The asynchronous part of a checkpoint (CPU and I/O beside the processing), a checkpoint that "
    "fails, and failures that are not independent with a constant rate 1/M.",
    "c comes from the checkpoints Flink still listed at the end of each run (the latest "
    "web.checkpoints.history: Flink keeps 10 by default, the kit 1,000).",
)


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


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


@dataclass(frozen=True)
class CheckpointCost:
    """What one run's completed checkpoints cost: per checkpoint (seconds) from the details,
    and the mean end-to-end duration Flink reported (the upper bound)."""

    run_id: str
    interval_s: float | None
    blocking_s: tuple[float, ...]
    async_s: tuple[float, ...]
    end_to_end_s: float | None
    end_to_end_count: int


def _subtask_figures(subtasks: Any) -> tuple[list[float], list[float]]:
    """sync + alignment and async (ms) of each completed subtask of one vertex's details."""
    held: list[float] = []
    background: list[float] = []
    for subtask in subtasks if isinstance(subtasks, list) else []:
        if not isinstance(subtask, dict) or subtask.get("status") != "completed":
            continue
        sync = engine.dig(subtask, "checkpoint", "sync")
        alignment = engine.dig(subtask, "alignment", "duration")
        if _is_number(sync) and _is_number(alignment):
            held.append(sync + alignment)
        if _is_number(engine.dig(subtask, "checkpoint", "async")):
            background.append(subtask["checkpoint"]["async"])
    return held, background


def blocking_costs(run_dir: Path) -> tuple[list[float], list[float]]:
    """Per completed checkpoint of engine/flink-checkpoint-details.json: the largest
    checkpoint.sync + alignment.duration over its subtasks, and the largest checkpoint.async
    (seconds). A checkpoint counts only when every vertex asked answered with completed
    subtasks that carry both figures."""
    data = read_optional_json(run_dir / DETAILS_FILE)
    documents = data.get("documents") if isinstance(data, dict) else None
    if not isinstance(documents, dict):
        return [], []
    asked = data.get("asked") if isinstance(data.get("asked"), dict) else documents
    by_checkpoint: dict[str, list[str]] = {}
    for name in asked:
        checkpoint, _, _vertex = str(name).partition("/")
        by_checkpoint.setdefault(checkpoint, []).append(str(name))
    blocking: list[float] = []
    asynchronous: list[float] = []
    for names in by_checkpoint.values():
        per_vertex = [_subtask_figures(engine.dig(documents, name, "subtasks")) for name in names]
        if all(held for held, _ in per_vertex):
            blocking.append(max(max(held) for held, _ in per_vertex) / 1000)
            background = [value for _, values in per_vertex for value in values]
            if background:
                asynchronous.append(max(background) / 1000)
    return blocking, asynchronous


def end_to_end_cost(run_dir: Path) -> tuple[float | None, int]:
    """The run's mean end-to-end checkpoint duration (seconds) and how many checkpoints it
    covers: Flink's summary of every completed checkpoint, else the history's completed ones."""
    data = read_optional_json(run_dir / CHECKPOINTS_FILE)
    if not isinstance(data, dict):
        return None, 0
    completed = engine.dig(data, "counts", "completed")
    average_ms = engine.dig(data, "summary", "end_to_end_duration", "avg")
    if _is_number(completed) and completed > 0 and _is_number(average_ms):
        return average_ms / 1000, int(completed)
    durations = [
        entry["end_to_end_duration"]
        for entry in data.get("history") or []
        if isinstance(entry, dict)
        and entry.get("status") == "COMPLETED"
        and _is_number(entry.get("end_to_end_duration"))
    ]
    if not durations:
        return None, 0
    return statistics.fmean(durations) / 1000, len(durations)


def checkpoint_cost(run_dir: Path, run: dict[str, Any]) -> CheckpointCost | None:
    """The run's checkpoint costs, None when it has neither details nor durations."""
    interval = (run.get("parameters") or {}).get(INTERVAL_PARAMETER)
    blocking, asynchronous = blocking_costs(run_dir)
    end_to_end, count = end_to_end_cost(run_dir)
    if not blocking and end_to_end is None:
        return None
    return CheckpointCost(
        run_id=run["run_id"],
        interval_s=float(interval) if _is_number(interval) else None,
        blocking_s=tuple(blocking),
        async_s=tuple(asynchronous),
        end_to_end_s=end_to_end,
        end_to_end_count=count,
    )


# ---------------------------------------------------------------- recovery, censored


@dataclass(frozen=True)
class Recovery:
    """A recovery time: exact, or a lower bound when censored (the recovery did not show within
    the run, so it took at least this long). spread_s: the runs' sample standard deviation."""

    value_s: float
    censored: bool
    spread_s: float | None = None

    def text(self) -> str:
        if self.censored:
            return f">= {self.value_s:.1f} s"
        spread = "" if self.spread_s is None else f" ± {self.spread_s:.1f}"
        return f"{self.value_s:.1f}{spread} s"


def run_recovery(summary: dict[str, Any]) -> Recovery | None:
    """The worst fault's recovery of a run; None when a fault has no figure at all (an older
    summary's `not in run`) or the run had no fault. A censored fault gives a lower bound
    (recovery_at_least_s), and so does the run."""
    faults = [f for f in summary.get("faults") or [] if isinstance(f, dict)]
    if not faults:
        return None
    worst, censored = 0.0, False
    for fault in faults:
        if fault.get("recovery_censored") is True:
            bound = next(
                (
                    fault[k]
                    for k in ("recovery_at_least_s", "recovery_s")
                    if _is_number(fault.get(k))
                ),
                0.0,
            )
            worst, censored = max(worst, float(bound)), True
        elif _is_number(fault.get("recovery_s")):
            worst = max(worst, float(fault["recovery_s"]))
        else:
            return None
    return Recovery(worst, censored)


def group_recovery(recoveries: Sequence[Recovery | None]) -> Recovery | None:
    """The mean over runs; a lower bound when any run's is; None when any run's is unknown."""
    if not recoveries or any(r is None for r in recoveries):
        return None
    known = [r for r in recoveries if r is not None]
    values = [r.value_s for r in known]
    censored = any(r.censored for r in known)
    spread = statistics.stdev(values) if not censored and len(values) >= 2 else None
    return Recovery(statistics.fmean(values), censored, spread)


def _tolerance(a: Recovery, b: Recovery) -> float:
    """Differences within the larger spread of the runs are not told apart."""
    return max(a.spread_s or 0.0, b.spread_s or 0.0)


def recovers_faster(a: Recovery, b: Recovery) -> bool:
    """a surely recovers faster than b: a is observed and below what b took at least (b's value,
    or its bound when censored), by more than the runs' spread. A censored a never does."""
    return not a.censored and a.value_s + _tolerance(a, b) < b.value_s


def recover_alike(a: Recovery, b: Recovery) -> bool:
    """A tie: both observed, within the runs' spread."""
    return not a.censored and not b.censored and abs(a.value_s - b.value_s) <= _tolerance(a, b)


# ---------------------------------------------------------------- per interval


@dataclass
class IntervalResult:
    """The measured runs at one checkpoint interval, and the what-if from their cost."""

    interval_s: float
    runs: list[str]
    # The cost: mean over the interval's checkpoints (each counts once), its source and range.
    cost_source: str | None
    checkpoint_cost_s: float | None
    checkpoint_cost_max_s: float | None
    checkpoints: int
    end_to_end_s: float | None
    async_s: float | None
    # Seconds per hour: checkpoint overhead c / T, and input replayed at the failure rate 1/M,
    # measured (replayed_s per fault) and as the model has it (T / 2 per failure).
    overhead_s_per_hour: float | None
    replayed_s_per_fault: float | None
    replayed_runs: int
    replayed_s_per_hour: float | None
    model_replayed_s_per_hour: float
    lost_s_per_hour: float | None
    # Steady-state latency (means over the runs that have the phase) and recovery.
    p50_before_ms: float | None
    p99_before_ms: float | None
    p99_after_ms: float | None
    acceptable_latency: bool | None
    recovery: Recovery | None
    recovery_unknown_runs: int
    duplicate_rate: float | None
    # The model at this interval's c (None without a cost).
    utilisation: float | None
    young_daly_s: float | None
    lambert_s: float | None
    lambert_utilisation: float | None


@dataclass
class Advice:
    mtbf_s: float
    max_p99_ms: float
    cost_definition: str
    # One headline figure: the median of the intervals' costs (each interval's own is its row).
    checkpoint_cost_s: float
    cost_source: str
    checkpoints: int
    cost_runs: list[str]
    young_daly_s: float
    young_daly_utilisation: float
    lambert_s: float
    lambert_utilisation: float
    measured: list[IntervalResult]
    best_measured_s: float | None
    tied_s: list[float]
    verdict: str
    leaves_out: list[str] = field(default_factory=lambda: list(LEAVES_OUT))
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


def _interval_cost(
    costs: Sequence[CheckpointCost],
) -> tuple[str | None, list[float], float | None, float | None]:
    """(source, per-checkpoint costs, mean end-to-end, mean async) of one interval's runs: the
    blocking costs of the runs that have details, else the runs' end-to-end means."""
    with_details = [c for c in costs if c.blocking_s]
    weighted = [(c.end_to_end_s, c.end_to_end_count) for c in costs if c.end_to_end_s is not None]
    weight = sum(count for _, count in weighted)
    e2e_mean = sum(mean * count for mean, count in weighted) / weight if weight else None
    async_values = [s for c in costs for s in c.async_s]
    async_mean = statistics.fmean(async_values) if async_values else None
    if with_details:
        return COST_BLOCKING, [s for c in with_details for s in c.blocking_s], e2e_mean, async_mean
    if e2e_mean is not None:
        return COST_END_TO_END, [e2e_mean], e2e_mean, async_mean
    return None, [], None, async_mean


def _phase(summary: dict[str, Any], phase: str, figure: str) -> float | None:
    """A latency_phases figure; None when absent, or when the run never reached a steady state
    (steady_state.reached false: its latency before the fault is not a steady one)."""
    if engine.dig(summary, "steady_state", "reached") is False:
        return None
    value = engine.dig(summary, "latency_phases", phase, figure)
    return float(value) if _is_number(value) else None


def _run_replayed(summary: dict[str, Any]) -> float | None:
    """Mean seconds of input replayed per fault; None when a fault lacks the figure."""
    faults = [f for f in summary.get("faults") or [] if isinstance(f, dict)]
    values = [f.get("replayed_s") for f in faults]
    if not values or not all(_is_number(v) for v in values):
        return None
    return statistics.fmean(values)


def _interval_result(
    interval: float,
    runs: Sequence[compare.Run],
    costs: Sequence[CheckpointCost],
    mtbf_s: float,
    max_p99_ms: float,
) -> IntervalResult:
    source, per_checkpoint, e2e_mean, async_mean = _interval_cost(costs)
    cost = statistics.fmean(per_checkpoint) if per_checkpoint else None
    failures_per_hour = HOUR_S / mtbf_s
    overhead = None if cost is None else min(cost / interval, 1.0) * HOUR_S
    replayed_values = [_run_replayed(r.summary) for r in runs]
    replayed = _mean(replayed_values)
    replayed_per_hour = None if replayed is None else replayed * failures_per_hour
    p99_before = _mean([_phase(r.summary, "before_fault", "p99") for r in runs])
    p99_after = _mean([_phase(r.summary, "after_recovery", "p99") for r in runs])
    if p99_before is None:
        acceptable = None
    else:
        acceptable = p99_before <= max_p99_ms and (p99_after is None or p99_after <= max_p99_ms)
    recoveries = [run_recovery(r.summary) for r in runs]
    duplicate = {m.key: m for m in compare.METRICS}["duplicate_rate"]
    model_ok = cost is not None and cost > 0
    return IntervalResult(
        interval_s=interval,
        runs=[r.run_id for r in runs],
        cost_source=source,
        checkpoint_cost_s=cost,
        checkpoint_cost_max_s=max(per_checkpoint) if per_checkpoint else None,
        checkpoints=len(per_checkpoint)
        if source == COST_BLOCKING
        else sum(c.end_to_end_count for c in costs),
        end_to_end_s=e2e_mean,
        async_s=async_mean,
        overhead_s_per_hour=overhead,
        replayed_s_per_fault=replayed,
        replayed_runs=sum(v is not None for v in replayed_values),
        replayed_s_per_hour=replayed_per_hour,
        model_replayed_s_per_hour=interval / 2 * failures_per_hour,
        lost_s_per_hour=(
            None if overhead is None or replayed_per_hour is None else overhead + replayed_per_hour
        ),
        p50_before_ms=_mean([_phase(r.summary, "before_fault", "p50") for r in runs]),
        p99_before_ms=p99_before,
        p99_after_ms=p99_after,
        acceptable_latency=acceptable,
        recovery=group_recovery(recoveries),
        recovery_unknown_runs=sum(r is None for r in recoveries),
        duplicate_rate=_mean([r.value(duplicate) for r in runs]),
        utilisation=utilisation(interval, cost, mtbf_s) if model_ok else None,
        young_daly_s=young_daly_interval(cost, mtbf_s) if model_ok else None,
        lambert_s=lambert_interval(cost, mtbf_s) if model_ok else None,
        lambert_utilisation=(
            utilisation(lambert_interval(cost, mtbf_s), cost, mtbf_s) if model_ok else None
        ),
    )


def _names(results: Sequence[IntervalResult]) -> str:
    return ", ".join(f"{r.interval_s:g} s" for r in results)


def judge(results: Sequence[IntervalResult]) -> tuple[float | None, list[float], str]:
    """(best interval, tied intervals, verdict). The candidates are the intervals whose steady
    latency is known and acceptable; the best recovers surely faster than every other candidate
    (recovers_faster). Candidates that recover alike and each beat the rest are a tie; anything
    else (a censored or unknown recovery in the way) is no measured best. The order of the
    intervals never decides."""
    candidates = [r for r in results if r.acceptable_latency is True]
    unknown = [r for r in results if r.acceptable_latency is None]
    if not candidates:
        why = "no interval's steady-state latency is known and within the bound"
        if unknown:
            why += f" ({_names(unknown)}: no latency_phases.before_fault in their summaries)"
        return None, [], f"No measured best: {why}."
    if len(candidates) == 1:
        only = candidates[0].interval_s
        why = "the only interval with acceptable steady-state latency"
        return only, [], f"Best measured: {only:g} s, {why}."
    not_known = [r for r in candidates if r.recovery is None]
    if not_known:
        why = (
            f"{_names(not_known)} lack a recovery figure for some run (an older summary's "
            "`not in run`, or no fault), so the intervals cannot be compared on recovery"
        )
        return None, [], f"No measured best: {why}."
    recovery = {r.interval_s: r.recovery for r in candidates if r.recovery is not None}

    def beats(a: IntervalResult, b: IntervalResult) -> bool:
        return recovers_faster(recovery[a.interval_s], recovery[b.interval_s])

    unbeaten = [r for r in candidates if not any(beats(o, r) for o in candidates if o is not r)]
    rest = [r for r in candidates if r not in unbeaten]
    wins = all(beats(u, o) for u in unbeaten for o in rest)
    if len(unbeaten) == 1 and wins:
        best = unbeaten[0].interval_s
        why = "it recovered faster than every other interval with acceptable steady-state latency"
        return best, [], f"Best measured: {best:g} s: {why}."
    alike = all(
        recover_alike(recovery[a.interval_s], recovery[b.interval_s])
        for a in unbeaten
        for b in unbeaten
    )
    if len(unbeaten) > 1 and alike and wins:
        why = "recovered alike (within the runs' spread); the runs do not say which is better"
        return None, [r.interval_s for r in unbeaten], f"Tie: {_names(unbeaten)} {why}."
    censored = [r for r in unbeaten if recovery[r.interval_s].censored]
    why = f"{_names(unbeaten)} cannot be told apart on recovery"
    if censored:
        why += f" ({_names(censored)}: recovery censored, only a lower bound)"
    return None, [], f"No measured best: {why}."


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
        # The advice weighs replay against checkpoint cost: an at-most-once run takes no
        # checkpoints and an exactly-once one replays into aborted transactions.
        guarantee = (run.get("parameters") or {}).get("guarantee") or "at_least_once"
        if guarantee != "at_least_once":
            notes.append(
                f"{run['run_id']} left out: it ran {guarantee}; the advice is for at-least-once"
            )
            continue
        flink_runs.append((run_dir, run))
    costs = {
        run["run_id"]: c
        for run_dir, run in flink_runs
        if (c := checkpoint_cost(run_dir, run)) is not None
    }
    if not costs:
        where = ", ".join(str(p) for p in paths)
        raise InputError(
            Path(where),
            f"no complete Flink run with completed checkpoints in {DETAILS_FILE} or "
            f"{CHECKPOINTS_FILE}: advise needs the checkpoint durations Flink measured",
        )
    measured = _measured_intervals(flink_runs, costs, mtbf_s, max_p99_ms, notes)
    headline = _headline(measured, costs)
    cost_s, source, checkpoints, cost_runs = headline
    if source == COST_END_TO_END:
        notes.append(
            f"No run has {DETAILS_FILE} (runs before the kit kept it): c is the end-to-end "
            "duration, an upper bound on what a checkpoint costs the job, so every T* here is "
            "an upper bound too."
        )
    best, tied, verdict = judge(measured)
    young_daly = young_daly_interval(cost_s, mtbf_s)
    lambert = lambert_interval(cost_s, mtbf_s)
    return Advice(
        mtbf_s=mtbf_s,
        max_p99_ms=max_p99_ms,
        cost_definition=COST_DEFINITION,
        checkpoint_cost_s=cost_s,
        cost_source=source,
        checkpoints=checkpoints,
        cost_runs=cost_runs,
        young_daly_s=young_daly,
        young_daly_utilisation=utilisation(young_daly, cost_s, mtbf_s),
        lambert_s=lambert,
        lambert_utilisation=utilisation(lambert, cost_s, mtbf_s),
        measured=measured,
        best_measured_s=best,
        tied_s=tied,
        verdict=verdict,
        notes=notes,
    )


def _headline(
    measured: Sequence[IntervalResult], costs: dict[str, CheckpointCost]
) -> tuple[float, str, int, list[str]]:
    """The median of the intervals' costs from the best source any has (runs without an
    interval count as one more group), with the checkpoints and runs behind it."""
    groups: list[tuple[str, float, int, list[str]]] = [
        (r.cost_source, r.checkpoint_cost_s, r.checkpoints, r.runs)
        for r in measured
        if r.cost_source is not None and r.checkpoint_cost_s is not None
    ]
    loose = [c for c in costs.values() if not any(c.run_id in r.runs for r in measured)]
    if loose:
        source, per_checkpoint, _, _ = _interval_cost(loose)
        if source is not None:
            count = (
                len(per_checkpoint)
                if source == COST_BLOCKING
                else sum(c.end_to_end_count for c in loose)
            )
            groups.append(
                (source, statistics.fmean(per_checkpoint), count, [c.run_id for c in loose])
            )
    best_source = COST_BLOCKING if any(g[0] == COST_BLOCKING for g in groups) else COST_END_TO_END
    chosen = [g for g in groups if g[0] == best_source]
    cost_runs = [run for g in chosen for run in g[3] if run in costs]
    return (
        statistics.median(g[1] for g in chosen),
        best_source,
        sum(g[2] for g in chosen),
        cost_runs,
    )


# Why compare.Run.left_out leaves a run out, as the advice's notes say it.
LEFT_OUT_WHY = {
    "overloaded": "the collector found it overloaded before its first fault",
    "clock moved": "its wall clock moved (run.json wall_clock.moved)",
}


def _measured_intervals(
    flink_runs: Sequence[tuple[Path, dict[str, Any]]],
    costs: dict[str, CheckpointCost],
    mtbf_s: float,
    max_p99_ms: float,
    notes: list[str],
) -> list[IntervalResult]:
    by_interval: dict[float, list[compare.Run]] = {}
    for run_dir, run in flink_runs:
        interval = (run.get("parameters") or {}).get(INTERVAL_PARAMETER)
        if not _is_number(interval) or not interval > 0:
            notes.append(
                f"{run['run_id']} left out of the measured intervals: no {INTERVAL_PARAMETER}"
            )
            continue
        (summary,) = compare.load_runs([run_dir])
        # As in the comparison: an overloaded run measured a queue, not the interval, and a
        # moved clock's latencies crossed a step.
        if summary.left_out is not None:
            notes.append(
                f"{run['run_id']} left out of the measured intervals: "
                + LEFT_OUT_WHY[summary.left_out]
            )
            continue
        if engine.dig(summary.summary, "steady_state", "reached") is False:
            notes.append(
                f"{run['run_id']}: never reached a steady state (steady_state.reached false), "
                "so its latency is left out of the steady p99"
            )
        by_interval.setdefault(float(interval), []).append(summary)
    results = []
    for interval, runs in sorted(by_interval.items()):
        mine = [costs[r.run_id] for r in runs if r.run_id in costs]
        result = _interval_result(interval, runs, mine, mtbf_s, max_p99_ms)
        if result.cost_source == COST_BLOCKING and len(mine) > sum(
            bool(c.blocking_s) for c in mine
        ):
            notes.append(
                f"{interval:g} s: c from the runs with {DETAILS_FILE} only; the others' "
                "end-to-end durations are an upper bound and were not mixed in"
            )
        results.append(result)
    return results


# ---------------------------------------------------------------- output


def _seconds(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f} s"


def _per_hour(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} s/h"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f} ms"


def _percent(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value * 100:.{digits}g} %"


def _yes_no(value: bool | None) -> str:
    return "unknown" if value is None else "yes" if value else "no"


def markdown(advice: Advice, heading_level: int = 1) -> str:
    head = "#" * heading_level
    bound = " (an upper bound)" if advice.cost_source == COST_END_TO_END else ""
    lines = [
        f"{head} Checkpoint interval advice",
        "",
        f"Checkpoint cost: {advice.cost_definition}. Each interval's c is the mean over its own "
        "runs' checkpoints, not pooled across intervals. Mean time between failures M = "
        f"{advice.mtbf_s:g} s. The optimal intervals are a what-if of the model (failures at "
        "rate 1/M, each losing the work since the last checkpoint, U(T) = lambda (T - c) / "
        "(exp(lambda T) - 1)); the runs measure the seconds per hour beside them.",
        "",
        f"Headline, at the median of the intervals' costs, c = {advice.checkpoint_cost_s:.3f} s"
        f"{bound} ({advice.cost_source}, {advice.checkpoints} checkpoints in "
        f"{len(advice.cost_runs)} run(s)): Young/Daly sqrt(2 c M) = "
        f"{_seconds(advice.young_daly_s)} (utilisation {_percent(advice.young_daly_utilisation)}), "
        f"Lambert W T* = {_seconds(advice.lambert_s)} "
        f"(utilisation {_percent(advice.lambert_utilisation)}).",
        "",
    ]
    if advice.measured:
        lines += [
            f"{head}# What-if per interval's cost",
            "",
            "| cost measured at | c | source | Young/Daly | Lambert W T* | U(T*) | "
            "overhead at T* | model replay at T* |",
            "|---|---|---|---|---|---|---|---|",
        ]
        per_hour = HOUR_S / advice.mtbf_s
        for r in advice.measured:
            at_t = (
                None
                if r.lambert_s is None or r.checkpoint_cost_s is None
                else r.checkpoint_cost_s / r.lambert_s * HOUR_S
            )
            replay_t = None if r.lambert_s is None else r.lambert_s / 2 * per_hour
            lines.append(
                f"| {r.interval_s:g} s | {_seconds(r.checkpoint_cost_s, 3)} | "
                f"{r.cost_source or '–'} | {_seconds(r.young_daly_s)} | {_seconds(r.lambert_s)} | "
                f"{_percent(r.lambert_utilisation)} | {_per_hour(at_t)} | {_per_hour(replay_t)} |"
            )
        lines += [
            "",
            f"{head}# Measured intervals",
            "",
            "Means over each interval's runs. Overhead: c / T of every hour. Replayed: the "
            "seconds of input replayed per fault (faults[i].replayed_s), and per hour at one "
            f"failure every {advice.mtbf_s:g} s; the model's replay is T / 2 per failure. Lost: "
            "overhead plus replayed, the streaming objective (the model's overhead plus replay "
            "is least at Young/Daly). Steady p99: before the first fault and after the last "
            f"recovery (latency_phases), acceptable when at most {advice.max_p99_ms:g} ms. "
            "Recovery: the worst fault of each run, `>=` a lower bound when censored.",
            "",
            "| interval | runs | c | overhead | replayed per fault | replayed | model replay | "
            "lost | steady p99 before / after | acceptable | recovery |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in advice.measured:
            if r.interval_s == advice.best_measured_s:
                mark = " **best**"
            elif r.interval_s in advice.tied_s:
                mark = " **tie**"
            else:
                mark = ""
            recovery = "unknown" if r.recovery is None else r.recovery.text()
            if r.recovery is None and r.recovery_unknown_runs:
                recovery += f" ({r.recovery_unknown_runs} run(s) without a figure)"
            replayed = _seconds(r.replayed_s_per_fault, 1)
            if r.replayed_s_per_fault is not None and r.replayed_runs < len(r.runs):
                replayed += f" ({r.replayed_runs} of {len(r.runs)} runs)"
            lines.append(
                f"| {r.interval_s:g} s{mark} | {len(r.runs)} | "
                f"{_seconds(r.checkpoint_cost_s, 3)} | {_per_hour(r.overhead_s_per_hour)} | "
                f"{replayed} | {_per_hour(r.replayed_s_per_hour)} | "
                f"{_per_hour(r.model_replayed_s_per_hour)} | {_per_hour(r.lost_s_per_hour)} | "
                f"{_ms(r.p99_before_ms)} / {_ms(r.p99_after_ms)} | "
                f"{_yes_no(r.acceptable_latency)} | {recovery} |"
            )
        lines.append("")
    lines += [advice.verdict, ""]
    lines += [
        f"{head}# What the model leaves out",
        "",
        *(f"- {item}" for item in advice.leaves_out),
        "",
    ]
    if advice.notes:
        lines += [f"{head}# Notes", "", *(f"- {note}" for note in advice.notes), ""]
    return "\n".join(lines)


def write(advice: Advice, out: Path) -> list[Path]:
    """advice.json and advice.md into out, each written whole."""
    written = [out / "advice.md", out / "advice.json"]
    write_atomic(written[0], markdown(advice))
    write_json(written[1], advice.as_json())
    return written
