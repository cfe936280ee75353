"""Run a plan: skip what is complete, repeat what is not, record everything, stop at the limit.

The experiment itself is a function handed in (ansible.AnsibleExperiment runs the playbook), so
resuming, moving incomplete runs aside and the failure limit work the same without a lab.

A run is complete when results/<run id>/run.json says `status: complete`. Anything else there
(an incomplete run, or a directory without run.json: the playbook stopped before recording it)
is moved to results/<study>/attempts/<run id>-<n> before the run is repeated, so nothing is
overwritten or lost. results/<study>/study.json records the plan and every attempt; it is
rewritten whole after each run.
"""

from __future__ import annotations

import fcntl
import json
import math
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from analysis.advise import STUDY_RECORD
from analysis.report import write_json
from analysis.study.capacity import (
    Capacity,
    CapacitySpec,
    Trial,
    capacity_text,
    rate_at,
    search,
    trial_from_summary,
)
from analysis.study.estimate import earlier_overheads, overhead_for
from analysis.study.kit import Kit
from analysis.study.plan import (
    Plan,
    PlannedRun,
    analysis_estimate_s,
    estimated_s,
    with_rates,
)

RUN_JSON = "run.json"
ATTEMPTS_DIR = "attempts"
LOGS_DIR = "logs"
LOCK_FILE = ".lock"
# Under the study's directory: the capacity search's runs, apart from the study's own.
CAPACITY_DIR = "capacity"
# What `python -m analysis summarize` writes into a run directory.
SUMMARY = "summary.json"
COMPLETE = "complete"
INCOMPLETE = "incomplete"
FAILED = "failed"
INTERRUPTED = "interrupted"


class StudyError(Exception):
    """The study cannot start: its results disagree with the spec, or it already runs."""


class _StopAsked(Exception):
    """Asked to stop (Ctrl-C once) before a capacity run."""


@dataclass(frozen=True)
class ExperimentResult:
    """What running one experiment returned: the playbook's exit code and its log."""

    rc: int
    log: str | None = None
    output_tail: str = ""


# run, its extra vars, a callback taking the phase the run is in -> the result.
RunExperiment = Callable[[PlannedRun, dict[str, Any], Callable[[str], None]], ExperimentResult]


@dataclass
class Attempt:
    run_id: str
    status: str  # complete, incomplete, failed or interrupted
    started_utc: str
    wall_s: float
    reasons: list[str] = field(default_factory=list)
    rc: int | None = None
    log: str | None = None
    # Where the run's earlier, incomplete result directory was moved before this attempt.
    moved_aside: str | None = None
    # run.json's verdict (guarantee, holds, lost, duplicate_records, reason): kept for every
    # attempt, so that a study reports loss over all of them, runs moved aside included.
    verdict: dict[str, Any] | None = None


@dataclass
class StudyOutcome:
    complete: list[str]
    failed: list[str]
    not_run: list[str]
    stopped_early: bool  # at the failure limit
    stopped_by_request: bool = False  # asked to stop after the current run (Ctrl-C once)

    @property
    def finished(self) -> bool:
        return (
            not self.failed
            and not self.not_run
            and not self.stopped_early
            and not self.stopped_by_request
        )


class Forecast:
    """Time left: the estimates of the runs not done, corrected by how the finished runs
    compared with their estimates, and the analysis after the last run."""

    def __init__(
        self,
        estimates: Mapping[str, float],
        analysis_s: float = 0.0,
        sources: Mapping[str, str] | None = None,
        capacity_s: float = 0.0,
    ) -> None:
        self.estimates = dict(estimates)
        self.analysis_s = analysis_s
        # The capacity search still to run before the first run (load:, capacity:).
        self.capacity_s = capacity_s
        # Per run, where its overhead was taken from (estimate.overhead_for).
        self.sources = dict(sources or {})
        self.actual: dict[str, float] = {}

    def finished(self, run_id: str, wall_s: float) -> None:
        self.actual[run_id] = wall_s

    @property
    def correction(self) -> float:
        if not self.actual:
            return 1.0
        estimated = sum(self.estimates[run_id] for run_id in self.actual)
        return sum(self.actual.values()) / estimated if estimated > 0 else 1.0

    def remaining_s(self, current: str | None = None, current_elapsed_s: float = 0.0) -> float:
        left = 0.0
        for run_id, estimate in self.estimates.items():
            if run_id in self.actual:
                continue
            expected = estimate * self.correction
            left += max(0.0, expected - current_elapsed_s) if run_id == current else expected
        return left + self.analysis_s + self.capacity_s


class StudyProgress(Protocol):
    def note(self, text: str) -> None: ...
    def begin(self, plan: Plan, todo: Sequence[PlannedRun], forecast: Forecast) -> None: ...
    def run_started(self, run: PlannedRun, position: int) -> None: ...
    def phase(self, text: str) -> None: ...
    def run_finished(self, run: PlannedRun, attempt: Attempt) -> None: ...
    def end(self) -> None: ...


def read_run_record(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run_dir / RUN_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def run_status(run_dir: Path) -> str | None:
    """complete, incomplete (anything but a complete run.json), or None when there is no
    result directory."""
    if not run_dir.exists():
        return None
    record = read_run_record(run_dir)
    return COMPLETE if record is not None and record.get("status") == COMPLETE else INCOMPLETE


def _same(planned: Any, recorded: Any) -> bool:
    numbers = (int, float)
    if isinstance(planned, bool) or isinstance(recorded, bool):
        return str(planned).lower() == str(recorded).lower()
    if isinstance(planned, numbers) and isinstance(recorded, numbers):
        return math.isclose(float(planned), float(recorded))
    return str(planned) == str(recorded)


def disagreements(run: PlannedRun, record: Mapping[str, Any]) -> list[str]:
    """Settings a recorded run ran with that differ from the plan's (those run.json records)."""
    found = []
    recorded = {**(record.get("parameters") or {}), "engine": record.get("engine")}
    if "fault" in record:
        recorded["fault"] = record["fault"]
    planned = {**run.parameters, "engine": run.engine, "fault": run.fault}
    for name, value in planned.items():
        if _same(value, 0):  # 0 derives partitions, replication, parallelism, workers: any value
            continue
        if name in recorded and not _same(value, recorded[name]):
            found.append(f"{name}={recorded[name]!r} (the plan: {value!r})")
    return found


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StudyRunner:
    def __init__(
        self,
        plan: Plan,
        kit: Kit,
        results_dir: Path,
        run_experiment: RunExperiment,
        progress: StudyProgress,
        max_failures: int | None = None,
        inventory: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        stop_requested: Callable[[], bool] = lambda: False,
    ) -> None:
        self.plan = plan
        self.kit = kit
        self.results_dir = results_dir
        self.study_dir = results_dir / plan.study
        self.run_experiment = run_experiment
        self.progress = progress
        self.max_failures = max_failures or plan.spec.max_failures
        self.inventory = inventory
        self.clock = clock
        self.stop_requested = stop_requested
        self.attempts: dict[str, list[Attempt]] = {}
        # Each engine's measured capacity (Capacity.as_json plus the criterion and settings it
        # was measured with), and the trials of a search not finished yet.
        self.capacity: dict[str, dict[str, Any]] = {}
        self.capacity_trials: dict[str, dict[str, Any]] = {}
        self.started_utc = _utc_now()
        self._holding_lock = False

    # ------------------------------------------------------------ the record

    def load_record(self) -> dict[str, Any] | None:
        return load_record(self.study_dir)

    def record(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "study": plan.study,
            "spec": str(plan.spec.source),
            "name": plan.spec.name,
            "description": plan.spec.description,
            "scale": plan.scale,
            "scaled": [asdict(value) for value in plan.scaled],
            "order_seed": plan.order_seed,
            "repetitions": plan.spec.repetitions,
            "max_failures": self.max_failures,
            "inventory": self.inventory,
            "results_dir": str(self.results_dir),
            "load": plan.spec.load,
            "produce_s": plan.spec.produce_s,
            "capacity_spec": asdict(plan.spec.capacity) if plan.spec.capacity else None,
            "capacity": self.capacity,
            "capacity_trials": self.capacity_trials,
            "rates": plan.rates,
            "started_utc": self.started_utc,
            "updated_utc": _utc_now(),
            "runs": [
                {
                    "run_id": run.run_id,
                    "engine": run.engine,
                    "fault": run.fault,
                    "parameters": run.parameters,
                    "repetition": run.repetition,
                    "status": run_status(self.results_dir / run.run_id) or "not run",
                    "attempts": [asdict(a) for a in self.attempts.get(run.run_id, [])],
                }
                for run in plan.runs
            ],
        }

    def save(self) -> None:
        write_json(self.study_dir / STUDY_RECORD, self.record())

    # ------------------------------------------------------------ checks before any run

    def check_existing(self) -> list[PlannedRun]:
        """The runs still to do; refuses when a complete run ran with other settings."""
        todo = []
        for run in self.plan.runs:
            run_dir = self.results_dir / run.run_id
            if run_status(run_dir) == COMPLETE:
                record = read_run_record(run_dir) or {}
                differ = disagreements(run, record)
                if differ:
                    raise StudyError(
                        f"{run_dir} is a complete run of another spec: it ran with "
                        f"{', '.join(differ)}. Give this study another name (name: in "
                        f"{self.plan.spec.source}) or move that run away"
                    )
            else:
                todo.append(run)
        return todo

    # ------------------------------------------------------------ running

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the study's lock: one start of a study at a time, through its runs and its
        report (the command holds it around both; run() takes it when not held yet)."""
        if self._holding_lock:
            yield
            return
        self.study_dir.mkdir(parents=True, exist_ok=True)
        with (self.study_dir / LOCK_FILE).open("w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StudyError(
                    f"another streamlab-study is running {self.plan.study} "
                    f"({self.study_dir / LOCK_FILE} is locked): wait for it to end"
                ) from None
            self._holding_lock = True
            try:
                yield
            finally:
                self._holding_lock = False

    def _move_aside(self, run_dir: Path) -> str:
        folder = self.study_dir / ATTEMPTS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        number = 1
        while (folder / f"{run_dir.name}-{number}").exists():
            number += 1
        target = folder / f"{run_dir.name}-{number}"
        shutil.move(str(run_dir), str(target))
        return str(target)

    def _attempt(self, run: PlannedRun) -> Attempt:
        run_dir = self.results_dir / run.run_id
        moved = self._move_aside(run_dir) if run_dir.exists() else None
        started_utc = _utc_now()
        started = self.clock()
        extravars = run.extravars(str(self.results_dir))
        try:
            result = self.run_experiment(run, extravars, self.progress.phase)
        except KeyboardInterrupt as interrupt:
            attempt = Attempt(
                run.run_id, INTERRUPTED, started_utc, self.clock() - started, ["interrupted"]
            )
            attempt.moved_aside = moved
            attempt.log = getattr(interrupt, "log", None)  # a cancelled playbook's output
            self.attempts.setdefault(run.run_id, []).append(attempt)
            raise
        except Exception as error:  # a failed run is recorded; the study goes on
            result = ExperimentResult(rc=-1, output_tail=f"{type(error).__name__}: {error}")
        wall_s = self.clock() - started
        record = read_run_record(run_dir)
        if record is not None and record.get("status") == COMPLETE:
            status, reasons = COMPLETE, []
        elif record is not None:
            status = INCOMPLETE
            reasons = [str(r) for r in record.get("incomplete_reasons") or []] or [
                f"run.json status is {record.get('status')!r}"
            ]
        else:
            status = FAILED
            tail = result.output_tail.strip().splitlines()[-3:]
            reasons = [
                f"the experiment stopped before recording the run (exit code {result.rc})",
                *tail,
            ]
        return Attempt(
            run_id=run.run_id,
            status=status,
            started_utc=started_utc,
            wall_s=round(wall_s, 1),
            reasons=reasons,
            rc=result.rc,
            log=result.log,
            moved_aside=moved,
            verdict=record.get("verdict") if record is not None else None,
        )

    # ------------------------------------------------------------ capacity (load:)

    def capacity_settings(self, engine: str) -> dict[str, Any]:
        """What a capacity run of an engine runs with: the first value of each of the study's
        settings for it (its guarantee the first it offers), no fault, the search's warm-up."""
        spec = self.plan.spec
        settings: dict[str, Any] = {}
        for name in spec.names_for(engine):
            if self.kit.owner(name) not in (None, engine) or name in ("rate", "count"):
                continue
            values = spec.values_for(name, engine)
            if name == "guarantee":
                values = tuple(v for v in values if self.kit.offers(engine, v)) or values
            settings[name] = values[0]
        assert spec.capacity is not None
        settings["warmup_s"] = spec.capacity.warmup_s
        return settings

    def _criterion(self, engine: str) -> dict[str, Any]:
        """What a capacity must have been measured with to be reused: the search's settings,
        the engine's settings and the hosts (the inventory)."""
        assert self.plan.spec.capacity is not None
        return {
            "capacity_spec": asdict(self.plan.spec.capacity),
            "settings": self.capacity_settings(engine),
            "inventory": self.inventory,
        }

    def reusable(self, engine: str, entry: Mapping[str, Any] | None) -> bool:
        """An earlier start's capacity of the engine stands: measured with the same criterion,
        and with a rate found (a search that found none is measured again)."""
        if not entry or not entry.get("rate"):
            return False
        return all(entry.get(k) == v for k, v in self._criterion(engine).items())

    def recorded_rates(self) -> dict[str, float]:
        """Under load:, the rates from an earlier start's capacities that stand."""
        if self.plan.spec.load is None or self.plan.spec.capacity is None:
            return {}
        capacity = (self.load_record() or {}).get("capacity") or {}
        return self._load_rates(
            {e: capacity[e] for e in self.plan.spec.engines if self.reusable(e, capacity.get(e))}
        )

    def _load_rates(self, capacities: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
        """The rate each engine's runs send at under load:, from its capacity."""
        load = self.plan.spec.load
        assert load is not None
        return {engine: rate_at(load, float(entry["rate"])) for engine, entry in capacities.items()}

    def _capacity_run(self, engine: str, rate: float, run_id: str) -> PlannedRun:
        """A capacity run of the engine at a rate: its capacity settings, no fault."""
        spec = self.plan.spec.capacity
        assert spec is not None
        return PlannedRun(
            run_id=run_id,
            engine=engine,
            fault="none",
            parameters={**self.capacity_settings(engine), "rate": rate, "count": spec.count(rate)},
            repetition=0,
        )

    def _trial(self, engine: str, rate: float, spec: CapacitySpec) -> Trial:
        if self.stop_requested():
            raise _StopAsked
        folder = self.study_dir / CAPACITY_DIR
        number = len(self.capacity_trials[engine]["trials"]) + 1
        run_id = f"{self.plan.study}-capacity-{engine}-{rate:.0f}-t{number}"
        if (folder / run_id).exists():
            self._move_aside(folder / run_id)  # an earlier start's, interrupted
        run = self._capacity_run(engine, rate, run_id)
        self.progress.note(f"capacity of {engine}: {run_id} at {rate:,.0f}/s")
        started = self.clock()
        problem = ""
        try:
            self.run_experiment(run, run.extravars(str(folder)), lambda text: None)
        except KeyboardInterrupt:
            self.save()
            raise
        except Exception as error:
            problem = f"{type(error).__name__}: {error}"
        trial = trial_from_summary(run_id, rate, folder / run_id, self.clock() - started)
        self.capacity_trials[engine]["trials"].append(asdict(trial))
        self.save()
        if trial.status == FAILED:
            # No collector summary: the run says nothing of the rate, so the search stops
            # rather than count it as a rate the engine cannot sustain.
            cause = problem or f"its log is in {self.study_dir / LOGS_DIR}"
            raise StudyError(
                f"capacity run {run_id} left no collector summary ({cause}): fix the cause and "
                "start the study again; the search goes on from its recorded trials"
            )
        why = trial.why_not(spec.p99_bound_ms)
        self.progress.note(
            f"  {run_id}: p99 {trial.p99_ms} ms, overloaded={trial.overloaded}, "
            f"{trial.status}: {why or 'sustainable'}"
        )
        return trial

    def refuse_changed_capacity(self, recorded: Mapping[str, Any]) -> None:
        """Under load:, complete runs ran at rates from the recorded capacities: measuring them
        again under another criterion would leave runs at two rates. Said before any trial."""
        if self.plan.spec.load is None:
            return
        for engine in self.plan.spec.engines:
            entry = recorded.get(engine)
            if not entry or self.reusable(engine, entry):
                continue
            done = [
                run.run_id
                for run in self.plan.runs
                if run.engine == engine and run_status(self.results_dir / run.run_id) == COMPLETE
            ]
            if done:
                raise StudyError(
                    f"{len(done)} complete {engine} run(s) of {self.plan.study} ran at a rate "
                    "from a capacity measured with another capacity:, settings or inventory "
                    "than this start's: give this study another name (name: in "
                    f"{self.plan.spec.source}), or move those runs away"
                )

    def measure_capacity(self, earlier: Mapping[str, Any]) -> bool:
        """Each engine's capacity, from an earlier start's record when it stands (reusable),
        else by the search, replaying the trials of a search an earlier start did not finish;
        then, under load:, the runs' rates. False when asked to stop (Ctrl-C once) before a
        trial. StudyError when an engine has no sustainable rate (its trials are in
        study.json), or a trial failed."""
        spec = self.plan.spec.capacity
        if spec is None:
            return True
        recorded = earlier.get("capacity") or {}
        self.refuse_changed_capacity(recorded)
        partial = earlier.get("capacity_trials") or {}
        self.capacity_trials = {
            engine: entry for engine, entry in partial.items() if isinstance(entry, dict)
        }
        for engine in self.plan.spec.engines:
            criterion = self._criterion(engine)
            entry = recorded.get(engine)
            if self.reusable(engine, entry):
                assert entry is not None
                self.capacity[engine] = dict(entry)
                self.progress.note(
                    f"capacity of {engine}: {capacity_text(entry)}, measured by an earlier start"
                )
                continue
            earlier_trials = (partial.get(engine) or {}).get("trials") or []
            if (partial.get(engine) or {}).get("criterion") != criterion:
                earlier_trials = []
            # The search is the same sequence of rates whatever the start: an earlier start's
            # trials answer its first rates, in order; only the rest run.
            replay = [Trial(**trial) for trial in earlier_trials if trial.get("status") != FAILED]
            self.capacity_trials[engine] = {"criterion": criterion, "trials": []}

            def measure(rate: float, engine: str = engine, replay: list[Trial] = replay) -> Trial:
                if replay and replay[0].rate == rate:
                    trial = replay.pop(0)
                    self.capacity_trials[engine]["trials"].append(asdict(trial))
                    return trial
                replay.clear()
                return self._trial(engine, rate, spec)

            try:
                found: Capacity = search(measure, spec)
            except _StopAsked:
                self.save()
                return False
            self.capacity[engine] = {**found.as_json(), **criterion, "measured_utc": _utc_now()}
            del self.capacity_trials[engine]
            self.save()
            self.progress.note(
                f"capacity of {engine}: {capacity_text(self.capacity[engine])} (lowest failing: "
                f"{found.lowest_failing or 'none'}; p99 bound {spec.p99_bound_ms:g} ms)"
            )
        if self.plan.spec.load is None:
            return True
        missing = [e for e in self.plan.spec.engines if not self.capacity[e].get("rate")]
        if missing:
            raise StudyError(
                f"no rate tried was sustainable for {', '.join(missing)} (steady p99 under "
                f"{spec.p99_bound_ms:g} ms, not overloaded, complete; the trials are in "
                f"{self.study_dir / STUDY_RECORD}): lower capacity.from_rate or raise "
                "capacity.p99_bound_ms in the spec, then start the study again"
            )
        self.plan = with_rates(
            self.plan, self._load_rates({e: self.capacity[e] for e in self.plan.spec.engines})
        )
        return True

    def forecast(self, todo: Sequence[PlannedRun]) -> Forecast:
        recorded = self.load_record() or {}
        walls = {
            entry["run_id"]: attempt["wall_s"]
            for entry in recorded.get("runs") or []
            for attempt in entry.get("attempts") or []
            if attempt.get("status") == COMPLETE
        }
        measured = earlier_overheads(self.results_dir)
        overheads = {
            run.run_id: overhead_for(run, self.plan, self.kit, walls, measured) for run in todo
        }
        # The report summarises every complete run without a summary.json: those to run, and
        # any an earlier start completed but did not get to.
        planned = {run.run_id for run in todo}
        unsummarised = [
            run
            for run in self.plan.runs
            if run.run_id not in planned
            and run_status(self.results_dir / run.run_id) == COMPLETE
            and not (self.results_dir / run.run_id / SUMMARY).is_file()
        ]
        return Forecast(
            {run.run_id: estimated_s(run, self.kit, overheads[run.run_id].seconds) for run in todo},
            analysis_estimate_s(len(todo) + len(unsummarised)),
            {run.run_id: overheads[run.run_id].source for run in todo},
            self._capacity_estimate_s(recorded, walls, measured),
        )

    def _capacity_estimate_s(
        self,
        recorded: Mapping[str, Any],
        walls: Mapping[str, float],
        measured: Mapping[tuple[str, bool], Sequence[float]],
    ) -> float:
        """The capacity search of every engine not measured yet, at its longest (every run the
        search may make), each run estimated as a fault-free run of the study."""
        spec = self.plan.spec.capacity
        if spec is None:
            return 0.0
        done = recorded.get("capacity") or {}
        total = 0.0
        for engine in self.plan.spec.engines:
            if engine in self.capacity or self.reusable(engine, done.get(engine)):
                continue
            trial = self._capacity_run(
                engine, spec.from_rate, f"{self.plan.study}-capacity-{engine}"
            )
            overhead = overhead_for(trial, self.plan, self.kit, walls, measured).seconds
            total += spec.runs * estimated_s(trial, self.kit, overhead)
        return total

    def run(self) -> StudyOutcome:
        with self.locked():
            earlier = self.load_record() or {}
            for entry in earlier.get("runs") or []:
                self.attempts[entry["run_id"]] = [
                    Attempt(**attempt) for attempt in entry.get("attempts") or []
                ]
            self.started_utc = earlier.get("started_utc") or self.started_utc
            if not self.measure_capacity(earlier):
                return self._outcome([], stopped=False, asked_to_stop=True)
            todo = self.check_existing()
            forecast = self.forecast(todo)
            self.save()
            failed: list[str] = []
            stopped = asked_to_stop = False
            self.progress.begin(self.plan, todo, forecast)
            try:
                for position, run in enumerate(todo, start=1):
                    if self.stop_requested():
                        asked_to_stop = True
                        break
                    self.progress.run_started(run, position)
                    try:
                        attempt = self._attempt(run)
                    finally:
                        self.save()
                    self.attempts.setdefault(run.run_id, []).append(attempt)
                    self.save()
                    forecast.finished(run.run_id, attempt.wall_s)
                    self.progress.run_finished(run, attempt)
                    if attempt.status != COMPLETE:
                        failed.append(run.run_id)
                        if len(failed) >= self.max_failures and position < len(todo):
                            stopped = True
                            break
            finally:
                self.progress.end()
            return self._outcome(failed, stopped=stopped, asked_to_stop=asked_to_stop)

    def _outcome(self, failed: list[str], *, stopped: bool, asked_to_stop: bool) -> StudyOutcome:
        """What the study's runs are now: complete (by their result directories), failed in
        this start, and not run."""
        complete = [
            run.run_id
            for run in self.plan.runs
            if run_status(self.results_dir / run.run_id) == COMPLETE
        ]
        not_run = [
            run.run_id
            for run in self.plan.runs
            if run.run_id not in complete and run.run_id not in failed
        ]
        return StudyOutcome(complete, failed, not_run, stopped, asked_to_stop)


def load_record(study_dir: Path) -> dict[str, Any] | None:
    """The study's record of an earlier start, None when there is none."""
    path = study_dir / STUDY_RECORD
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise StudyError(f"{path}: not JSON ({error}); move it away to start afresh") from error
    if not isinstance(data, dict):
        raise StudyError(f"{path}: not a study record; move it away to start afresh")
    return data
