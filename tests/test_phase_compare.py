"""bench/phase_compare.py on hand-built runs: the side-by-side medians, the drain-free time
around producing and the floor, computed by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import phase_compare  # noqa: E402


def run(root: Path, name: str, engine: str, phases: list[tuple[str, int]], quiet_s: int) -> Path:
    run_dir = root / name
    run_dir.mkdir(parents=True)
    marks, at = [], 0
    for phase, length_s in phases:
        marks.append({"name": phase, "start_ms": at, "end_ms": at + length_s * 1000})
        at += length_s * 1000
    record = {"engine": engine, "phases": marks, "parameters": {"quiet_s": quiet_s}}
    (run_dir / "run.json").write_text(json.dumps(record))
    # 20 s of sending in every run.
    (run_dir / "produced.summary.json").write_text(json.dumps({"start_ms": 0, "end_ms": 20_000}))
    return run_dir


def shape(submit: int, drain: int) -> list[tuple[str, int]]:
    return [
        ("checks", 3),
        ("submit", submit),
        ("ready", 2),
        ("producing", 22),
        ("drain", drain),
        ("stop", 3),
    ]


def test_before_and_after_side_by_side_with_the_floor(tmp_path):
    before = [
        run(tmp_path / "b", "f1", "flink", shape(10, 15), 10),
        run(tmp_path / "b", "f2", "flink", shape(14, 13), 10),
    ]
    after = [run(tmp_path / "a", "f3", "flink", shape(8, 12), 10)]
    columns, rows = phase_compare.side_by_side(before, after)
    assert columns == [
        "phase",
        "flink before: median s (runs)",
        "flink after: median s (runs)",
    ]
    table = {row[0]: row[1:] for row in rows}
    assert table["submit"] == ["12.0 (2)", "8.0 (1)"]
    # spans 55 and 57 less 20 s of sending: 35 and 37; after: 50 - 20
    assert table["around producing"] == ["36.0 (2)", "30.0 (1)"]
    # the same less each drain: 35 - 15 = 20 and 37 - 13 = 24; after 30 - 12
    assert table["around producing, drain left out"] == ["22.0 (2)", "18.0 (1)"]
    # submit + ready + stop + quiet_s: 10 + 2 + 3 + 10 and 14 + 2 + 3 + 10; after 8 + 15
    assert table["floor: submit + ready + stop + quiet_s"] == ["27.0 (2)", "23.0 (1)"]


def test_an_engine_measured_on_one_side_only_shows_a_dash_on_the_other(tmp_path):
    before = [run(tmp_path / "b", "s1", "storm", shape(20, 10), 10)]
    after = [run(tmp_path / "a", "f1", "flink", shape(8, 12), 10)]
    columns, rows = phase_compare.side_by_side(before, after)
    assert columns[1:] == [
        "flink before: median s (runs)",
        "flink after: median s (runs)",
        "storm before: median s (runs)",
        "storm after: median s (runs)",
    ]
    table = {row[0]: row[1:] for row in rows}
    assert table["submit"] == ["–", "8.0 (1)", "20.0 (1)", "–"]
