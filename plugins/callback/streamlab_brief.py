"""Ansible stdout callback: a readable account on the terminal, the whole output in a log file.

Enabled by `make demo` and `make demo-down` (ANSIBLE_STDOUT_CALLBACK=streamlab_brief). The
terminal shows one line per play (a phase), per check (a task named "Check ..." or "Wait ...",
with how long it took and how many tries), per task that changed something, every message a
`debug` task prints (the health summary), failures in full, and the recap. Everything Ansible's
default callback would print (task banners, every ok and skipped host, "FAILED - RETRYING" from
healthy waits) goes to logs/<playbook>-<UTC time>.log instead.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ansible.plugins.callback.default import CallbackModule as DefaultCallback

DOCUMENTATION = r"""
name: streamlab_brief
type: stdout
short_description: One line per phase, check and change on the terminal; everything in a log file
description:
  - The terminal shows each play, each check (tasks named Check... or Wait...) with its duration
    and tries, each task that changed something, debug messages, failures in full and the recap.
  - Everything the default callback prints goes to a log file, whose path is shown first and last.
extends_documentation_fragment:
  - default_callback
  - result_format_callback
options:
  log_dir:
    description: Directory for the full log (created when missing).
    type: path
    default: logs
    env:
      - name: STREAMLAB_LOG_DIR
"""

# Task names that are checks: shown with their outcome, duration and tries.
CHECK_PREFIXES = ("Check", "Wait")


class _LogDisplay:
    """Stands in for Ansible's Display inside the default callback: what it would print goes to
    the log file. Anything else (verbosity, warnings) is the real Display's."""

    def __init__(self, display: Any, log: IO[str]) -> None:
        self._real = display
        self._log = log

    def display(self, msg: str, *_args: Any, screen_only: bool = False, **_kwargs: Any) -> None:
        # The default callback says some things twice: coloured for the screen, plain for a log.
        if not screen_only:
            self._log.write(f"{msg}\n")
            self._log.flush()

    def banner(self, msg: str, *_args: Any, **_kwargs: Any) -> None:
        self._log.write(f"\n{msg} {'*' * max(3, 79 - len(msg))}\n")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "streamlab_brief"

    def __init__(self) -> None:
        super().__init__()
        self._terminal = self._display
        self._log: IO[str] | None = None
        self._log_path: Path | None = None
        self._task_started: dict[str, float] = {}
        self._tries: dict[tuple[str, str], int] = {}

    # The log file -------------------------------------------------------------------------
    def _open_log(self, playbook_file: str) -> None:
        directory = Path(self.get_option("log_dir")).expanduser()
        directory.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self._log_path = (directory / f"{Path(playbook_file).stem}-{stamp}.log").resolve()
        self._log = self._log_path.open("a", encoding="utf-8")
        self._display = _LogDisplay(self._terminal, self._log)

    def _say(self, line: str, color: str | None = None) -> None:
        self._terminal.display(line, color=color)

    # Events -------------------------------------------------------------------------------
    def v2_playbook_on_start(self, playbook: Any) -> None:
        self._open_log(playbook._file_name)
        super().v2_playbook_on_start(playbook)
        self._say(f"{Path(playbook._file_name).name}: the full output goes to {self._log_path}")

    def v2_playbook_on_play_start(self, play: Any) -> None:
        super().v2_playbook_on_play_start(play)
        name = play.get_name().strip()
        if name:
            self._say(f"\n{name}", color="bright blue")

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        super().v2_playbook_on_task_start(task, is_conditional)
        self._task_started[task._uuid] = time.monotonic()

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        super().v2_playbook_on_handler_task_start(task)
        self._task_started[task._uuid] = time.monotonic()

    def v2_runner_retry(self, result: Any) -> None:
        super().v2_runner_retry(result)
        key = (result._task._uuid, result._host.get_name())
        self._tries[key] = self._tries.get(key, 1) + 1

    def v2_runner_on_ok(self, result: Any) -> None:
        super().v2_runner_on_ok(result)
        task = result._task
        if task.action in ("ansible.builtin.debug", "debug"):
            message = result._result.get("msg")
            if message is not None:
                self._say(f"  {message}")
            return
        if self._is_check(task):
            self._say(f"  ok       {self._describe(result)}", color="green")
        elif result._result.get("changed", False):
            self._say(f"  changed  {self._describe(result)}", color="yellow")

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        super().v2_runner_on_failed(result, ignore_errors)
        if ignore_errors:
            return
        self._say(f"  FAILED   {self._describe(result)}", color="red")
        self._show_in_full(lambda: DefaultCallback.v2_runner_on_failed(self, result, ignore_errors))

    def v2_runner_on_unreachable(self, result: Any) -> None:
        super().v2_runner_on_unreachable(result)
        self._say(f"  UNREACHABLE {self._describe(result)}", color="red")
        self._show_in_full(lambda: DefaultCallback.v2_runner_on_unreachable(self, result))

    def v2_playbook_on_stats(self, stats: Any) -> None:
        super().v2_playbook_on_stats(stats)
        self._show_in_full(lambda: DefaultCallback.v2_playbook_on_stats(self, stats))
        self._say(f"The full output is in {self._log_path}")
        if self._log is not None:
            self._log.close()

    # Helpers ------------------------------------------------------------------------------
    def _is_check(self, task: Any) -> bool:
        return task.get_name().split(" : ")[-1].startswith(CHECK_PREFIXES)

    def _describe(self, result: Any) -> str:
        task = result._task
        name = task.get_name().split(" : ")[-1]
        host = result._host.get_name()
        took = time.monotonic() - self._task_started.get(task._uuid, time.monotonic())
        tries = self._tries.pop((task._uuid, host), 1)
        details = [host, f"{took:.0f} s" if took >= 1 else ""]
        if tries > 1:
            details.append(f"{tries} tries")
        return f"{name} ({', '.join(d for d in details if d)})"

    def _show_in_full(self, show: Any) -> None:
        """Run one of the default callback's printers against the terminal."""
        logged = self._display
        self._display = self._terminal
        try:
            show()
        finally:
            self._display = logged
