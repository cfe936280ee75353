"""One experiment through ansible-runner: playbooks/experiment.yml with the run's extra vars.

The way bench/lab_playbooks.py and the tests drive playbooks: a private data directory per
run, this checkout as the project, its ansible.cfg, and the ansible-playbook beside this
interpreter; the hosts' facts are gathered once per study. The playbook's output goes to
results/<study>/logs/<run id>-<UTC time>.log; the task being run is reported as the run's phase.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ansible_runner

from analysis.report import write_atomic
from analysis.study.interrupt import Cancelled, StopSwitch
from analysis.study.kit import Kit
from analysis.study.plan import PlannedRun
from analysis.study.runner import ExperimentResult

OUTPUT_TAIL_CHARS = 4000


class AnsibleExperiment:
    """cancel: a StopSwitch (interrupt.py); when it says so the playbook is killed and the run
    raises KeyboardInterrupt once its log is written."""

    def __init__(
        self, kit: Kit, inventory: Path | None, log_dir: Path, cancel: StopSwitch | None = None
    ) -> None:
        self.kit = kit
        self.inventory = inventory
        self.log_dir = log_dir
        self.cancel = cancel or StopSwitch()
        # The hosts' facts, gathered by the study's first run and read from here by the next
        # (ansible.cfg gathers smart): the hosts do not change between runs of one study. Gone
        # with this process, so a resumed study gathers them again.
        self.facts = tempfile.TemporaryDirectory(prefix="streamlab-study-facts-")

    def __call__(
        self, run: PlannedRun, extravars: dict[str, Any], on_phase: Callable[[str], None]
    ) -> ExperimentResult:
        def on_event(event: dict[str, Any]) -> bool:
            data = event.get("event_data") or {}
            if event.get("event") == "playbook_on_task_start" and data.get("task"):
                on_phase(str(data["task"]))
            elif event.get("event") == "playbook_on_play_start" and data.get("play"):
                on_phase(str(data["play"]))
            return True

        # ansible-runner starts ansible-playbook by name: the one beside this interpreter.
        here = str(Path(sys.executable).parent)
        if here not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = f"{here}{os.pathsep}{os.environ.get('PATH', '')}"
        options: dict[str, Any] = {}
        if self.inventory is not None:  # else ansible.cfg's, as for ansible-playbook
            options["inventory"] = str(self.inventory)
        with (
            tempfile.TemporaryDirectory(prefix="streamlab-study-") as private,
            self.cancel.experiment(),
        ):
            result = ansible_runner.run(
                private_data_dir=private,
                project_dir=str(self.kit.root),
                playbook=str(self.kit.playbook),
                extravars=extravars,
                envvars={
                    "ANSIBLE_CONFIG": str(self.kit.root / "ansible.cfg"),
                    "ANSIBLE_NOCOLOR": "1",
                    "ANSIBLE_FORCE_COLOR": "0",
                    "ANSIBLE_CACHE_PLUGIN": "ansible.builtin.jsonfile",
                    "ANSIBLE_CACHE_PLUGIN_CONNECTION": self.facts.name,
                    "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "0",
                },
                event_handler=on_event,
                cancel_callback=self.cancel.cancel,
                quiet=True,
                **options,
            )
            output = result.stdout.read()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        log = self.log_dir / f"{run.run_id}-{stamp}.log"
        write_atomic(log, output)
        if result.status == "canceled":
            raise Cancelled(f"the playbook was cancelled; its output is in {log}", str(log))
        return ExperimentResult(
            rc=result.rc if isinstance(result.rc, int) else -1,
            log=str(log),
            output_tail=output[-OUTPUT_TAIL_CHARS:],
        )
