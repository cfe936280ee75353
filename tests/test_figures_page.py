"""docs/figures.md is what tools/render_figures.py renders from bench/results/ alone, and the
renderer refuses result files that do not follow docs/bench-results.md."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "render_figures", REPO / "tools" / "render_figures.py"
)
assert _spec is not None and _spec.loader is not None
figures = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = figures  # its dataclasses look their module up
_spec.loader.exec_module(figures)

RESULT = {
    "bench": "make bench-engines",
    "date": "2031-02-03",
    "commit": "0123abc",
    "machine": "2-core VM",
    "hosts": ["node1", "node2", "node3"],
    "title": "Steady-state latency",
    "description": "After the warm-up.",
    "columns": ["engine", "p50 ms", "overloaded"],
    "rows": [["flink", 29, False], ["storm", 120.5, None]],
    "notes": ["One machine's 2 cores."],
}


def results_repo(tmp_path: Path, **files: object) -> Path:
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    for name, content in files.items():
        path = tmp_path / "bench" / "results" / f"{name}.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return tmp_path


def test_committed_page_is_what_the_committed_results_render():
    page = (REPO / "docs" / "figures.md").read_text(encoding="utf-8")
    assert page == figures.render(REPO), "run .venv/bin/python tools/render_figures.py"


def test_no_results_awaits_every_bench_and_names_the_dropped_figures(tmp_path):
    page = figures.render(results_repo(tmp_path))
    assert "## Awaited" in page
    for bench in figures.BENCHES:
        assert f"- `{bench}`:" in page
    assert "## Dropped for want of data" in page
    assert "`make bench-faults`: the fault table" in page


def test_a_result_file_becomes_a_table_with_its_provenance(tmp_path):
    page = figures.render(results_repo(tmp_path, engines=RESULT))
    assert "## make bench-engines" in page
    assert "### Steady-state latency" in page
    assert "`make bench-engines`, 2031-02-03, commit `0123abc`; machine: 2-core VM" in page
    assert "hosts: node1, node2, node3" in page
    assert "[bench/results/engines.json](../bench/results/engines.json)" in page
    assert "| engine | p50 ms | overloaded |" in page
    assert "| flink | 29 | no |" in page
    assert "| storm | 120.5 |  |" in page
    assert "- One machine's 2 cores." in page
    awaited = page.split("## Awaited")[1].split("## Dropped")[0]
    assert "make bench-engines" not in awaited
    assert "make bench-faults" in awaited


def test_several_tables_and_an_unknown_bench(tmp_path):
    tables = {key: RESULT[key] for key in ("bench", "date", "commit", "machine", "hosts")}
    tables["bench"] = "bench/new_bench.py"
    tables["tables"] = [
        {"title": "First", "columns": ["a"], "rows": [[1]]},
        {"title": "Second", "columns": ["b", "c"], "rows": [["x|y", 2]]},
    ]
    page = figures.render(results_repo(tmp_path, new=tables))
    assert "## bench/new_bench.py" in page
    assert page.index("### First") < page.index("### Second")
    assert "| x\\|y | 2 |" in page


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"date": "yesterday"}, "'date' must be YYYY-MM-DD"),
        ({"commit": "HEAD"}, "'commit' must be 7 to 40"),
        ({"hosts": []}, "'hosts' must be a non-empty list"),
        ({"machine": ""}, "'machine' must be a non-empty string"),
        ({"rows": [["flink", 29]]}, "row 1 must be a list of 3 cells"),
        ({"rows": [["flink", 29, {"a": 1}]]}, "not a plain value"),
        ({"columns": []}, "'columns' must be a non-empty list"),
        ({"notes": "one"}, "'notes' must be a list of strings"),
    ],
)
def test_a_file_that_breaks_the_format_is_refused_by_name(tmp_path, change, message):
    repo = results_repo(tmp_path, broken={**RESULT, **change})
    with pytest.raises(figures.ResultError, match="broken.json") as error:
        figures.render(repo)
    assert message in str(error.value)


def test_not_json_is_refused(tmp_path):
    with pytest.raises(figures.ResultError, match="bad.json: not JSON"):
        figures.render(results_repo(tmp_path, bad="{"))


def test_check_mode_fails_on_a_stale_page(tmp_path):
    repo = results_repo(tmp_path, engines=RESULT)
    assert figures.main(["--repo", str(repo), "--check"]) == 1
    assert figures.main(["--repo", str(repo)]) == 0
    assert figures.main(["--repo", str(repo), "--check"]) == 0
