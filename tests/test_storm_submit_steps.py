"""bench/storm_submit_steps.py on a hand-built Storm run: the submit phase split by the daemons'
own log lines, and the runs it cannot split named with the reason."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import storm_submit_steps  # noqa: E402

NAME = "streamlab-run-1"
START = datetime(2026, 12, 7, 10, 0, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    moment = datetime.fromtimestamp(START.timestamp() + seconds, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def storm_run(root: Path, run_id: str, nimbus: list[str], supervisors: list[list[str]]) -> Path:
    run_dir = root / run_id
    (run_dir / "engine" / "logs").mkdir(parents=True)
    start_ms = int(START.timestamp() * 1000)
    record = {
        "run_id": run_id,
        "engine": "storm",
        "job_id": NAME,
        "kit_commit": "0123abcd" * 5,
        "hosts": {"node1": {"os": "Debian 12"}},
        "phases": [{"name": "submit", "start_ms": start_ms, "end_ms": start_ms + 20_000}],
    }
    (run_dir / "run.json").write_text(json.dumps(record))
    (run_dir / "engine" / "logs" / "node1.log").write_text("\n".join(nimbus) + "\n")
    for n, lines in enumerate(supervisors, start=2):
        (run_dir / "engine" / "logs" / f"node{n}.log").write_text("\n".join(lines) + "\n")
    return run_dir


def test_the_submit_phase_is_split_at_the_daemons_own_lines(tmp_path):
    topology = f"{NAME}-1-1796640105"
    run_dir = storm_run(
        tmp_path,
        "r1",
        [
            f"{at(1.0)} o.a.s.d.n.Nimbus t [INFO] older line",
            f"{at(2.5)} o.a.s.d.n.Nimbus p [INFO] Received topology submission for {NAME} (x)",
            f"{at(9.5)} o.a.s.d.n.Nimbus timer [INFO] Assigning {topology} to 2 slots",
        ],
        [
            [
                f"{at(11.0)} o.a.s.d.s.BasicContainer S [INFO] Launching worker with assignment "
                f"LocalAssignment(topology_id:{topology}, executors:[])"
            ],  # fmt: skip
            [
                f"{at(11.5)} o.a.s.d.s.BasicContainer S [INFO] Launching worker with assignment "
                f"LocalAssignment(topology_id:{topology}, executors:[])"
            ],  # fmt: skip
        ],
    )
    steps = storm_submit_steps.steps_of(run_dir)
    assert steps == storm_submit_steps.SubmitSteps(
        "r1",
        "0123abc",
        20.0,
        {"client": 2.5, "scheduling wait": 7.0, "supervisors": 2.0, "workers": 8.5},
    )
    document = storm_submit_steps.result_file([steps], {"r0": "why"}, [run_dir])
    assert document["commit"] == "0123abc" and document["hosts"] == ["node1 Debian 12"]
    assert document["tables"][0]["rows"][2] == ["scheduling wait", "7.0 (7.0-7.0)"]
    assert "Left out: r0 (why)." in document["tables"][0]["notes"]


def test_a_run_whose_logs_do_not_reach_back_or_fall_out_of_order_is_named(tmp_path):
    short = storm_run(tmp_path, "short", [f"{at(15.0)} o.a.s.d.n.Nimbus t [INFO] later"], [[]])
    assert "do not reach back" in storm_submit_steps.steps_of(short)
    topology = f"{NAME}-1-1796640105"
    late = storm_run(
        tmp_path,
        "late",
        [
            f"{at(2.5)} o.a.s.d.n.Nimbus p [INFO] Received topology submission for {NAME} (x)",
            f"{at(9.5)} o.a.s.d.n.Nimbus timer [INFO] Assigning {topology} to 2 slots",
        ],
        [
            [
                f"{at(25.0)} o.a.s.d.s.BasicContainer S [INFO] Launching worker with assignment "
                f"LocalAssignment(topology_id:{topology}, executors:[])"
            ]
        ],  # fmt: skip
    )
    assert "do not fall in order" in storm_submit_steps.steps_of(late)
