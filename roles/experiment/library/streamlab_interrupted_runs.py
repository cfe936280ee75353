#!/usr/bin/python
"""Ansible module: mark result directories of interrupted runs incomplete (never delete them)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: streamlab_interrupted_runs
short_description: Give every interrupted run's result directory a run.json saying incomplete
description:
  - An experiment writes run.started.json into its result directory when it starts and run.json
    when it records the run. A directory with the first and without the second was left by an
    experiment that ended before recording (Ctrl-C, a dead control node, a failed record step).
  - Only runs of this lab are marked (run.started.json's C(lab) equals C(lab)): a results
    directory shared by several labs keeps another lab's runs, running or not, as they are.
  - For each, writes run.json with C(status) C(incomplete), the reason, and what the started
    record says (run id, engine, fault, start, instance). Nothing is removed; a directory that
    already has a run.json is left alone, so a second call changes nothing.
  - Call it only after the run's processes and job were stopped: the kit runs one experiment at
    a time on a lab, and the caller is the next one (or teardown).
  - In check mode nothing is written and C(runs) lists what would be marked.
options:
  results_dir:
    description: The results directory (experiment_results_dir).
    type: path
    required: true
  lab:
    description: "The lab's identity as run.started.json records it (its hosts' cluster addresses)."
    type: list
    elements: str
    required: true
  found_by:
    description: "Who found them, for the reason (e.g. the next experiment's run id)."
    type: str
    required: true
  jobs:
    description: Names of the kit's jobs the caller stopped; a run's own are recorded with it.
    type: list
    elements: str
    default: []
  processes:
    description: >-
      Host -> processes the caller stopped ({pid, command, run}, from
      streamlab_run_processes); a run's own are recorded with it.
    type: dict
    default: {}
"""

RETURN = r"""
runs: {description: Run ids marked (in check mode, that would be)., type: list}
"""

import json
import os
from datetime import datetime, timezone
from typing import Any

from ansible.module_utils.basic import AnsibleModule

STARTED = "run.started.json"
RUN_JSON = "run.json"


def interrupted(results_dir: str, lab: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(run directory, started record) for each run of this lab started and never recorded."""
    if not os.path.isdir(results_dir):
        return []
    found = []
    for name in sorted(os.listdir(results_dir)):
        run_dir = os.path.join(results_dir, name)
        started = os.path.join(run_dir, STARTED)
        if os.path.isfile(started) and not os.path.exists(os.path.join(run_dir, RUN_JSON)):
            try:
                with open(started, encoding="utf-8") as handle:
                    record = json.load(handle)
            except (OSError, ValueError):
                record = {}
            if isinstance(record, dict) and sorted(record.get("lab") or []) == sorted(lab):
                found.append((run_dir, record))
    return found


def stopped_of(
    instance: str | None, jobs: list[str], processes: dict[str, list[dict[str, Any]]]
) -> list[str]:
    """The jobs and processes of one run (named by its instance), as short sentences."""
    if not instance:
        return []
    own_jobs = [f"job {job} cancelled" for job in jobs if instance in job]
    own_processes = [
        f"process {process.get('pid')} on {host} stopped ({process.get('command', '')[:120]})"
        for host, found in sorted(processes.items())
        for process in found or []
        if process.get("run") == instance
    ]
    return own_jobs + own_processes


def run_json(
    run_dir: str, started: dict[str, Any], found_by: str, stopped: list[str], now_utc: str
) -> dict[str, Any]:
    reason = (
        "interrupted: the experiment ended before it recorded this run (Ctrl-C, its control "
        f"node died, or recording failed); found at {now_utc} by {found_by}"
    )
    reason += (
        f", which stopped what it had left running: {len(stopped)} job(s) and process(es)"
        if stopped
        else "; nothing of it was still running"
    )
    return {
        "run_id": started.get("run_id") or os.path.basename(run_dir),
        "engine": started.get("engine") or "unknown",
        "fault": started.get("fault") or "unknown",
        "status": "incomplete",
        "incomplete_reasons": [reason],
        "start_utc": started.get("start_utc"),
        "instance": started.get("instance"),
        "parameters": started.get("parameters") or {},
        "interrupted": {"found_utc": now_utc, "found_by": found_by, "stopped": stopped},
    }


def write_new(path: str, data: dict[str, Any]) -> bool:
    """Write path whole, only if it does not exist (a run.json the experiment itself wrote in
    the meantime is never replaced); False when it was there."""
    part = path + ".part"
    with open(part, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
    try:
        os.link(part, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(part)
    return True


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "results_dir": {"type": "path", "required": True},
            "lab": {"type": "list", "elements": "str", "required": True},
            "found_by": {"type": "str", "required": True},
            "jobs": {"type": "list", "elements": "str", "default": []},
            "processes": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    now_utc = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if not module.params["lab"]:
        module.fail_json(msg="lab is empty: give the lab's cluster addresses")
    runs = interrupted(module.params["results_dir"], module.params["lab"])
    marked = []
    for run_dir, started in runs:
        if module.check_mode:
            marked.append(run_dir)
        else:
            stopped = stopped_of(
                started.get("instance"), module.params["jobs"], module.params["processes"]
            )
            record = run_json(run_dir, started, module.params["found_by"], stopped, now_utc)
            if write_new(os.path.join(run_dir, RUN_JSON), record):
                marked.append(run_dir)
    module.exit_json(changed=bool(marked), runs=[os.path.basename(d) for d in marked])


if __name__ == "__main__":
    main()
