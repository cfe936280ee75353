"""compare: the key figures of several summarised runs, grouped by engine and parameters.

Reads only each run's summary.json (run `summarize` first); writes comparison.md,
comparison.csv and the study's plots into the output directory.
"""

from __future__ import annotations

import csv
import io as text_io
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402 - after choosing the renderer

from analysis import engines, intervals  # noqa: E402
from analysis.io import InputError, read_optional_json  # noqa: E402
from analysis.report import NO_RECOVERY, write_atomic  # noqa: E402

SUMMARY = "summary.json"
COLLECTOR_SUMMARY = "received.summary.json"
RUN_RECORD = "run.json"
# Per-run names and collector stop settings: they differ between repetitions, not treatments;
# the start lead follows from the fault and its fault_at_s, which group the runs already.
IGNORED_PARAMETERS = frozenset(
    {
        "input_topic",
        "result_topic",
        "consumer_group",
        "seed",
        "quiet_s",
        "drain_timeout_s",
        "start_lead_ms",
    }
)


def sweep_parameters() -> dict[str, str]:
    """The parameter each engine's at-least-once behaviour is studied against, for runs whose
    run.json does not name it (setting_roles.replay_bound): its analysis module's REPLAY_BOUND,
    which a test keeps equal to what its manifest marks."""
    return {
        module.NAME: module.REPLAY_BOUND
        for module in engines.modules()
        if getattr(module, "REPLAY_BOUND", None)
    }


GUARANTEE = "guarantee"
PLOTS_DIR = "plots"
SIZE = (10, 4.5)
DPI = 110


def _worst(summary: dict[str, Any], key: str) -> float | None:
    """The largest value of a per-fault figure; None without faults or if one shows no recovery."""
    values = [fault.get(key) for fault in summary.get("faults") or []]
    if not values or any(value is None for value in values):
        return None
    return max(values)


def worst_recovery(summary: dict[str, Any]) -> tuple[float | None, bool]:
    """The worst fault's recovery of a run, a censored fault counting with its lower bound
    (recovery_at_least_s), and whether any fault was censored (then the value is a lower
    bound too). (None, False) without faults, or when a fault has neither figure (a summary
    written before recovery_at_least_s existed)."""
    faults = [f for f in summary.get("faults") or [] if isinstance(f, dict)]
    values, censored = [], False
    for fault in faults:
        value = fault.get("recovery_s")
        if value is None:
            value, censored = fault.get("recovery_at_least_s"), True
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None, False
        values.append(float(value))
    if not values:
        return None, False
    return max(values), censored


def _replayed_per_fault(summary: dict[str, Any]) -> float | None:
    """The mean of faults[i].replayed_s over the run's faults; None without faults or when a
    fault lacks it."""
    values = [f.get("replayed_s") for f in summary.get("faults") or [] if isinstance(f, dict)]
    if not values or any(not isinstance(v, int | float) for v in values):
        return None
    return statistics.fmean(values)


def _censored(summary: dict[str, Any]) -> int | None:
    value, censored = worst_recovery(summary)
    return None if value is None else int(censored)


def _steady(phase: str, figure: str) -> Callable[[dict[str, Any]], Any]:
    """A latency_phases figure; before_fault only when the run reached a steady state."""

    def get(summary: dict[str, Any]) -> Any:
        state = summary.get("steady_state")
        if phase == "before_fault" and isinstance(state, dict) and state.get("reached") is False:
            return None
        return _get("latency_phases", phase, figure)(summary)

    return get


def _get(*keys: str) -> Callable[[dict[str, Any]], Any]:
    def get(summary: dict[str, Any]) -> Any:
        data: Any = summary
        for key in keys:
            data = data.get(key) if isinstance(data, dict) else None
        return data

    return get


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    get: Callable[[dict[str, Any]], Any]
    percent: bool = False
    # The group's row sums the runs' values instead of averaging them (a count of runs).
    summed: bool = False
    # A fault-timeline figure a run may not observe (the engine never said so while sampled):
    # a group in which any counted run lacks it gets no interval, since a mean over the
    # others would lean towards the runs that showed it.
    timeline: bool = False


METRICS = (
    Metric("produced", "produced", _get("produced")),
    Metric("lost", "lost", _get("lost")),
    Metric("loss_rate", "loss", _get("loss_rate"), percent=True),
    Metric("replayed_s", "replayed s/fault", _replayed_per_fault),
    Metric("duplicate_rate", "duplicate rate", _get("duplicate_rate"), percent=True),
    Metric(
        "duplicated_messages_rate",
        "duplicated msgs",
        _get("duplicated_messages_rate"),
        percent=True,
    ),
    Metric("latency_p50_ms", "p50 ms", _get("latency_ms", "p50")),
    Metric("latency_p99_ms", "p99 ms", _get("latency_ms", "p99")),
    Metric("latency_p99.9_ms", "p99.9 ms", _get("latency_ms", "p99.9")),
    Metric("latency_max_ms", "max ms", _get("latency_ms", "max")),
    Metric("produced_per_s", "produced/s", _get("throughput", "produced_per_s", "mean")),
    Metric("received_per_s", "received/s", _get("throughput", "received_per_s", "mean")),
    Metric("stall_s", "stall s", lambda s: _worst(s, "stall_s")),
    Metric("recovery_s", "recovery s", lambda s: _worst(s, "recovery_s")),
    Metric("recovery_bound_s", "recovery s", lambda s: worst_recovery(s)[0]),
    Metric("recovery_censored", "censored", _censored, summed=True),
    Metric("steady_before_p50_ms", "before p50 ms", _steady("before_fault", "p50")),
    Metric("steady_before_p99_ms", "before p99 ms", _steady("before_fault", "p99")),
    Metric("steady_after_p50_ms", "after p50 ms", _steady("after_recovery", "p50")),
    Metric("steady_after_p99_ms", "after p99 ms", _steady("after_recovery", "p99")),
    Metric("detected_s", "detected s", lambda s: _worst(s, "detected_s"), timeline=True),
    Metric("engine_whole_s", "whole again s", lambda s: _worst(s, "engine_whole_s"), timeline=True),
    Metric(
        "first_output_s", "first output s", lambda s: _worst(s, "first_output_s"), timeline=True
    ),
    Metric("caught_up_s", "caught up s", lambda s: _worst(s, "caught_up_s"), timeline=True),
)
# The headline figures given a 95 % interval (comparison.md's Intervals section, the CSV's
# ci_low and ci_high rows), recovery with them (censored: the Kaplan-Meier median instead).
INTERVAL_METRICS = (
    "loss_rate",
    "replayed_s",
    "duplicate_rate",
    "steady_before_p50_ms",
    "steady_before_p99_ms",
    "steady_after_p50_ms",
    "steady_after_p99_ms",
    "detected_s",
    "engine_whole_s",
    "first_output_s",
    "caught_up_s",
)
# The figures each comparison of two groups judges (comparison.md's Comparisons section).
COMPARED_METRICS = (
    "loss_rate",
    "replayed_s",
    "duplicate_rate",
    "steady_before_p50_ms",
    "steady_before_p99_ms",
)
# Up to this many groups every pair is compared; past it, neighbouring settings of an engine
# and groups of two engines at the same value of their studied settings.
ALL_PAIRS_UP_TO = 6
# The columns of the Markdown table (the CSV has every metric); recovery is drawn from
# recovery_bound_s and recovery_censored, the steady phases as p50 / p99 pairs.
TABLE_METRICS = (
    "loss_rate",
    "replayed_s",
    "duplicate_rate",
    "latency_p50_ms",
    "latency_p99_ms",
    "latency_p99.9_ms",
    "received_per_s",
    "stall_s",
)


def wall_clock_moved(record: dict) -> bool | None:
    """run.json's `wall_clock.moved`: whether the wall clock moved past its limit while the
    producer or the collector ran; None when run.json cannot say."""
    clock = record.get("wall_clock")
    moved = clock.get("moved") if isinstance(clock, dict) else None
    return moved if isinstance(moved, bool) else None


@dataclass
class Run:
    directory: Path
    summary: dict[str, Any]

    @property
    def run_id(self) -> str:
        return self.summary["run_id"]

    @property
    def engine(self) -> str:
        return self.summary["engine"]

    def parameters(self) -> dict[str, Any]:
        params = self.summary.get("parameters") or {}
        return {k: v for k, v in params.items() if k not in IGNORED_PARAMETERS}

    def value(self, metric: Metric) -> float | None:
        value = metric.get(self.summary)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    @property
    def holds(self) -> bool | None:
        """Whether the run's delivery guarantee held (summary.json verdict); None without one."""
        verdict = self.summary.get("verdict")
        holds = verdict.get("holds") if isinstance(verdict, dict) else None
        return holds if isinstance(holds, bool) else None

    def verdict_count(self, name: str) -> int | None:
        """A count of the run's verdict (lost, duplicate_records); None without one."""
        verdict = self.summary.get("verdict")
        value = verdict.get(name) if isinstance(verdict, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def verdict_text(self) -> str:
        """held, VIOLATED (k lost) or (for at-most-once) VIOLATED (k duplicates); – without one."""
        verdict = self.summary.get("verdict")
        if self.holds is None or not isinstance(verdict, dict):
            return "–"
        if self.holds:
            return "held"
        lost = self.verdict_count("lost") or 0
        duplicates = self.verdict_count("duplicate_records") or 0
        parts = [f"{lost:,} lost"] if lost else []
        if duplicates and verdict.get("guarantee") != "at_least_once":
            parts.append(f"{duplicates:,} duplicates")
        return f"VIOLATED ({', '.join(parts) or verdict.get('reason')})"

    def shows_no_recovery(self) -> bool:
        return any(f.get("recovery_s") is None for f in self.summary.get("faults") or [])

    @cached_property
    def overload(self) -> dict[str, Any]:
        """The collector's overload verdict (received.summary.json), {} when there is none;
        read once per run (every group mean asks for it)."""
        data = read_optional_json(self.directory / COLLECTOR_SUMMARY)
        verdict = data.get("overload") if isinstance(data, dict) else None
        return verdict if isinstance(verdict, dict) else {}

    @cached_property
    def record(self) -> dict[str, Any]:
        """run.json, {} when it is missing or not an object; read once per run."""
        data = read_optional_json(self.directory / RUN_RECORD)
        return data if isinstance(data, dict) else {}

    @cached_property
    def tls_internal(self) -> bool:
        """Internal TLS between the job's workers as the engine reported it (run.json
        settings.tls_internal); False where run.json does not say, as for an engine without it."""
        settings = self.record.get("settings")
        return isinstance(settings, dict) and settings.get("tls_internal") is True

    @property
    def overloaded(self) -> bool | None:
        """True when the engine fell behind before any fault (left out of the means), None
        when the collector could not tell."""
        value = self.overload.get("overloaded")
        return value if isinstance(value, bool) else None

    def overload_text(self) -> str:
        verdict = self.overloaded
        return "yes" if verdict else "no" if verdict is False else "unknown"

    @property
    def clock_moved(self) -> bool | None:
        """Whether run.json says the wall clock moved past its limit while the producer or the
        collector ran (`wall_clock.moved`); None when it cannot say. A moved run's latencies and
        recovery times are off by up to that, so the run leaves every mean, as an overloaded
        one does; its verdict, counted by message id, still counts."""
        return wall_clock_moved(self.record)

    @property
    def left_out(self) -> str | None:
        """Why the run is left out of its group's mean (overloaded, clock moved), None if not."""
        if self.overloaded is True:
            return "overloaded"
        return "clock moved" if self.clock_moved is True else None


@dataclass
class Group:
    engine: str
    fault: str
    parameters: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    label: str = ""

    @property
    def sweep_parameter(self) -> str | None:
        """The parameter that bounds this engine's replay: as its runs' run.json names it
        (setting_roles.replay_bound), else as the checkout's manifest does."""
        for run in self.runs:
            roles = run.record.get("setting_roles")
            if isinstance(roles, dict) and isinstance(roles.get("replay_bound"), str):
                return roles["replay_bound"]
        return sweep_parameters().get(self.engine)

    @property
    def counted(self) -> list[Run]:
        """The runs the group's mean covers: every run but those flagged overloaded or whose
        wall clock moved."""
        return [run for run in self.runs if run.left_out is None]

    def values(self, metric: Metric) -> list[float]:
        return [v for run in self.counted if (v := run.value(metric)) is not None]

    def mean(self, metric: Metric) -> float | None:
        """The mean over the counted runs (the sum, for a metric that counts runs)."""
        values = self.values(metric)
        if metric.summed:
            return float(sum(values)) if values else None
        return statistics.fmean(values) if values else None

    def spread(self, metric: Metric) -> float | None:
        """Sample standard deviation over the repetitions (None for fewer than two)."""
        values = self.values(metric)
        if metric.summed:
            return None
        return statistics.stdev(values) if len(values) >= 2 else None

    def interval(self, metric: Metric) -> intervals.Interval | None:
        """The mean over the counted runs and its 95 % interval (docs/metrics.md); none, and
        how many did not observe it, for a timeline figure some counted run lacks."""
        values = self.values(metric)
        if metric.timeline and values and self.without(metric):
            return intervals.unobserved_interval(len(self.counted), self.without(metric))
        return intervals.mean_interval(values)

    def recovery_interval(self) -> intervals.Interval | None:
        """The worst recoveries' mean and 95 % interval, or with any censored run the
        Kaplan-Meier median (docs/metrics.md)."""
        return intervals.recovery_interval(self.recovery_points())

    def without(self, metric: Metric) -> int:
        """How many counted runs have no value for the metric (a run that never reached a
        steady state, a fault whose backlog never caught up while sampled)."""
        return len(self.counted) - len(self.values(metric))

    def without_recovery(self) -> int:
        """Counted fault runs with neither a recovery nor its bound (an older summary)."""
        return sum(
            1
            for run in self.counted
            if worst_recovery(run.summary)[0] is None and run.summary.get("faults")
        )

    def recovery_points(self) -> list[tuple[float, bool]]:
        """(worst recovery or its lower bound, censored) of each counted run that has one."""
        points = []
        for run in self.counted:
            value, censored = worst_recovery(run.summary)
            if value is not None:
                points.append((value, censored))
        return points

    def held_text(self) -> str:
        """How many of the group's runs (left-out ones included) held their guarantee."""
        judged = [run.holds for run in self.runs if run.holds is not None]
        if not judged:
            return "–"
        return f"{sum(judged)} of {len(judged)} held"


def load_runs(directories: Sequence[Path]) -> list[Run]:
    runs = []
    for directory in directories:
        path = directory / SUMMARY
        if not path.is_file():
            raise InputError(path, f"missing: run `python -m analysis summarize {directory}` first")
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            raise InputError(path, f"not JSON ({error})") from error
        if not isinstance(summary, dict) or "run_id" not in summary or "engine" not in summary:
            raise InputError(path, "not a summary.json written by `python -m analysis summarize`")
        runs.append(Run(directory, summary))
    seen: dict[str, Path] = {}
    for run in runs:
        if run.run_id in seen:
            raise InputError(run.directory, f"run {run.run_id} is also {seen[run.run_id]}")
        seen[run.run_id] = run.directory
    return runs


def _key_value(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _value_order(value: Any) -> tuple[int, float, str]:
    """Numbers by their value (5 before 30; equal ones, as 5 and 5.0, by their text), anything
    else by its text after them."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return (0, float(value), _key_value(value))
    return (1, 0.0, _key_value(value))


def _parameters_order(parameters: dict[str, Any]) -> tuple[tuple[str, tuple], ...]:
    return tuple((name, _value_order(parameters[name])) for name in sorted(parameters))


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Runs with the same engine, fault schedule and parameters are repetitions."""
    groups: dict[tuple[str, ...], Group] = {}
    for run in runs:
        params = run.parameters()
        fault = str(run.summary.get("fault") or "none")
        key = (run.engine, fault, *(f"{k}={_key_value(params[k])}" for k in sorted(params)))
        groups.setdefault(key, Group(run.engine, fault, params)).runs.append(run)
    ordered = sorted(
        groups.values(), key=lambda g: (g.engine, g.fault, _parameters_order(g.parameters))
    )
    for group in ordered:
        # Named by what differs from the other groups of its engine (each engine records its
        # own settings; the fault has its own place in the label).
        # The engine's studied setting and the delivery guarantee are always shown: groups of
        # two engines are compared only under the same guarantee.
        varying = _varying_parameters([g for g in ordered if g.engine == group.engine])
        studied = group.sweep_parameter
        names = sorted({*varying, *([studied] if studied else []), GUARANTEE})
        shown = [
            f"{name}={group.parameters[name]}"
            for name in names
            if group.parameters.get(name) is not None and name != "fault"
        ]
        engine_faults = {g.fault for g in ordered if g.engine == group.engine}
        faults = [] if len(engine_faults) == 1 else [f"fault={group.fault}"]
        group.label = " ".join([group.engine, *faults, *shown])
    return ordered


def _varying_parameters(groups: Sequence[Group]) -> list[str]:
    names = sorted({name for group in groups for name in group.parameters})
    return [
        name
        for name in names
        if len({_key_value(group.parameters.get(name)) for group in groups}) > 1
    ]


def _format(metric: Metric, value: float | None) -> str:
    if value is None:
        return "–"
    if metric.percent:
        return f"{value * 100:.4g} %"
    if metric.key == "produced":
        return f"{value:.0f}"
    return f"{value:.4g}"


def unequal_footing(groups: Sequence[Group]) -> str:
    """A warning when the runs compared did not carry their records over the same kind of
    connection: some with internal TLS between the job's workers, others without (not turned
    on, or an engine that has none); empty otherwise."""
    runs = [run for group in groups for run in group.runs]
    with_tls = sorted(run.run_id for run in runs if run.tls_internal)
    if not with_tls or len(with_tls) == len(runs):
        return ""
    return (
        f"Not on equal footing: {len(with_tls)} of {len(runs)} runs ran with internal TLS "
        f"(settings.tls_internal: {', '.join(with_tls)}); the others without it (not turned on, "
        "or their engine has none). TLS costs CPU on every record sent between workers "
        "(docs/engines.md)."
    )


def _recovery_cell(run: Run) -> str:
    value, censored = worst_recovery(run.summary)
    if value is None:
        return NO_RECOVERY if run.shows_no_recovery() else "–"
    text = _format(_metric("recovery_bound_s"), value)
    return f">= {text}" if censored else text


def _group_recovery_cell(group: Group) -> str:
    """The mean of the runs' worst recoveries; when any is censored, the mean over the observed
    values and the bounds, a lower bound itself (`>= 41 (1 censored)`). Runs without either
    figure are named, never silently dropped."""
    points = group.recovery_points()
    missing = group.without_recovery()
    note = f" ({missing} {NO_RECOVERY})" if missing else ""
    if not points:
        return f"–{note}"
    values = [value for value, _ in points]
    mean = _format(_metric("recovery_bound_s"), statistics.fmean(values))
    censored = sum(c for _, c in points)
    if censored:
        return f">= {mean} ({censored} censored){note}"
    spread = statistics.stdev(values) if len(values) >= 2 else None
    text = mean if spread is None else f"{mean} ± {_format(_metric('recovery_bound_s'), spread)}"
    return text + note


def _pair(first: float | None, second: float | None) -> str:
    if first is None and second is None:
        return "–"
    latency = _metric("latency_p50_ms")
    return f"{_format(latency, first)} / {_format(latency, second)}"


def _steady_cells(values: Callable[[Metric], float | None]) -> list[str]:
    return [
        _pair(values(_metric("steady_before_p50_ms")), values(_metric("steady_before_p99_ms"))),
        _pair(values(_metric("steady_after_p50_ms")), values(_metric("steady_after_p99_ms"))),
    ]


def markdown_table(groups: Sequence[Group]) -> str:
    metrics = [m for m in METRICS if m.key in TABLE_METRICS]
    metrics.sort(key=lambda m: TABLE_METRICS.index(m.key))
    warning = unequal_footing(groups)
    lines = [
        "# Comparison",
        "",
        *([f"**{warning}**", ""] if warning else []),
        "One row per run; after each group of repetitions (same engine, fault schedule and "
        "parameters) its mean ± sample standard deviation. `verdict` is the run's delivery "
        "guarantee (summary.json `verdict`): `held`, or `VIOLATED` with the acknowledged "
        "messages lost; a run that violated it counts in its group like any other, and the "
        "group's row says how many held. `replayed s/fault` is the seconds of input received "
        "again after each fault (duplicate records / input rate, the mean over the run's "
        "faults), independent of the run's length; the duplicate rate (share of the run's "
        "messages) stays beside it. Recovery is the worst fault's; `>=` marks a lower bound: a "
        "fault after which the run ended before 5 s of on-time delivery (censored, counted "
        "with the time from the fault to the end of producing), and a group mean over such "
        "bounds is a lower bound too, with the number of censored runs. `before` and `after` "
        "are the steady p50 / p99 latency before the first fault (from the steady start the "
        "run shows; `–` when it never reached one) and after the last recovery; the whole-run "
        "percentiles keep their columns. `overloaded` is the "
        "collector's verdict on the backlog between the warm-up and the first fault "
        "(docs/metrics.md): a run flagged `yes` measured a queue, not the engine, and is left "
        "out of its group's mean; `unknown` (counted in the mean) means too few lag samples in "
        "that window, or samples that scatter too much around the backlog's slope, to tell. A "
        "run marked `clock moved` had its wall clock moved past run.json's `wall_clock` limit "
        "while it ran: its latencies and recovery were measured across that step, so it is left "
        "out of the mean too; its verdict, counted by message id, still counts.",
        "",
        "| group | run | overloaded | verdict | "
        + " | ".join(m.label for m in metrics)
        + " | recovery s | before p50 / p99 ms | after p50 / p99 ms |",
        "|---|---|---|---|" + "---|" * (len(metrics) + 3),
    ]
    for group in groups:
        for run in group.runs:
            cells = [_format(metric, run.value(metric)) for metric in metrics]
            cells.append(_recovery_cell(run))
            cells += _steady_cells(run.value)
            moved = " (clock moved)" if run.clock_moved is True else ""
            lines.append(
                f"| {group.label} | {run.run_id}{moved} | {run.overload_text()} | "
                f"{run.verdict_text()} | " + " | ".join(cells) + " |"
            )
        cells = []
        for metric in metrics:
            mean, spread = group.mean(metric), group.spread(metric)
            text = _format(metric, mean)
            if spread is not None:
                text += f" ± {_format(metric, spread)}"
            cells.append(text)
        cells.append(_group_recovery_cell(group))
        cells += _steady_cells(group.mean)
        overloaded = sum(run.left_out == "overloaded" for run in group.runs)
        moved = sum(run.left_out == "clock moved" for run in group.runs)
        unknown = sum(run.overloaded is None for run in group.counted)
        note = f", {overloaded} overloaded left out" if overloaded else ""
        note += f", {moved} with the clock moved left out" if moved else ""
        note += f", {unknown} with overload unknown counted" if unknown else ""
        lines.append(
            f"| **{group.label}** | **mean (n={len(group.counted)}{note})** | | "
            f"{group.held_text()} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines) + "\n"


def _flag(value: bool | None) -> str:
    """true, false, or empty when unknown (a CSV cell)."""
    return "" if value is None else str(value).lower()


def csv_table(groups: Sequence[Group]) -> str:
    """Rows of kind run, mean, sd, ci_low and ci_high; every parameter and metric as a
    column."""
    parameters = sorted({name for group in groups for name in group.parameters})
    out = text_io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            *("group", "engine", "fault", *parameters, "kind", "run_id", "n", "overloaded"),
            "clock_moved",
            "verdict",
            *(m.key for m in METRICS),
        ]
    )
    for group in groups:
        head = [group.label, group.engine, group.fault]
        head += [
            "" if group.parameters.get(p) is None else group.parameters.get(p) for p in parameters
        ]
        for run in group.runs:
            values = [run.value(m) for m in METRICS]
            verdict = "" if run.overloaded is None else str(run.overloaded).lower()
            held = "" if run.holds is None else "held" if run.holds else "violated"
            writer.writerow(
                [
                    *head,
                    *("run", run.run_id, 1, verdict, _flag(run.clock_moved), held),
                    *("" if v is None else v for v in values),
                ]
            )
        for kind, get in (
            ("mean", Group.mean),
            ("sd", Group.spread),
            ("ci_low", _interval_end("low")),
            ("ci_high", _interval_end("high")),
        ):
            values = [get(group, m) for m in METRICS]
            held = group.held_text() if kind == "mean" else ""
            writer.writerow(
                [
                    *head,
                    *(kind, "", len(group.counted), "", "", "" if held == "–" else held),
                    *("" if v is None else v for v in values),
                ]
            )
    return out.getvalue()


def _metric_interval(group: Group, metric: Metric) -> intervals.Interval | None:
    """The group's interval for a metric; recovery is censor-aware (recovery_interval)."""
    if metric.summed:
        return None
    if metric.key == "recovery_bound_s":
        return group.recovery_interval()
    return group.interval(metric)


def _interval_end(end: str) -> Callable[[Group, Metric], float | None]:
    """A CSV row's getter: the low or high end of each headline figure's 95 % interval (empty
    for other metrics, with fewer than two counted values, for a censored recovery and for a
    timeline figure some run did not observe)."""

    def get(group: Group, metric: Metric) -> float | None:
        if metric.key not in (*INTERVAL_METRICS, "recovery_bound_s"):
            return None
        interval = _metric_interval(group, metric)
        return None if interval is None else getattr(interval, end)

    return get


def _interval_text(metric: Metric, interval: intervals.Interval | None, without: int) -> str:
    if interval is None:
        return "–"
    if interval.unobserved:
        return interval.text()
    scale, digits = (100.0, 3) if metric.percent else (1.0, 1)
    text = interval.text(digits=digits, scale=scale, unit=" %" if metric.percent else "")
    return text + (f", {without} without" if without else "")


INTERVALS_NOTE = (
    "Each group's mean over its counted runs and its two-sided 95 % Student t interval "
    "[low, high] (docs/metrics.md); a group of one run has none. Percentages are % of the "
    "run's messages. Recovery and its phases are each run's worst fault, in seconds from "
    "the fault's start. A group with a censored recovery gives the Kaplan-Meier median of "
    "its runs' recoveries instead, a lower bound (`>=`) when the estimated share still "
    "unrecovered never falls to one half. A phase (detected, whole again, first output, "
    "caught up) that some counted run did not observe gets no interval, and says how many "
    "runs did not. `k without`: counted runs with no steady window for the figure (never "
    "reached before the fault, none after the recovery)."
)


def intervals_section(groups: Sequence[Group]) -> str:
    """Each group's headline figures as mean [95 % interval] over its counted runs."""
    lines = ["## Intervals over repetitions", "", INTERVALS_NOTE, ""]
    columns, rows = interval_rows(groups)
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def interval_rows(groups: Sequence[Group]) -> tuple[list[str], list[list[str]]]:
    """The Intervals section's table, as columns and rows (the benches publish it too)."""
    metrics = [_metric(key) for key in INTERVAL_METRICS]
    columns = ["group", "n", "recovery s", *(m.label for m in metrics)]
    rows = [
        [
            group.label,
            str(len(group.counted)),
            *(
                _interval_text(m, _metric_interval(group, m), _without(group, m))
                for m in (_metric("recovery_bound_s"), *metrics)
            ),
        ]
        for group in groups
    ]
    return columns, rows


def _compared_metrics() -> list[Metric]:
    """The figures the Comparisons section and the findings judge, recovery last."""
    return [_metric(key) for key in COMPARED_METRICS] + [_metric("recovery_bound_s")]


def compared_pairs(groups: Sequence[Group]) -> list[tuple[Group, Group]]:
    """The pairs of groups the Comparisons section judges: every pair up to ALL_PAIRS_UP_TO
    groups; past it, an engine's groups of one fault whose other parameters are equal at
    neighbouring values of its studied setting, and two engines' groups at the same value of
    their studied settings whose shared settings agree (any fault of each)."""
    if len(groups) <= ALL_PAIRS_UP_TO:
        return [(a, b) for i, a in enumerate(groups) for b in groups[i + 1 :]]

    def studied(group: Group) -> Any:
        return group.parameters.get(group.sweep_parameter or "")

    def others(group: Group) -> str:
        name = group.sweep_parameter
        return _key_value({k: v for k, v in group.parameters.items() if k != name})

    pairs: list[tuple[Group, Group]] = []
    lines: dict[tuple[str, str, str], list[Group]] = {}
    for group in groups:
        value = studied(group)
        if isinstance(value, int | float) and not isinstance(value, bool):
            lines.setdefault((group.engine, group.fault, others(group)), []).append(group)
    for line in lines.values():
        line.sort(key=studied)
        pairs += list(zip(line, line[1:], strict=False))

    def shared_equal(a: Group, b: Group) -> bool:
        """The settings both engines' runs recorded (other than their studied ones and the
        fault, which is each engine's own) agree."""
        sweeps = {a.sweep_parameter, b.sweep_parameter, "fault"}
        shared = [
            name
            for name in a.parameters.keys() & b.parameters.keys()
            if name not in sweeps
            and a.parameters[name] is not None
            and b.parameters[name] is not None
        ]
        return all(_key_value(a.parameters[n]) == _key_value(b.parameters[n]) for n in shared)

    pairs += [
        (a, b)
        for i, a in enumerate(groups)
        for b in groups[i + 1 :]
        if a.engine != b.engine
        and studied(a) is not None
        and studied(a) == studied(b)
        and shared_equal(a, b)
    ]
    return pairs


def _comparison_cell(first: Group, second: Group, metric: Metric) -> str:
    judged = intervals.separation(_metric_interval(first, metric), _metric_interval(second, metric))
    values = (_observed(first, metric), _observed(second, metric))
    if judged != "overlap":
        return judged
    needed = intervals.repetitions_to_separate(*values)
    if needed is None:
        return "overlap: no difference shown"
    return f"overlap: no difference shown (about {needed} repetitions each would separate them)"


def comparisons_section(groups: Sequence[Group]) -> str:
    """For each compared pair and figure: whether the two groups' 95 % intervals separate;
    where they overlap, the repetitions per group that would separate them if the observed
    means and spread held."""
    pairs = compared_pairs(groups)
    if not pairs:
        return ""
    metrics = _compared_metrics()
    lines = [
        "## Comparisons",
        "",
        "Whether two groups' 95 % intervals separate (no common value: a difference shown) or "
        "overlap (no difference shown at this number of repetitions). Where they overlap, the "
        "repetitions per group at which intervals as wide as each group's observed sample "
        "standard deviation gives would no longer overlap, if the two means held: a "
        "projection, not a promise. A censored recovery has no interval, so it is not judged."
        + (
            ""
            if len(groups) <= ALL_PAIRS_UP_TO
            else " With more than "
            f"{ALL_PAIRS_UP_TO} groups, only neighbouring values of an engine's studied setting "
            "and two engines at the same value of theirs are compared."
        ),
        "",
        "| first | second | " + " | ".join(m.label for m in metrics) + " |",
        "|---|---|" + "---|" * len(metrics),
    ]
    for first, second in pairs:
        cells = [_comparison_cell(first, second, m) for m in metrics]
        lines.append(f"| {first.label} | {second.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _observed(group: Group, metric: Metric) -> list[float]:
    """The values an interval of the metric is taken over (recovery: values and bounds)."""
    if metric.key == "recovery_bound_s":
        return [value for value, _ in group.recovery_points()]
    return group.values(metric)


def _without(group: Group, metric: Metric) -> int:
    if metric.key == "recovery_bound_s":
        return group.without_recovery()
    return group.without(metric)


def _finding(
    first: Group, a: intervals.Interval, second: Group, b: intervals.Interval, metric: Metric
) -> str:
    """The sentence for two groups whose intervals for the figure separate, with each group's
    n and the runs without a value."""
    (low_group, low), (high_group, high) = sorted(
        ((first, a), (second, b)), key=lambda pair: pair[1].estimate
    )

    def shown(group: Group, interval: intervals.Interval) -> str:
        text = _interval_text(metric, interval, _without(group, metric))
        return f"{text} (n={len(group.counted)})"

    return (
        f"{low_group.label} had a lower {metric.label} than {high_group.label}: "
        f"{shown(low_group, low)} against {shown(high_group, high)}."
    )


def findings(groups: Sequence[Group]) -> str:
    """What the runs show, written from the verdicts and the intervals alone: loss over every
    run; for each compared pair, each figure whose intervals separate as a sentence, the
    figures whose intervals overlap as "no difference shown", and those not judged and why."""
    runs = [run for group in groups for run in group.runs]
    judged = [run for run in runs if run.holds is not None]
    violated = [run for run in judged if run.holds is False]
    lines = ["## What this study shows", ""]
    lossy = [run for run in judged if (run.verdict_count("lost") or 0) > 0]
    if not judged:
        lines.append("- Verdicts: no run has one, so nothing is said about loss or duplicates.")
    elif not violated:
        lines.append(
            f"- Verdicts: {len(judged)} of {len(judged)} runs with a verdict held their guarantee."
        )
    if judged and not lossy:
        lines.append("- Loss: no run with a verdict lost an acknowledged message.")
    for group in groups:
        bad = [run for run in group.runs if run.holds is False]
        if bad:
            lines.append(
                f"- Verdicts: {group.label}: {len(bad)} of {len(group.runs)} runs violated "
                f"their guarantee: {', '.join(run.verdict_text() for run in bad)}."
            )
        # At most once allows loss: it is counted, not a violation.
        allowed = [
            run for run in group.runs if run.holds is True and (run.verdict_count("lost") or 0) > 0
        ]
        if allowed:
            counts = ", ".join(f"{run.verdict_count('lost'):,}" for run in allowed)
            lines.append(
                f"- Loss: {group.label}: {len(allowed)} of {len(group.runs)} runs lost "
                f"acknowledged messages, as their guarantee allows ({counts})."
            )
    metrics = _compared_metrics()
    for first, second in compared_pairs(groups):
        said, overlap, unjudged = [], [], []
        for metric in metrics:
            a, b = _metric_interval(first, metric), _metric_interval(second, metric)
            verdict = intervals.separation(a, b)
            if verdict == "separate":
                assert a is not None and b is not None
                said.append(_finding(first, a, second, b, metric))
            elif verdict == "overlap":
                overlap.append(metric.label)
            else:
                unjudged.append(f"{metric.label} ({verdict.removeprefix('not judged: ')})")
        if overlap:
            said.append(f"No difference shown in {', '.join(overlap)} (the intervals overlap).")
        if unjudged:
            said.append(f"Not judged: {'; '.join(unjudged)}.")
        lines.append(f"- **{first.label} against {second.label}.** " + " ".join(said))
    lines += [
        "",
        "Each sentence follows from the 95 % intervals above; overlapping intervals say only "
        "that these repetitions show no difference, not that there is none.",
    ]
    return "\n".join(lines) + "\n"


def _bars(
    groups: Sequence[Group], metrics: Sequence[Metric], title: str, ylabel: str, path: Path
) -> bool:
    if not any(group.values(m) for group in groups for m in metrics):
        return False
    figure = Figure(figsize=(max(SIZE[0], 1.6 * len(groups)), SIZE[1]))
    axes = figure.add_subplot()
    width = 0.8 / len(metrics)
    scale = 100 if all(m.percent for m in metrics) else 1
    for index, metric in enumerate(metrics):
        xs = [g + (index - (len(metrics) - 1) / 2) * width for g in range(len(groups))]
        means = [(group.mean(metric) or 0) * scale for group in groups]
        errors = [(group.spread(metric) or 0) * scale for group in groups]
        censored_bars = metric.key == "recovery_bound_s" and any(
            c for g in groups for _, c in g.recovery_points()
        )
        label = metric.label + (" (>= where censored)" if censored_bars else "")
        axes.bar(xs, means, width, yerr=errors, capsize=3, label=label)
        for group_index, group in enumerate(groups):
            if metric.key == "recovery_bound_s":
                # A censored run's value is a lower bound: an upward triangle.
                for value, censored in group.recovery_points():
                    marker = "r^" if censored else "k."
                    axes.plot(xs[group_index], value * scale, marker, ms=5 if censored else 3)
                continue
            for value in group.values(metric):
                axes.plot(xs[group_index], value * scale, "k.", ms=3)
    axes.set_xticks(range(len(groups)), [g.label for g in groups], rotation=20, ha="right")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    if len(metrics) > 1:
        axes.legend(fontsize=8)
    axes.grid(True, axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    return True


def _metric(key: str) -> Metric:
    return next(m for m in METRICS if m.key == key)


def _sweep(groups: Sequence[Group], path: Path) -> bool:
    """Duplicate rate and recovery time against each engine's parameter."""
    # Each engine's parameter, as its groups name it, in the groups' order (by engine).
    sweep = {g.engine: name for g in groups if (name := g.sweep_parameter)}
    panels = [
        (e, m)
        for e in sweep
        for m in (_metric("replayed_s"), _metric("duplicate_rate"), _metric("recovery_bound_s"))
        if any(g.values(m) and g.parameters.get(sweep[e]) is not None for g in groups)
    ]
    if not panels:
        return False
    figure = Figure(figsize=(SIZE[0], 3.2 * len(panels)))
    for index, (engine_name, metric) in enumerate(panels, start=1):
        axes = figure.add_subplot(len(panels), 1, index)
        parameter = sweep[engine_name]
        scale = 100 if metric.percent else 1
        mine = [
            g for g in groups if g.engine == engine_name and g.parameters.get(parameter) is not None
        ]
        by_value: dict[float, list[float]] = {}
        for group in mine:
            x = float(group.parameters[parameter])
            points = (
                group.recovery_points()
                if metric.key == "recovery_bound_s"
                else [(value, False) for value in group.values(metric)]
            )
            for value, censored in points:
                by_value.setdefault(x, []).append(value * scale)
                # A censored recovery is a lower bound: an upward triangle.
                axes.plot(x, value * scale, "^" if censored else "o", color="tab:blue", alpha=0.5)
        xs = sorted(by_value)
        axes.plot(xs, [statistics.fmean(by_value[x]) for x in xs], "-", color="tab:blue")
        axes.set_xlabel(parameter)
        bound = " (^: >= , censored)" if metric.key == "recovery_bound_s" else ""
        axes.set_ylabel(metric.label + (" (%)" if metric.percent else "") + bound)
        axes.set_title(f"{engine_name}: {metric.label} against {parameter}")
        axes.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    return True


def draw(groups: Sequence[Group], directory: Path) -> dict[str, bool]:
    """Each comparison plot's file name, and whether it was drawn (False: no data for it)."""
    directory.mkdir(parents=True, exist_ok=True)
    latency = [_metric(k) for k in ("latency_p50_ms", "latency_p99_ms", "latency_p99.9_ms")]
    jobs = (
        (
            "latency_percentiles.png",
            lambda p: _bars(groups, latency, "Latency percentiles per group", "ms", p),
        ),
        (
            "replayed.png",
            lambda p: _bars(
                groups,
                [_metric("replayed_s")],
                "Input replayed per fault (duplicate records / input rate)",
                "seconds of input per fault",
                p,
            ),
        ),
        (
            "duplicate_rate.png",
            lambda p: _bars(
                groups,
                [_metric("duplicate_rate"), _metric("loss_rate")],
                "Duplicate and loss rate per group",
                "% of produced",
                p,
            ),
        ),
        (
            "recovery.png",
            lambda p: _bars(
                groups,
                [_metric("stall_s"), _metric("recovery_bound_s")],
                "Stall and recovery time per group (worst fault of each run; censored "
                "recoveries as lower bounds)",
                "seconds",
                p,
            ),
        ),
        ("parameter_sweep.png", lambda p: _sweep(groups, p)),
    )
    drawn = {name: job(directory / name) for name, job in jobs}
    for name, made in drawn.items():
        if not made:  # a plot of an earlier comparison in the same place would be stale
            (directory / name).unlink(missing_ok=True)
    return drawn


def plots_section(groups: Sequence[Group], drawn: dict[str, bool]) -> str:
    """The comparison's Plots section: the plots drawn, then the ones not drawn and why (a
    plot shows only the runs counted in a mean, so a study whose runs were all left out of the
    means has none)."""
    not_drawn = [name for name, made in drawn.items() if not made]
    lines = [f"![{name}]({PLOTS_DIR}/{name})\n" for name, made in drawn.items() if made]
    if not_drawn:
        runs = [run for group in groups for run in group.runs]
        overloaded = sum(run.left_out == "overloaded" for run in runs)
        moved = sum(run.left_out == "clock moved" for run in runs)
        why = "no run counted in a mean has a value for them"
        if overloaded:
            why += f" ({overloaded} of {len(runs)} runs flagged overloaded and left out)"
        if moved:
            why += f" ({moved} of {len(runs)} runs with the clock moved and left out)"
        lines.append(f"Not drawn, as {why}: {', '.join(not_drawn)}.\n")
    return "\n## Plots\n\n" + "\n".join(lines) + "\n"


def compare(directories: Sequence[Path], out: Path) -> list[Group]:
    runs = load_runs(directories)
    groups = group_runs(runs)
    out.mkdir(parents=True, exist_ok=True)
    drawn = draw(groups, out / PLOTS_DIR)
    text = (
        markdown_table(groups)
        + "\n"
        + intervals_section(groups)
        + ("\n" + comparison if (comparison := comparisons_section(groups)) else "")
        + plots_section(groups, drawn)
    )
    write_atomic(out / "comparison.csv", csv_table(groups))
    write_atomic(out / "comparison.md", text)
    return groups


def printable(groups: Sequence[Group]) -> str:
    """A short table for the terminal: one line per group."""
    keys = ("replayed_s", "duplicate_rate", "latency_p99_ms")
    lines = []
    width = max(len(g.label) for g in groups)
    for group in groups:
        held = group.held_text()
        cells = [] if held == "–" else [held]
        for key in keys:
            metric = _metric(key)
            mean = group.mean(metric)
            cells.append(f"{metric.label} {_format(metric, mean)}")
        cells.append(f"recovery s {_group_recovery_cell(group)}")
        lines.append(f"{group.label.ljust(width)}  n={len(group.counted)}  " + "  ".join(cells))
    warning = unequal_footing(groups)
    return "\n".join([*lines, *([warning] if warning else [])])
