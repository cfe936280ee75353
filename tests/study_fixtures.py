"""A stand-in kit and experiment for the study tests: no lab, no ansible-runner."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analysis.study.kit import Kit
from analysis.study.plan import PlannedRun
from analysis.study.runner import ExperimentResult

REPO = Path(__file__).resolve().parents[1]
STUDIES = REPO / "studies"
TEST_STUDIES = REPO / "tests" / "studies"
# The fault role's types, as this checkout has them.
FAULT_TYPES = tuple(sorted(p.stem for p in (REPO / "roles/fault/tasks/types").glob("*.yml")))


def fake_kit(root: Path, faults: tuple[str, ...] = FAULT_TYPES) -> Kit:
    """A checkout with this repository's experiment defaults and engines, and the fault types."""
    for relative in (
        "roles/experiment/defaults/main.yml",
        "roles/experiment/vars/main.yml",
        "roles/experiment/meta/argument_specs.yml",
        "roles/experiment/tasks/flink/engine.yml",
        "roles/experiment/tasks/storm/engine.yml",
        "ansible.cfg",
    ):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / relative, root / relative)
    (root / "playbooks").mkdir(exist_ok=True)
    (root / "playbooks" / "experiment.yml").write_text("---\n")
    types = root / "roles" / "fault" / "tasks" / "types"
    types.mkdir(parents=True, exist_ok=True)
    for fault in faults:
        (types / f"{fault}.yml").write_text("---\n")
    return Kit.load(root)


class FakeExperiment:
    """Writes what a run of the experiment leaves: run.json (complete unless told otherwise)
    and summary.json. `outcome(run, call)` may return "complete", "lossy" (complete, 7 acked
    messages lost), "incomplete", "nothing" (the playbook died before recording), "raise" or
    "interrupt" (Ctrl-C in the middle of the run)."""

    def __init__(
        self, results_dir: Path, outcome: Callable[[PlannedRun, int], str] | None = None
    ) -> None:
        self.results_dir = results_dir
        self.outcome = outcome or (lambda run, call: "complete")
        self.calls: list[str] = []
        self.extravars: list[dict[str, Any]] = []
        self.phases: list[str] = []

    def __call__(
        self, run: PlannedRun, extravars: dict[str, Any], on_phase: Callable[[str], None]
    ) -> ExperimentResult:
        self.calls.append(run.run_id)
        self.extravars.append(extravars)
        on_phase("Run the fault schedule")
        self.phases.append("Run the fault schedule")
        outcome = self.outcome(run, len(self.calls))
        run_dir = Path(extravars["results_dir"]) / extravars["run_id"]
        run_dir.mkdir(parents=True)
        if outcome == "raise":
            raise RuntimeError("ansible-runner could not start")
        if outcome == "interrupt":
            raise KeyboardInterrupt
        if outcome == "nothing":
            return ExperimentResult(rc=2, output_tail="fatal: [node1]: UNREACHABLE!\n")
        # "lossy": a complete run that lost 7 acknowledged messages (its verdict failed).
        lost = 7 if outcome == "lossy" else 0
        status = "complete" if outcome == "lossy" else outcome
        record = {
            "run_id": run.run_id,
            "engine": run.engine,
            "fault": run.fault,
            "status": status,
            "incomplete_reasons": [] if status == "complete" else ["the drain timed out"],
            "verdict": {
                "guarantee": "at_least_once",
                "holds": (lost == 0) if status == "complete" else None,
                "lost": lost,
                "duplicate_records": 0,
                "reason": "at-least-once " + ("violated" if lost else "held"),
            },
            "parameters": dict(run.parameters),
        }
        (run_dir / "run.json").write_text(json.dumps(record))
        summary = {
            **record,
            "produced": run.parameters.get("count", 1000),
            "duplicate_rate": 0.001 * len(self.calls),
            "lost": lost,
            "loss_rate": lost / run.parameters.get("count", 1000),
            "latency_ms": {"p50": 20, "p99": 100 + len(self.calls), "p99.9": 300},
            "faults": [{"stall_s": 2.0, "recovery_s": 5.0 + len(self.calls)}],
        }
        (run_dir / "summary.json").write_text(json.dumps(summary))
        sending_ms = 1000 * run.parameters.get("count", 1000) // run.parameters.get("rate", 2000)
        produced = {"start_ms": 1_000_000, "end_ms": 1_000_000 + sending_ms}
        (run_dir / "produced.summary.json").write_text(json.dumps(produced))
        return ExperimentResult(rc=0 if outcome == "complete" else 2)
