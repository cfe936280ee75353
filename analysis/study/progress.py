"""The study's progress on the terminal: runs done of the total, elapsed, time left (from the
estimates, corrected by the runs so far) and the current run's phase (the playbook's task).

On a terminal a live bar shows it; in a log (no terminal) a line per run start and end does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from analysis.study.plan import Plan, PlannedRun
from analysis.study.runner import COMPLETE, Attempt, Forecast


def duration_text(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


class _TimeLeft(ProgressColumn):
    def __init__(self, left: Callable[[], float]) -> None:
        super().__init__()
        self.left = left

    def render(self, task: Task) -> Text:
        return Text(f"~{duration_text(self.left())} left", style="progress.remaining")


class RichProgress:
    def __init__(
        self, console: Console | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self.clock = clock
        self.forecast: Forecast | None = None
        self.study_started = 0.0
        self.current: PlannedRun | None = None
        self.current_started = 0.0
        self.total = 0
        self.done = 0
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def time_left(self) -> float:
        if self.forecast is None:
            return 0.0
        current = self.current.run_id if self.current else None
        return self.forecast.remaining_s(current, self.clock() - self.current_started)

    def note(self, text: str) -> None:
        """A line of its own (the capacity search's runs, before the study's)."""
        self.console.print(text, markup=False)

    def begin(self, plan: Plan, todo: Sequence[PlannedRun], forecast: Forecast) -> None:
        self.forecast = forecast
        self.study_started = self.clock()
        self.total = len(plan.runs)
        self.done = self.total - len(todo)
        scale = "" if plan.scale == 1 else f" at scale {plan.scale:g}"
        self.console.print(
            f"study {plan.study}{scale}: {len(todo)} of {self.total} runs to do "
            f"({self.done} already complete), about {duration_text(forecast.remaining_s())}"
        )
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            _TimeLeft(self.time_left),
            TextColumn("{task.fields[phase]}"),
            console=self.console,
            transient=False,
        )
        self.task = self.bar.add_task(plan.study, total=self.total, completed=self.done, phase="")
        self.bar.start()

    def run_started(self, run: PlannedRun, position: int) -> None:
        self.current = run
        self.current_started = self.clock()
        self.console.print(f"[{self.done + 1}/{self.total}] {run.run_id}", markup=False)
        self.phase("starting")

    def phase(self, text: str) -> None:
        if self.bar is not None and self.task is not None and self.current is not None:
            self.bar.update(self.task, phase=f"{self.current.run_id}: {text}"[:100])

    def run_finished(self, run: PlannedRun, attempt: Attempt) -> None:
        self.done += 1
        self.current = None
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, completed=self.done, phase="")
        elapsed = self.clock() - self.study_started
        line = (
            f"[{self.done}/{self.total}] {run.run_id} {attempt.status} in "
            f"{duration_text(attempt.wall_s)} (study: {duration_text(elapsed)} elapsed, "
            f"~{duration_text(self.time_left())} left)"
        )
        if attempt.status != COMPLETE:
            line += "".join(f"\n    {reason}" for reason in attempt.reasons)
        self.console.print(line, style=None if attempt.status == COMPLETE else "red", markup=False)

    def end(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
