"""bench/study_estimate.py without a test host: the dry run's output read back, and the result
file from hand-built measurements (its error against the measured time)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import study_estimate  # noqa: E402

from analysis.study.progress import duration_text  # noqa: E402

DRY_RUN = """study smoke (studies/smoke.yml): 2 runs
  1  smoke-flink-kill_taskmanager-r1  to run, ~3m 40s
each run's estimate: producing, the commit wait and the quiet period, plus its
overhead taken from flink: median of 3 earlier flink runs' phases in the results directory
to run: 2 of 2, estimated 8m 05s with the analysis after the last run (~1m 00s; at most 3 failures)
"""


@pytest.mark.parametrize("seconds", [0, 45, 60, 485, 3599])
def test_every_duration_the_dry_run_writes_reads_back(seconds):
    assert study_estimate.duration_s(duration_text(seconds)) == seconds


def test_an_hour_long_estimate_reads_back_to_the_minute():
    assert study_estimate.duration_s(duration_text(2 * 3600 + 25 * 60 + 40)) == 2 * 3600 + 25 * 60


def test_the_dry_runs_study_estimate_and_source_are_read():
    assert study_estimate.read_dry_run(DRY_RUN) == (
        "smoke",
        485,
        "flink: median of 3 earlier flink runs' phases in the results directory",
    )


def test_a_dry_run_without_an_estimate_is_an_error():
    with pytest.raises(ValueError, match="no estimate"):
        study_estimate.read_dry_run("study smoke (studies/smoke.yml): 2 runs\n")


def test_the_error_is_against_the_measured_time():
    # (1060 - 720) / 720 = 47.2 % high; (430 - 465) / 465 = 7.5 % low.
    assert study_estimate.error_percent(1060, 720) == 47.2
    assert study_estimate.error_percent(430, 465) == -7.5


def test_the_result_file_has_a_cell_per_column_and_the_runs_commit(tmp_path):
    run_dir = tmp_path / "smoke-flink-r1"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(
        json.dumps({"kit_commit": "0123abcd" * 5, "kit_dirty": False, "hosts": {}})
    )
    row = ["studies/smoke.yml", 2, 2, 6, 284, 43, 465, 492, 5.8, "flink: ...", 594, 27.7, "0123abc"]
    data = study_estimate.result([row], [run_dir], "the test hosts")
    assert (data["bench"], data["commit"]) == ("bench/study_estimate.py", "0123abc")
    (table,) = data["tables"]
    assert table["rows"] == [row] and len(table["columns"]) == len(row)
    assert not any("dirty" in note for note in table["notes"])


def recorded(run_id: str, parameters: dict) -> dict:
    return {
        "run_id": run_id,
        "engine": "flink",
        "fault": "none",
        "parameters": parameters,
        "repetition": 1,
    }


def test_the_hosts_are_named_from_the_inventory_and_the_machine_follows(tmp_path):
    repo = study_estimate.REPO
    assert study_estimate.where_of(str(repo / "inventory/lab/hosts.yml")) == "the test hosts"
    local = study_estimate.where_of(str(repo / "inventory/local"))
    assert local.startswith("the embedded default")
    assert study_estimate.where_of("/x/hosts.yml") == "the hosts of /x/hosts.yml"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"kit_commit": "0123abcd" * 5, "hosts": {}}))
    data = study_estimate.result([], [run_dir], local)
    assert "test hosts" not in data["machine"]
    assert "the embedded default" in data["tables"][0]["description"]
    assert len(data["tables"]) == 1  # no run recorded phases: no phase table


def test_the_phase_table_is_the_reports_over_every_run(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    phases = [
        {"name": "submit", "start_ms": 0, "end_ms": 10_000},
        {"name": "producing", "start_ms": 10_000, "end_ms": 40_500},
    ]
    record = {"kit_commit": "0123abcd" * 5, "hosts": {}, "engine": "flink", "phases": phases}
    (run_dir / "run.json").write_text(json.dumps(record))
    produced = {"start_ms": 10_000, "end_ms": 40_000}
    (run_dir / "produced.summary.json").write_text(json.dumps(produced))
    data = study_estimate.result([], [run_dir], "the test hosts")
    phases_table = data["tables"][1]
    assert phases_table["columns"] == ["phase", "flink: median s (runs)"]
    assert phases_table["rows"][0] == ["submit", "10.0 (1)"]
    assert phases_table["rows"][-1] == ["around producing", "10.5 (1)"]
    assert phases_table["notes"] == ["1 run, none with a fault."]


def test_producing_is_counted_as_the_estimate_counts_it():
    record = {
        "runs": [
            recorded("a", {"count": 15000, "rate": 500}),
            recorded("b", {"count": 1001, "rate": 500}),  # ceil: 3 s
            recorded("c", {"rate": 250}),  # the kit's default count
        ],
        "capacity": {
            "flink": {"capacity_spec": {"warmup_s": 3, "steady_s": 10}, "trials": [{}, {}]},
            "storm": "not measured",  # not a measurement: counts nothing
        },
    }
    kit = SimpleNamespace(defaults={"count": 2500, "rate": 100})
    assert study_estimate.nominal_producing_s(record, kit) == 30 + 3 + 10 + 2 * 13


def write_run(results: Path, run_id: str, status: str, start_ms: int, end_ms: int) -> None:
    (results / run_id).mkdir(parents=True)
    record = {"status": status, "start_ms": start_ms, "end_ms": end_ms}
    (results / run_id / "run.json").write_text(json.dumps(record))


def test_earlier_runs_are_the_complete_ones_that_ended_before_the_study_began(tmp_path):
    write_run(tmp_path, "old-1", "complete", 1000, 2000)
    write_run(tmp_path, "old-2", "complete", 2100, 2900)
    write_run(tmp_path, "old-3", "incomplete", 3000, 3500)  # not a run to measure
    write_run(tmp_path, "new-1", "complete", 4000, 5000)
    write_run(tmp_path, "new-2", "complete", 5100, 6000)
    write_run(tmp_path, "later", "complete", 7000, 8000)  # after the study began
    record = {"runs": [{"run_id": "new-2"}, {"run_id": "new-1"}]}
    assert study_estimate.earlier_runs(tmp_path, record) == 2
    assert study_estimate.earlier_runs(tmp_path, {"runs": [{"run_id": "missing"}]}) == 0


@pytest.fixture
def named_by_file(monkeypatch):
    """The dry run replaced by its first line's study name: the spec's file name."""
    monkeypatch.setattr(
        study_estimate, "dry_run", lambda spec, inventory, results: (spec.stem, 100, "")
    )


def test_a_non_empty_results_directory_is_refused_without_append(tmp_path, named_by_file, capsys):
    results = tmp_path / "results"
    (results / "first").mkdir(parents=True)
    with pytest.raises(SystemExit):
        study_estimate.main([str(spec_file(tmp_path, "second")), "--results", str(results)])
    assert "is not empty" in capsys.readouterr().err


def test_append_runs_only_the_specs_without_a_measurement(tmp_path, named_by_file):
    results = tmp_path / "results"
    (results / "first").mkdir(parents=True)
    (results / "first" / study_estimate.MEASURED).write_text("{}")
    specs = [spec_file(tmp_path, "first"), spec_file(tmp_path, "second")]
    parser = argparse.ArgumentParser()
    assert study_estimate.to_measure(specs, "inv", results, True, parser) == specs[1:]
    assert study_estimate.to_measure(specs, "inv", tmp_path / "none", False, parser) == specs


def test_append_refuses_a_start_the_bench_did_not_finish(tmp_path, named_by_file, capsys):
    results = tmp_path / "results"
    (results / "second").mkdir(parents=True)  # a start's directory, no estimate.json
    parser = argparse.ArgumentParser()
    with pytest.raises(SystemExit):
        study_estimate.to_measure([spec_file(tmp_path, "second")], "inv", results, True, parser)
    assert "did not finish" in capsys.readouterr().err


def test_each_studys_runs_say_their_commit_and_a_dirty_tree(tmp_path):
    for name, commit, dirty in (("a", "0123abcd" * 5, False), ("b", "0123abcd" * 5, True),
                                ("c", "fedcba98" * 5, False)):  # fmt: skip
        (tmp_path / name).mkdir()
        record = {"kit_commit": commit, "kit_dirty": dirty}
        (tmp_path / name / "run.json").write_text(json.dumps(record))
    runs = [tmp_path / name for name in "abc"]
    assert study_estimate.commits_text(runs) == "0123abc (dirty tree), fedcba9"
    assert study_estimate.commits_text(runs[2:]) == "fedcba9"


def test_a_rows_estimates_are_those_kept_with_its_measurement(tmp_path, monkeypatch):
    """The fixed model kept at the start, never a later kit's; a start that kept none is refused
    rather than given today's; the analysis's seconds from the study's report."""
    results = tmp_path / "results"
    (results / "first").mkdir(parents=True)
    (results / "first" / "study.json").write_text(json.dumps({"runs": [], "capacity": {}}))
    (results / "first" / "report.md").write_text(
        "After the last run, 2 run(s) without a summary.json were analysed in one local Spark "
        "application (2 summarised), in 43 s of wall time besides."
    )
    kept = results / "first" / study_estimate.MEASURED
    measured = {"estimate_s": 500, "source": "s", "fixed_s": 600, "wall_s": 400.0}
    kept.write_text(json.dumps(measured))
    spec = spec_file(tmp_path, "first")
    kit = SimpleNamespace(defaults={})
    monkeypatch.setattr(study_estimate, "dry_run", lambda spec, inv, res: (spec.stem, 900, ""))
    monkeypatch.setattr(
        study_estimate, "load_spec", lambda spec, kit: SimpleNamespace(name="first")
    )
    row, _ = study_estimate.row_of(spec, results, kit)
    assert (row[5], row[10], row[11]) == (43, 600, 50.0)
    del measured["fixed_s"]
    kept.write_text(json.dumps(measured))
    with pytest.raises(SystemExit, match="no fixed-model estimate"):
        study_estimate.row_of(spec, results, kit)


def test_the_notes_say_when_runs_ran_at_several_commits_or_dirty(tmp_path):
    runs = []
    for name, commit, dirty in (("a", "0123abcd" * 5, True), ("b", "fedcba98" * 5, False)):
        (tmp_path / name).mkdir()
        record = {"kit_commit": commit, "kit_dirty": dirty, "hosts": {}}
        (tmp_path / name / "run.json").write_text(json.dumps(record))
        runs.append(tmp_path / name)
    row = ["s.yml", 2, 2, 3, 60, None, 100, 110, 10.0, "x", 300, 200.0, "0123abc, fedcba9"]
    notes = study_estimate.result([row], runs, "the test hosts")["tables"][0]["notes"]
    assert not notes[0].startswith("Rows in the order the studies ran, into one results "
                                   "directory, which held no run")  # fmt: skip
    assert any("several kit commits" in note for note in notes)
    assert any(note.startswith("1 run(s) ran with uncommitted changes") for note in notes)


def test_a_relative_inventory_is_the_repositorys(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert study_estimate.where_of("inventory/lab/hosts.yml") == "the test hosts"


def spec_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yml"
    path.write_text("engines: [flink]\n")
    return path
