"""A spec expanded into its runs: every combination, named, scaled and put in a shuffled order.

A run's name is `<study>-<engine>-<setting>_<value>...-<fault>-r<repetition>`, with only the
settings the spec gives as lists (they are what varies), so the same spec always gives the
same names: that is how a study finds the runs it already has.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from analysis.study.kit import Kit
from analysis.study.spec import AdviceSpec, FaultSpec, Scalar, SpecError, StudySpec

# Timeouts that guard a measurement rather than shape it: --scale leaves them alone.
# Durations that guard a measurement rather than shape the run: a shorter study does not make an
# engine recover, or a drain settle, any faster.
UNSCALED_DURATIONS = frozenset(
    {"probe_timeout_s", "quiet_s", "drain_timeout_s", "lost_wait_s", "recovery_window_s"}
)
# Settings that set how long a run produces (with `rate`): --scale shortens `count`.
SCALED_COUNT = "count"
# Time a run takes beyond producing, the commit wait and the quiet period (estimated_s adds
# those): the playbook's checks, the job build cache, topics, submission, readiness probe,
# evidence, stopping the job and the recovery step. From the smoke study's runs on the test
# hosts (docs/studies.md, the estimate); the estimate takes it only without measured runs
# (analysis/study/estimate.py).
RUN_OVERHEAD_S = 115.0
# The analysis after the last run, one local Spark application over the complete runs without a
# summary.json: Spark's start and a share per run, fit to studies of 2 and 6 runs measured on the
# control node (docs/studies.md). Runs with many more messages take longer.
ANALYSIS_START_S = 35.0
ANALYSIS_PER_RUN_S = 5.0
RUN_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True)
class PlannedRun:
    run_id: str
    engine: str
    fault: str
    # The run's settings as experiment extra vars (short names), fault schedule included.
    parameters: dict[str, Scalar]
    repetition: int

    def extravars(self, results_dir: str) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "fault": self.fault,
            **self.parameters,
            "run_id": self.run_id,
            "results_dir": results_dir,
            # The study analyses its runs together at the end (report.write_report): one
            # Spark start instead of one per run.
            "analyze_on": "none",
        }


@dataclass(frozen=True)
class ScaledValue:
    key: str
    before: Scalar
    after: Scalar


@dataclass(frozen=True)
class Plan:
    study: str  # the study's name, with the scale when not 1
    spec: StudySpec
    scale: float
    scaled: tuple[ScaledValue, ...]
    order_seed: int
    runs: tuple[PlannedRun, ...]  # in the order they run
    # Under load:, each engine's rate from its measured capacity; empty until it is measured
    # (the runs then carry the capacity search's first rate, which fixes no figure: their
    # length is produce_s whatever the rate).
    rates: dict[str, float] = field(default_factory=dict)


def scale_label(scale: float) -> str:
    return f"{scale:g}".replace(".", "p")


def study_name(spec: StudySpec, scale: float) -> str:
    return spec.name if scale == 1 else f"{spec.name}-scale{scale_label(scale)}"


def _is_duration(name: str) -> bool:
    return name.endswith("_s") and name not in UNSCALED_DURATIONS


def _scale_value(value: Scalar, scale: float) -> Scalar:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    scaled = math.floor(value * scale + 0.5)
    return max(1, scaled) if value >= 1 else value


def _scale_values(
    key: str, values: tuple[Scalar, ...], scale: float, spec: StudySpec, found: list[ScaledValue]
) -> tuple[Scalar, ...]:
    scaled = tuple(_scale_value(value, scale) for value in values)
    for before, after in zip(values, scaled, strict=True):
        if before != after:
            found.append(ScaledValue(key, before, after))
    if len(set(scaled)) < len(scaled):
        raise SpecError(
            spec.source,
            key,
            f"--scale {scale:g} makes {list(values)} into {list(scaled)}, the same value twice: "
            "choose a larger scale",
        )
    return scaled


def scale_spec(spec: StudySpec, scale: float) -> tuple[StudySpec, tuple[ScaledValue, ...]]:
    """The spec with every duration it gives multiplied by scale (rounded to whole seconds, at
    least 1): `count` (the run's length at its rate), each `*_s` setting but the timeouts that
    guard a measurement, the faults' times and the advice's mtbf_s."""
    if not 0 < scale <= 1:
        raise SpecError(spec.source, "--scale", f"{scale:g} must be above 0 and at most 1")
    if scale == 1:
        return spec, ()
    found: list[ScaledValue] = []
    parameters = {
        name: (
            _scale_values(f"parameters.{name}", values, scale, spec, found)
            if (name == SCALED_COUNT or _is_duration(name)) and name not in spec.per_engine
            else values
        )
        for name, values in spec.parameters.items()
    }
    faults = tuple(
        replace(
            fault,
            schedule={
                name: (
                    _scale_values(f"{fault.key}.{name}", values, scale, spec, found)
                    if _is_duration(name)
                    else values
                )
                for name, values in fault.schedule.items()
            },
        )
        for fault in spec.faults
    )
    per_engine = {
        name: {
            engine: (
                _scale_values(f"parameters.{name}.{engine}", values, scale, spec, found)
                if name == SCALED_COUNT or _is_duration(name)
                else values
            )
            for engine, values in by_engine.items()
        }
        for name, by_engine in spec.per_engine.items()
    }
    parameters = {
        name: tuple(dict.fromkeys(v for vs in per_engine[name].values() for v in vs))
        if name in per_engine
        else values
        for name, values in parameters.items()
    }
    advice = spec.advice
    if advice is not None:
        mtbf_s = advice.mtbf_s * scale
        found.append(ScaledValue("advice.mtbf_s", advice.mtbf_s, mtbf_s))
        advice = AdviceSpec(mtbf_s=mtbf_s, max_p99_ms=advice.max_p99_ms)
    produce = spec.produce_s
    if produce is not None:
        (scaled_produce,) = _scale_values("produce_s", (produce,), scale, spec, found)
        produce = int(scaled_produce)
    return replace(
        spec,
        parameters=parameters,
        per_engine=per_engine,
        faults=faults,
        advice=advice,
        produce_s=produce,
    ), tuple(found)


def _name_part(value: Scalar) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).lower().replace(".", "p")
    return re.sub(r"[^a-z0-9_-]+", "-", text).strip("-") or "empty"


def _fault_variants(fault: FaultSpec) -> list[tuple[str, dict[str, Scalar]]]:
    names = list(fault.schedule)
    variants = []
    for values in itertools.product(*(fault.schedule[name] for name in names)):
        schedule = dict(zip(names, values, strict=True))
        label = "-".join(
            [fault.label or fault.fault, *(f"{n}_{_name_part(schedule[n])}" for n in fault.listed)]
        )
        variants.append((label, schedule))
    return variants


def load_parameters(spec: StudySpec, engine: str, rates: Mapping[str, float]) -> dict[str, Scalar]:
    """Under load:, the rate and count of an engine's runs: its measured rate (else the capacity
    search's first) for produce_s seconds."""
    if spec.load is None or spec.produce_s is None or spec.capacity is None:
        return {}
    rate = rates.get(engine, spec.capacity.from_rate)
    return {"rate": rate, "count": math.ceil(rate * spec.produce_s)}


def expand(
    spec: StudySpec, kit: Kit, study: str, rates: Mapping[str, float] | None = None
) -> list[PlannedRun]:
    """Every combination in spec order: engines, their settings, their faults, repetitions."""
    runs: list[PlannedRun] = []
    where: dict[str, str] = {}
    for engine in spec.engines:
        names = [p for p in spec.names_for(engine) if kit.owner(p) in (None, engine)]
        for values in itertools.product(*(spec.values_for(name, engine) for name in names)):
            parameters = {
                **dict(zip(names, values, strict=True)),
                **load_parameters(spec, engine, rates or {}),
            }
            # A swept guarantee runs on the engines that offer it (the spec check made sure each
            # engine offers one of them).
            if not kit.offers(engine, parameters.get("guarantee", kit.defaults["guarantee"])):
                continue
            setting_parts = [
                f"{name}_{_name_part(parameters[name])}" for name in names if name in spec.listed
            ]
            for fault in spec.faults_for(engine):
                for label, schedule in _fault_variants(fault):
                    for repetition in range(1, spec.repetitions + 1):
                        run_id = "-".join([study, engine, *setting_parts, label, f"r{repetition}"])
                        if run_id in where and where[run_id] != fault.key:
                            raise SpecError(
                                spec.source,
                                fault.key,
                                f"gives the same run names as {where[run_id]} ({run_id}): give "
                                "one of them a label",
                            )
                        if run_id in where or not RUN_ID_PATTERN.match(run_id):
                            raise SpecError(
                                spec.source,
                                fault.key,
                                f"makes the run name {run_id!r}, which is not unique or not a "
                                "valid run id: give the fault a label",
                            )
                        where[run_id] = fault.key
                        run = PlannedRun(
                            run_id=run_id,
                            engine=engine,
                            fault=fault.fault,
                            parameters={**parameters, **schedule},
                            repetition=repetition,
                        )
                        check_run(run, spec, kit, fault)
                        runs.append(run)
    return runs


def setting(run: PlannedRun, kit: Kit, name: str) -> Any:
    """The value the run gets: the spec's, else the experiment's default."""
    return run.parameters.get(name, kit.defaults.get(name))


def produce_s(run: PlannedRun, kit: Kit) -> int:
    """Seconds the producer sends, as the experiment computes it: ceil(count / rate)."""
    return math.ceil(setting(run, kit, "count") / setting(run, kit, "rate"))


def check_run(run: PlannedRun, spec: StudySpec, kit: Kit, fault: FaultSpec) -> None:
    """What would make a run measure nothing or fail: a warm-up as long as the run, a fault
    after it, an exactly-once sink that is not idempotent (the experiment refuses it)."""
    if setting(run, kit, "rate") <= 0 or setting(run, kit, "count") < 1:
        raise SpecError(spec.source, "parameters", "count and rate must be above 0")
    if setting(run, kit, "guarantee") == "exactly_once" and not setting(
        run, kit, "sink_idempotence"
    ):
        raise SpecError(
            spec.source,
            "parameters.sink_idempotence",
            f"{run.run_id}: guarantee exactly_once needs sink_idempotence true (a "
            "transactional Kafka producer is idempotent): the experiment refuses it",
        )
    length = produce_s(run, kit)
    warmup = setting(run, kit, "warmup_s")
    if warmup >= length:
        raise SpecError(
            spec.source,
            "parameters.warmup_s" if "warmup_s" in spec.parameters else "parameters.count",
            f"{run.run_id}: warmup_s={warmup} covers the whole run ({length} s of messages): "
            f"lower warmup_s or raise {'produce_s' if spec.load is not None else 'count'}",
        )
    lost_wait, drain_timeout = (
        setting(run, kit, "lost_wait_s"),
        setting(run, kit, "drain_timeout_s"),
    )
    if lost_wait is not None and drain_timeout is not None and lost_wait >= drain_timeout:
        raise SpecError(
            spec.source,
            "parameters.lost_wait_s" if "lost_wait_s" in spec.parameters else "parameters",
            f"{run.run_id}: lost_wait_s={lost_wait:g} must be shorter than "
            f"drain_timeout_s={drain_timeout:g}, or a lossy run could never end complete",
        )
    if run.fault == "none":
        return
    # The experiment's own rule (roles/experiment/tasks/validate.yml): every fault, undo
    # included, ends while the producer still sends.
    at = setting(run, kit, "fault_at_s")
    count = setting(run, kit, "fault_count") or 1
    every = setting(run, kit, "fault_every_s") or 0
    span = at + (count - 1) * every + setting(run, kit, "duration_s")
    if span > length:
        raise SpecError(
            spec.source,
            f"{fault.key}.fault_at_s",
            f"{run.run_id}: the faults (the first at fault_at_s={at:g}, {count:g} of "
            f"duration_s={setting(run, kit, 'duration_s'):g}, one every {every:g} s) end "
            f"{span:g} s after the producer's start, but it sends for {length} s: schedule "
            "them earlier, shorten them or raise count",
        )
    window = setting(run, kit, "recovery_window_s") or 0
    if length - span < window:
        needed = math.ceil((span + window) * setting(run, kit, "rate"))
        longer = (
            f"Raise produce_s to at least {math.ceil(span + window)}"
            if spec.load is not None
            else f"Raise count to at least {needed:,}"
        )
        raise SpecError(
            spec.source,
            f"{fault.key}.fault_at_s",
            f"{run.run_id}: the last fault ends {span:g} s into a run that sends for {length} s, "
            f"leaving {length - span:g} s, less than recovery_window_s={window:g}: the run may "
            f"not show the recovery. {longer}, start the fault earlier "
            "(fault_at_s), or lower recovery_window_s (0 turns this check off)",
        )


def estimated_s(run: PlannedRun, kit: Kit, overhead_s: float = RUN_OVERHEAD_S) -> float:
    """Expected wall time: producing, the wait for the input to be committed, the quiet
    period that ends the drain, and the run's overhead."""
    # After the producer, the drain waits until the job's consumer group committed the whole
    # input: every commits_offsets period of the engine's manifest.
    commit = kit.commits_offsets.get(run.engine)
    commit_s = float(setting(run, kit, commit) or 0) if commit else 0.0
    return produce_s(run, kit) + commit_s + float(setting(run, kit, "quiet_s")) + overhead_s


def analysis_estimate_s(runs: int) -> float:
    """Expected wall time of the analysis after the last run, for this many runs to summarise."""
    return ANALYSIS_START_S + runs * ANALYSIS_PER_RUN_S if runs > 0 else 0.0


def shuffled(runs: Sequence[PlannedRun], seed: int) -> list[PlannedRun]:
    order = list(runs)
    random.Random(seed).shuffle(order)
    return order


def make_plan(
    spec: StudySpec,
    kit: Kit,
    scale: float,
    order_seed: int,
    rates: Mapping[str, float] | None = None,
) -> Plan:
    """Raises SpecError for a spec that cannot run at this scale."""
    scaled_spec, scaled = scale_spec(spec, scale)
    study = study_name(spec, scale)
    runs = shuffled(expand(scaled_spec, kit, study, rates), order_seed)
    return Plan(study, scaled_spec, scale, scaled, order_seed, tuple(runs), dict(rates or {}))


def with_rates(plan: Plan, rates: Mapping[str, float]) -> Plan:
    """The plan with each engine's runs at its measured rate (load:), names and order kept."""
    runs = tuple(
        replace(run, parameters={**run.parameters, **load_parameters(plan.spec, run.engine, rates)})
        for run in plan.runs
    )
    return replace(plan, runs=runs, rates=dict(rates))
