"""A study spec (docs/studies.md): parsed and checked whole before any run starts.

Every problem raises SpecError naming the spec file, the key (`parameters.rate`,
`faults[1].fault_at_s`) and the fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from analysis.study.capacity import STEP, CapacitySpec
from analysis.study.kit import FAULT_SCHEDULE_PARAMETERS, NO_FAULT, Kit

Scalar = str | int | float | bool
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
NAME_RULE = "lower-case letters, digits, '_' and '-', starting with a letter or digit"
TOP_KEYS = (
    "name",
    "description",
    "engines",
    "parameters",
    "faults",
    "repetitions",
    "order_seed",
    "max_failures",
    "advice",
    "load",
    "produce_s",
    "capacity",
)
FAULT_KEYS = ("fault", "engines", "label", *FAULT_SCHEDULE_PARAMETERS)
ADVICE_KEYS = ("mtbf_s", "max_p99_ms")
CAPACITY_KEYS = ("p99_bound_ms", "from_rate", "runs", "steady_s", "warmup_s")
DEFAULT_MAX_FAILURES = 3
# The one setting that must be a number above 0 but need not be whole (the experiment's
# "Check the rate").
RATE = "rate"
GUARANTEE = "guarantee"


class SpecError(Exception):
    """A bad spec: which file, which key, what is wrong and how to fix it."""

    def __init__(self, source: Path | str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        super().__init__(f"{source}: {key}: {problem}" if key else f"{source}: {problem}")


@dataclass(frozen=True)
class FaultSpec:
    """One entry of `faults`: a fault type and its schedule, each setting one or more values."""

    fault: str
    engines: tuple[str, ...]
    schedule: dict[str, tuple[Scalar, ...]]
    # Settings given as lists: they vary, so they are part of the run names.
    listed: tuple[str, ...]
    label: str | None
    key: str  # where it is in the spec, for messages: faults[2]


@dataclass(frozen=True)
class AdviceSpec:
    mtbf_s: float
    max_p99_ms: float | None


@dataclass(frozen=True)
class StudySpec:
    name: str
    description: str
    engines: tuple[str, ...]
    # Experiment settings in spec order, each with its values (one unless given as a list);
    # for a setting given per engine, every engine's values together.
    parameters: dict[str, tuple[Scalar, ...]]
    listed: tuple[str, ...]
    faults: tuple[FaultSpec, ...]
    repetitions: int
    order_seed: int | None
    max_failures: int
    advice: AdviceSpec | None
    source: Path
    # Settings given per engine ({engine: value, other engine: value}): name -> engine ->
    # its values. An engine the mapping leaves out runs the experiment's default.
    per_engine: dict[str, dict[str, tuple[Scalar, ...]]] = field(default_factory=dict)
    # `load:` the fraction of each engine's measured capacity its runs send at, each for
    # produce_s seconds; None: the runs send at the spec's (or the default) rate.
    load: float | None = None
    produce_s: int | None = None
    # How capacity is measured before the runs (given, or implied by load); None: not measured.
    capacity: CapacitySpec | None = None

    def faults_for(self, engine: str) -> tuple[FaultSpec, ...]:
        return tuple(fault for fault in self.faults if engine in fault.engines)

    def names_for(self, engine: str) -> list[str]:
        """The settings an engine's runs get from the spec: a per-engine one only where the
        mapping names the engine (the caller drops another engine's own settings)."""
        return [
            name
            for name in self.parameters
            if name not in self.per_engine or engine in self.per_engine[name]
        ]

    def values_for(self, name: str, engine: str) -> tuple[Scalar, ...]:
        """The values an engine's runs take for a setting of names_for(engine)."""
        if name in self.per_engine:
            return self.per_engine[name][engine]
        return self.parameters[name]


def load(path: Path, kit: Kit) -> StudySpec:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError(path, "", f"cannot read the spec ({error.strerror})") from error
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SpecError(path, "", f"not valid YAML ({error})") from error
    return parse(data, kit, path)


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(
    source: Path, key: str, value: Any, minimum: int, why: str = "", maximum: int | None = None
) -> int:
    if maximum is not None and (
        not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum
    ):
        raise SpecError(
            source, key, f"{value!r} must be a whole number from {minimum} to {maximum}{why}"
        )
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise SpecError(source, key, f"{value!r} must be a whole number of at least {minimum}{why}")
    return value


def _positive(source: Path, key: str, value: Any, what: str = "a number") -> float:
    if not _is_number(value) or not value > 0:
        raise SpecError(source, key, f"{value!r} must be {what} above 0")
    return float(value)


def _values(source: Path, key: str, value: Any) -> tuple[tuple[Scalar, ...], bool]:
    """A setting's values and whether it was given as a list; refuses empty lists, duplicates
    and values that are not single numbers, strings or booleans."""
    listed = isinstance(value, list)
    values = value if listed else [value]
    if listed and not values:
        raise SpecError(source, key, "an empty list runs nothing: give at least one value")
    for index, item in enumerate(values):
        where = f"{key}[{index}]" if listed else key
        if item is None or isinstance(item, dict | list):
            raise SpecError(
                source, where, f"{item!r} is not a value: give a number, a string or true/false"
            )
    seen: list[Scalar] = []
    for item in values:
        if any(type(item) is type(other) and item == other for other in seen):
            raise SpecError(source, key, f"{item!r} is listed twice: give each value once")
        seen.append(item)
    return tuple(values), listed


def _check_type(source: Path, key: str, values: Sequence[Scalar], default: Any) -> None:
    """A value has the kind of the setting's default: number, true/false or string."""
    if isinstance(default, bool):
        wanted, fits = "true or false", lambda v: isinstance(v, bool)
    elif _is_number(default):
        wanted, fits = "a number", _is_number
    else:
        wanted, fits = "a string", lambda v: isinstance(v, str)
    for value in values:
        if not fits(value):
            raise SpecError(source, key, f"{value!r} must be {wanted} (the default is {default!r})")


def _check_range(
    source: Path,
    key: str,
    values: Sequence[Scalar],
    listed: bool,
    minimum: int | None,
    positive: bool,
    maximum: int | None = None,
) -> None:
    """The experiment's own range rules, so that a study refuses before its first run what
    every run would refuse: a whole number of at least `minimum` (the experiment's
    whole-number lists), or a number above 0 (the rate)."""
    for index, value in enumerate(values):
        where = f"{key}[{index}]" if listed else key
        if minimum is not None:
            meaning = " (0 derives it or turns it off)" if minimum == 0 else ""
            why = f"{meaning}: the experiment refuses it (roles/experiment/tasks/validate.yml)"
            _whole(source, where, value, minimum, why, maximum)
        if positive:
            _positive(source, where, value, "a number of messages/s")


def _check_choices(
    source: Path, key: str, values: Sequence[Scalar], listed: bool, choices: Sequence[str] | None
) -> None:
    """A setting with choices in the experiment's argument spec takes one of them."""
    if not choices:
        return
    for index, value in enumerate(values):
        if value not in choices:
            raise SpecError(
                source,
                f"{key}[{index}]" if listed else key,
                f"{value!r} is not one of {', '.join(choices)} (the experiment's argument "
                "spec, or the engine's engine.yml): the experiment refuses it",
            )


def _check_guarantees(
    source: Path, key: str, values: Sequence[Scalar], kit: Kit, engines: Sequence[str]
) -> None:
    """Each engine runs the listed guarantees it offers: one that offers none of them would
    run nothing."""
    for engine in engines:
        if not any(kit.offers(engine, value) for value in values):
            refused = "; ".join(kit.refusal(engine, str(value)) for value in values)
            raise SpecError(
                source,
                key,
                f"{refused}: add a guarantee {engine} offers, or remove {engine} from engines",
            )


def _mapping(source: Path, key: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(source, key, f"must be a mapping of name: value, not {value!r}")
    for name in value:
        if not isinstance(name, str):
            raise SpecError(source, key, f"{name!r} is not a name")
    return value


def parse(data: Any, kit: Kit, source: Path) -> StudySpec:
    if not isinstance(data, dict):
        raise SpecError(source, "", "a spec is a YAML mapping (name:, engines:, parameters: ...)")
    for key in data:
        if key not in TOP_KEYS:
            raise SpecError(
                source,
                str(key),
                f"not a spec key{_did_you_mean(str(key), TOP_KEYS)}; known: {', '.join(TOP_KEYS)}",
            )
    name = data.get("name", source.stem)
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise SpecError(source, "name", f"{name!r} must be {NAME_RULE}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise SpecError(source, "description", "must be a string")
    engines = _engines(source, data.get("engines"), kit)
    parameters, listed, per_engine = _parameters(source, data.get("parameters", {}), kit, engines)
    faults = _faults(source, data.get("faults", [{"fault": NO_FAULT}]), kit, engines)
    order_seed = data.get("order_seed")
    if order_seed is not None:
        order_seed = _whole(source, "order_seed", order_seed, 0)
    load, produce_s, capacity = _load(source, data, parameters)
    return StudySpec(
        name=name,
        description=description.strip(),
        engines=engines,
        parameters=parameters,
        per_engine=per_engine,
        listed=listed,
        faults=faults,
        repetitions=_whole(source, "repetitions", data.get("repetitions", 1), 1),
        order_seed=order_seed,
        max_failures=_whole(
            source, "max_failures", data.get("max_failures", DEFAULT_MAX_FAILURES), 1
        ),
        advice=_advice(source, data.get("advice")),
        source=source,
        load=load,
        produce_s=produce_s,
        capacity=capacity,
    )


def _load(
    source: Path, data: Mapping[str, Any], parameters: Mapping[str, Any]
) -> tuple[float | None, int | None, CapacitySpec | None]:
    """load: (a fraction of each engine's capacity), produce_s: (each run's producing time at
    that rate) and capacity: (how the capacity is measured)."""
    capacity = _capacity(source, data.get("capacity"))
    if "load" not in data:
        if "produce_s" in data:
            raise SpecError(
                source,
                "produce_s",
                "only with load: (runs at a fraction of capacity); at a fixed rate, give "
                "parameters.count",
            )
        return None, None, capacity
    load = data["load"]
    if not _is_number(load) or not 0 < load <= 1:
        raise SpecError(
            source,
            "load",
            f"{load!r} must be a fraction of each engine's sustainable rate, above 0 and at most "
            "1 (0.5: half of it)",
        )
    if RATE in parameters:
        raise SpecError(
            source,
            f"parameters.{RATE}",
            "load: sets each engine's rate from its measured capacity: remove rate, or remove "
            "load to run at a fixed rate",
        )
    if "count" in parameters:
        raise SpecError(
            source,
            "parameters.count",
            "with load: every run sends for produce_s seconds at its engine's rate, so the "
            "count follows from the rate: give produce_s instead",
        )
    if "produce_s" not in data:
        raise SpecError(
            source,
            "produce_s",
            "missing: with load:, give how many seconds each run sends (produce_s: 120)",
        )
    produce_s = _whole(source, "produce_s", data["produce_s"], 1)
    return float(load), produce_s, capacity or CapacitySpec()


def _from_rate(source: Path, value: Any) -> float:
    """The search's first rate: at least its step, so that halving it never climbs above a rate
    that failed."""
    if not _is_number(value) or value < STEP:
        raise SpecError(
            source,
            "capacity.from_rate",
            f"{value!r} must be a number of messages/s of at least {STEP:g} (the search's step)",
        )
    return float(value)


def _capacity(source: Path, value: Any) -> CapacitySpec | None:
    if value is None:
        return None
    given = _mapping(source, "capacity", value)
    for name in given:
        if name not in CAPACITY_KEYS:
            raise SpecError(
                source,
                f"capacity.{name}",
                f"not a capacity setting{_did_you_mean(name, CAPACITY_KEYS)}; known: "
                f"{', '.join(CAPACITY_KEYS)}",
            )
    default = CapacitySpec()
    steady_s = _whole(source, "capacity.steady_s", given.get("steady_s", default.steady_s), 1)
    warmup_s = _whole(source, "capacity.warmup_s", given.get("warmup_s", default.warmup_s), 0)
    return CapacitySpec(
        p99_bound_ms=_positive(
            source, "capacity.p99_bound_ms", given.get("p99_bound_ms", default.p99_bound_ms)
        ),
        from_rate=_from_rate(source, given.get("from_rate", default.from_rate)),
        runs=_whole(source, "capacity.runs", given.get("runs", default.runs), 1),
        steady_s=steady_s,
        warmup_s=warmup_s,
    )


def _engines(source: Path, value: Any, kit: Kit) -> tuple[str, ...]:
    known = ", ".join(kit.engines)
    if value is None:
        raise SpecError(source, "engines", f"missing: give a list of engines ({known})")
    engines, _ = _values(source, "engines", value)
    for index, engine in enumerate(engines):
        if engine not in kit.engines:
            raise SpecError(
                source,
                f"engines[{index}]",
                f"{engine!r} is not an engine of this kit{_did_you_mean(str(engine), kit.engines)}"
                f"; known: {known} (the folders of roles/experiment/tasks/ with an engine.yml)",
            )
    return tuple(str(engine) for engine in engines)


def _parameters(
    source: Path, value: Any, kit: Kit, engines: Sequence[str]
) -> tuple[
    dict[str, tuple[Scalar, ...]], tuple[str, ...], dict[str, dict[str, tuple[Scalar, ...]]]
]:
    parameters: dict[str, tuple[Scalar, ...]] = {}
    listed: list[str] = []
    per_engine: dict[str, dict[str, tuple[Scalar, ...]]] = {}
    allowed = kit.study_parameters
    for name, given in _mapping(source, "parameters", value).items():
        key = f"parameters.{name}"
        if name in ("engine", "fault"):
            raise SpecError(
                source, key, f"the study sets {name} itself: list them under {name}s: instead"
            )
        if name in FAULT_SCHEDULE_PARAMETERS:
            raise SpecError(
                source, key, "a fault's schedule setting: give it in an entry of faults:"
            )
        if name not in allowed:
            raise SpecError(
                source,
                key,
                f"not an experiment parameter{_did_you_mean(name, allowed)}; known: "
                f"{', '.join(allowed)} (roles/experiment/defaults/main.yml without experiment_)",
            )
        owner = kit.owner(name)
        if owner is not None and owner not in engines:
            raise SpecError(
                source,
                key,
                f"only {owner}'s runs use it and the study runs no {owner}: remove it, or add "
                f"{owner} to engines",
            )
        if isinstance(given, dict):
            per_engine[name] = _per_engine(source, key, given, name, kit, engines, owner)
            values = tuple(dict.fromkeys(v for vs in per_engine[name].values() for v in vs))
            is_list = any(isinstance(item, list) for item in given.values())
        else:
            values, is_list = _values(source, key, given)
            _check_value(source, key, values, is_list, name, kit)
            if name == GUARANTEE:
                _check_guarantees(source, key, values, kit, engines)
        parameters[name] = values
        if is_list:
            listed.append(name)
    return parameters, tuple(listed), per_engine


def _check_value(
    source: Path, key: str, values: Sequence[Scalar], listed: bool, name: str, kit: Kit
) -> None:
    """The kind, choices and range the experiment accepts for the setting."""
    _check_type(source, key, values, kit.defaults[name])
    _check_choices(source, key, values, listed, kit.choices.get(name))
    _check_range(
        source, key, values, listed, kit.minimums.get(name), name == RATE, kit.maximums.get(name)
    )


def _per_engine(
    source: Path,
    key: str,
    given: Mapping[Any, Any],
    name: str,
    kit: Kit,
    engines: Sequence[str],
    owner: str | None,
) -> dict[str, tuple[Scalar, ...]]:
    """{engine: value or list}: each engine of the study its own values; under `guarantee`
    each must be one the engine offers."""
    if owner is not None:
        raise SpecError(
            source, key, f"only {owner}'s runs use it: give its values, not one per engine"
        )
    if not given:
        raise SpecError(source, key, "an empty mapping runs nothing: give engine: value")
    out: dict[str, tuple[Scalar, ...]] = {}
    for engine, engine_given in given.items():
        where = f"{key}.{engine}"
        if engine not in engines:
            raise SpecError(
                source,
                where,
                f"not an engine of this study ({', '.join(engines)}): give values per engine "
                "of engines:",
            )
        values, is_list = _values(source, where, engine_given)
        _check_value(source, where, values, is_list, name, kit)
        if name == GUARANTEE:
            for index, value in enumerate(values):
                if not kit.offers(engine, value):
                    raise SpecError(
                        source,
                        f"{where}[{index}]" if is_list else where,
                        kit.refusal(engine, str(value)),
                    )
        out[engine] = values
    return out


def _faults(source: Path, value: Any, kit: Kit, engines: Sequence[str]) -> tuple[FaultSpec, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError(
            source,
            "faults",
            "must be a non-empty list of entries like {fault: kill_taskmanager, fault_at_s: 60} "
            "(leave it out for no fault)",
        )
    faults = []
    for index, entry in enumerate(value):
        key = f"faults[{index}]"
        if isinstance(entry, str):
            entry = {"fault": entry}
        entry = _mapping(source, key, entry)
        for name in entry:
            if name not in FAULT_KEYS:
                raise SpecError(
                    source,
                    f"{key}.{name}",
                    f"not a fault setting{_did_you_mean(name, FAULT_KEYS)}; known: "
                    f"{', '.join(FAULT_KEYS)}",
                )
        fault = entry.get("fault")
        if fault not in kit.faults:
            raise SpecError(
                source,
                f"{key}.fault",
                f"{fault!r} is not a fault type of this kit{_did_you_mean(str(fault), kit.faults)}"
                f"; known: {', '.join(kit.faults)} (roles/fault/tasks/types/)",
            )
        fault_engines = tuple(engines)
        if "engines" in entry:
            chosen, _ = _values(source, f"{key}.engines", entry["engines"])
            for position, engine in enumerate(chosen):
                if engine not in engines:
                    raise SpecError(
                        source,
                        f"{key}.engines[{position}]",
                        f"{engine!r} is not one of the study's engines ({', '.join(engines)})",
                    )
            fault_engines = tuple(str(engine) for engine in chosen)
        label = entry.get("label")
        if label is not None and (not isinstance(label, str) or not NAME_PATTERN.match(label)):
            raise SpecError(source, f"{key}.label", f"{label!r} must be {NAME_RULE}")
        schedule: dict[str, tuple[Scalar, ...]] = {}
        listed = []
        for name, kind in FAULT_SCHEDULE_PARAMETERS.items():
            if name not in entry:
                continue
            if fault == NO_FAULT:
                raise SpecError(
                    source, f"{key}.{name}", "fault none injects nothing: remove this setting"
                )
            values, is_list = _values(source, f"{key}.{name}", entry[name])
            _check_type(source, f"{key}.{name}", values, 0 if kind == "number" else "")
            _check_range(source, f"{key}.{name}", values, is_list, kit.minimums.get(name), False)
            schedule[name] = values
            if is_list:
                listed.append(name)
        faults.append(FaultSpec(str(fault), fault_engines, schedule, tuple(listed), label, key))
    for engine in engines:
        if not any(engine in fault.engines for fault in faults):
            raise SpecError(
                source,
                "faults",
                f"no entry applies to {engine}: add one with engines: [{engine}] "
                "(fault: none for a baseline)",
            )
    return tuple(faults)


def _advice(source: Path, value: Any) -> AdviceSpec | None:
    if value is None:
        return None
    advice = _mapping(source, "advice", value)
    for name in advice:
        if name not in ADVICE_KEYS:
            raise SpecError(
                source, f"advice.{name}", f"not an advice setting; known: {', '.join(ADVICE_KEYS)}"
            )
    if "mtbf_s" not in advice:
        raise SpecError(source, "advice.mtbf_s", "missing: the mean time between failures in s")
    max_p99 = advice.get("max_p99_ms")
    return AdviceSpec(
        mtbf_s=_positive(source, "advice.mtbf_s", advice["mtbf_s"]),
        max_p99_ms=None if max_p99 is None else _positive(source, "advice.max_p99_ms", max_p99),
    )
