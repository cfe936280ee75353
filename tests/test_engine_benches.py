"""bench/three_engine_figures.py's findings and bench/engine_figures.py's rate search, on
hand-built runs: what each sentence says follows from the runs, and the search's steps."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import engine_figures  # noqa: E402
import three_engine_figures  # noqa: E402
from fault_figures import FaultRun  # noqa: E402
from test_fault_figures import fault_run  # noqa: E402

from analysis.study.capacity import Trial  # noqa: E402


def table_of(**recoveries: tuple[float, bool]) -> three_engine_figures.Table:
    """One group per engine, of 3 runs with the given recovery (and whether it is censored)."""
    table: three_engine_figures.Table = []
    for engine, (seconds, censored) in recoveries.items():
        runs = [
            fault_run(
                f"{engine}-{n}",
                seconds,
                engine=engine,
                censored={name: censored for name in three_engine_figures.fault_figures.TIMELINE},
            )
            for n in range(3)
        ]
        table.append((engine, "kill", "knob", 1, runs))
    return table


def test_a_recovery_inside_ospbenchs_range_is_said_to_fall_within_it_and_outside_unexplained():
    notes = three_engine_figures.findings(table_of(spark=(21.0, False), flink=(40.0, False)))
    spark = next(n for n in notes if n.startswith("Spark: "))
    flink = next(n for n in notes if n.startswith("Flink: "))
    assert "recovery 21.0 s" in spark and "OSPBench: 20 to 22 s, which this falls within" in spark
    assert "recovery 40.0 s" in flink and "below it" in flink and "unexplained" in flink
    # Without the engines' restart counts the comparison names no cause.
    (compared,) = [n for n in notes if "recovered first" in n]
    assert compared.endswith("The runs do not account for the difference: it is unexplained.")
    assert "restarted in" not in compared


def test_a_censored_recovery_is_a_lower_bound_and_storm_has_no_reference():
    notes = three_engine_figures.findings(table_of(storm=(30.0, True)))
    assert notes == [
        "Storm: recovery at least 30.0 s, the failure detected 30.0 s after the fault, the "
        "engine whole again at 30.0 s, 0.5 s of input replayed per fault."
    ]


@pytest.mark.parametrize(
    ("flink_restarts", "spark_restarts", "said"),
    [
        ((1, 1, 1), (0, 0, 0), "Every Flink recovery includes a restart of its job"),
        ((1, 0, 1), (0, 0, 0), "it is unexplained"),
        ((1, 1, 1), (0, 1, 0), "it is unexplained"),
        ((1, 1, 1), (0, None, 0), "it is unexplained"),
    ],
)
def test_the_engines_are_compared_through_their_restarts_only_when_every_run_shows_it(
    flink_restarts, spark_restarts, said
):
    counts = {
        **{f"flink-{n}": c for n, c in enumerate(flink_restarts)},
        **{f"spark-{n}": c for n, c in enumerate(spark_restarts)},
    }
    notes = three_engine_figures.findings(
        table_of(flink=(55.0, False), spark=(21.0, False)), lambda run: counts[run.run_id]
    )
    (compared,) = [n for n in notes if "recovered first" in n]
    assert compared.startswith("Spark recovered first here (as OSPBench): Flink 55.0 s, Spark")
    if None not in spark_restarts:
        assert (
            f"Flink's job restarted in {sum(map(bool, flink_restarts))} of 3 runs and Spark's "
            f"query restarted in {sum(map(bool, spark_restarts))} of 3 runs"
        ) in compared
    else:  # an unknown count is not counted as no restart
        assert "restarted in" not in compared
    assert said in compared


@pytest.mark.parametrize(
    ("spark", "flink", "said"),
    [
        ((21.0, True), (55.0, False), "leaves which one recovered first unsaid"),
        ((60.0, True), (55.0, False), "Flink recovered first here (unlike OSPBench): Flink "
         "55.0 s, Spark at least 60.0 s."),
        ((21.0, False), (55.0, True), "Spark recovered first here"),
        ((30.0, False), (30.0, False), "Flink and Spark recovered in the same 30.0 s here."),
        ((40.0, False), (30.0, False), "Flink recovered first here (unlike OSPBench)"),
    ],
)  # fmt: skip
def test_a_lower_bound_decides_which_engine_recovered_first_only_when_it_can(spark, flink, said):
    notes = three_engine_figures.findings(table_of(spark=spark, flink=flink))
    assert [n for n in notes if said in n], notes
    spark_note = next(n for n in notes if n.startswith("Spark: "))
    if spark == (21.0, True):
        assert "recovery at least 21.0 s" in spark_note
        assert "a lower bound cannot be placed in it" in spark_note
    if spark == (60.0, True):
        assert "this is above it" in spark_note and "unexplained" in spark_note


def test_restarts_after_the_fault_are_counted_from_the_timeline(tmp_path):
    out = tmp_path / "r"
    (out / "engine").mkdir(parents=True)
    (out / "summary.json").write_text(json.dumps({"faults": [{"start_ms": 2000}]}))
    lines = [(1000, 0), (2000, 0), (3000, 1), (4000, 2), (5000, None)]
    (out / "engine" / "timeline.jsonl").write_text(
        "".join(json.dumps({"t_ms": t, "restarts": n}) + "\n" for t, n in lines)
    )
    run = fault_run("r", 10.0)
    assert three_engine_figures.restarts_after_fault(tmp_path, run) == 2
    (out / "engine" / "timeline.jsonl").write_text('{"t_ms": 3000, "executors": {}}\n{"t_m')
    assert three_engine_figures.restarts_after_fault(tmp_path, run) is None
    (out / "engine" / "timeline.jsonl").unlink()
    assert three_engine_figures.restarts_after_fault(tmp_path, run) is None


def test_a_configuration_is_an_engine_with_its_manifest_settings():
    config = engine_figures.Config.parse(
        "spark:spark_trigger=continuous,p99_limit_ms=5000,spark_executors=1"
    )
    assert config.engine == "spark" and config.p99_limit_ms == 5000
    assert dict(config.settings) == {"spark_trigger": "continuous", "spark_executors": "1"}
    assert config.label == "spark (spark_trigger=continuous, spark_executors=1)"
    assert engine_figures.Config.parse("flink").label == "flink"
    assert {config: 1}[
        engine_figures.Config.parse(
            config.label.replace(" (", ":")[:-1].replace(", ", ",") + ",p99_limit_ms=5000"
        )
    ] == 1
    with pytest.raises(argparse.ArgumentTypeError, match="ENGINE:KEY=VALUE"):
        engine_figures.Config.parse("spark:continuous")
    with pytest.raises(argparse.ArgumentTypeError, match="p99_limit_ms=5000"):
        engine_figures.Config.parse("spark:p99_limit_ms=5s")


def test_the_rate_search_doubles_until_a_run_fails_then_bisects(monkeypatch, capsys):
    capacity = 5_000.0  # a run passes at or below it

    def run_once(config, count, rate, warmup_s, results):
        p99 = 200 if rate <= capacity else 5_000
        trial = Trial(f"r{rate:.0f}", rate, "complete", rate > capacity, 50, p99, 1.0, rate, 60.0)
        return engine_figures.RunFigures(config, trial)

    monkeypatch.setattr(engine_figures, "run_once", run_once)
    args = argparse.Namespace(
        search_from=2_000.0,
        search_runs=6,
        warmup_s=10,
        search_steady_s=20,
        p99_limit_ms=1_000.0,
        results=Path("unused"),
    )
    good, bad, runs = engine_figures.sustainable_rate(engine_figures.Config("flink"), args)
    assert [r.trial.rate for r in runs] == [2_000, 4_000, 8_000, 6_000, 5_000, 5_500]
    assert (good, bad) == (5_000, 5_500)
    assert "flink sustainable rate on the test hosts: 5,000/s" in capsys.readouterr().out


def test_the_result_file_has_a_row_per_configuration_and_as_many_cells_as_columns(tmp_path):
    micro = engine_figures.Config.parse("spark:p99_limit_ms=5000")
    continuous = engine_figures.Config.parse("spark:spark_trigger=continuous")

    def run(config, run_id, rate, p99, overloaded):
        (tmp_path / run_id).mkdir()
        record = {
            "kit_commit": "0123abcd",
            "kit_dirty": False,
            "hosts": {"node1": {"os": "Debian 12"}},
            "settings": {"trigger": dict(config.settings).get("spark_trigger", "micro_batch")},
        }
        (tmp_path / run_id / "run.json").write_text(json.dumps(record))
        return engine_figures.RunFigures(
            config, Trial(run_id, rate, "complete", overloaded, 100.0, p99, 2.25, rate, 90.0)
        )

    steady = {
        micro: [run(micro, f"m{n}", 2_000, 3_000 + n, False) for n in range(2)],
        continuous: [run(continuous, "c0", 2_000, 900, None)],
    }
    searched = {micro: (2_000.0, 4_000.0, [run(micro, "s0", 4_000, 9_000, True)])}
    args = argparse.Namespace(
        results=tmp_path, rate=2_000.0, reps=2, count=60_000, warmup_s=10,
        search_steady_s=20, search_runs=4, search_from=2_000.0, p99_limit_ms=1_000.0,
    )  # fmt: skip
    document = json.loads(json.dumps(engine_figures.result_file(args, steady, searched)))
    assert document["commit"] == "0123abc" and document["hosts"] == ["node1 Debian 12"]
    tables = {table["title"]: table for table in document["tables"]}
    for table in tables.values():
        assert all(len(row) == len(table["columns"]) for row in table["rows"]), table["title"]
    latency = tables["Steady-state latency at 2,000 msg/s"]["rows"]
    assert [row[0] for row in latency] == ["spark", "spark (spark_trigger=continuous)"]
    assert latency[0][3] == "3,000 (3,000-3,001)" and latency[0][4] == "2.2 (2.2-2.2)"
    assert latency[1][6] == "unknown" and latency[1][7] == "trigger continuous"
    assert tables["Sustainable rate"]["rows"] == [["spark", 5000, 2000, 4000, "4,000"]]
    assert len(tables["Every run"]["rows"]) == 4


def test_the_spark_finding_reads_the_tasks_lost_with_the_executor_from_the_driver_log(tmp_path):
    lost = "26/12/07 02:45:34 ERROR TaskSchedulerImpl: Lost executor 0 on 10.77.0.12: {}\n"
    task = (
        "26/12/07 02:45:34 WARN TaskSetManager: Lost task 0.0 in stage 6.0 (TID 21) (10.77.0.12 "
        "executor 0): ExecutorLostFailure (executor 0 exited caused by one of the running tasks)\n"
    )
    logs = {
        "a": lost.format("Command exited with code 137") + task + task,
        "b": lost.format("Command exited with code 137"),
        "c": "nothing about executors\n",
    }
    for run_id, text in logs.items():
        (tmp_path / run_id / "engine").mkdir(parents=True)
        (tmp_path / run_id / "engine" / "spark-driver.log").write_text(text)
    runs = [
        fault_run("a", 10.0, engine="spark", fault_duplicates=576),
        fault_run("b", 10.0, engine="spark", fault_duplicates=0),
        fault_run("c", 10.0, engine="spark", fault_duplicates=0),
    ]
    assert three_engine_figures.spark_losses(tmp_path, runs[0]) == (
        ["Command exited with code 137"],
        2,
    )
    line = three_engine_figures.spark_finding(
        runs, lambda run: three_engine_figures.spark_losses(tmp_path, run)
    )
    assert line == (
        "Spark: the driver log names the killed executor lost in 2 of 3 runs (the reason its "
        "worker reported: 'Command exited with code 137'); tasks lost with it: 2, in 1 run. "
        "The runs that lost tasks have 576 duplicate records from the fault. The 2 run(s) that "
        "lost none have 0 duplicate records from the fault: nothing was replayed."
    )
    # A run that lost no task but has duplicates is not explained by the logs.
    runs[2] = fault_run("c", 10.0, engine="spark", fault_duplicates=7)
    line = three_engine_figures.spark_finding(
        runs, lambda run: three_engine_figures.spark_losses(tmp_path, run)
    )
    assert line is not None and line.endswith(
        "7 duplicate records from the fault, unexplained by the logs."
    )
    assert three_engine_figures.spark_losses(tmp_path, fault_run("gone", 1.0)) is None


def write_run(root: Path, run_id: str, files: dict[str, object]) -> FaultRun:
    """A run directory of the given files (JSON for dicts, lines of JSON for lists)."""
    for name, content in files.items():
        path = root / run_id / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, list):
            path.write_text("".join(json.dumps(line) + "\n" for line in content))
        else:
            path.write_text(json.dumps(content))
    return fault_run(run_id, 10.0, engine="spark")


def test_the_batches_around_a_spark_fault_and_when_its_host_had_an_executor_again(tmp_path):
    start = 100_000

    def batch(at_s, took_s, add_s):
        return {
            "t_ms": start + int(at_s * 1000),
            "event": "progress",
            "progress": {
                "durationMs": {"triggerExecution": took_s * 1000, "addBatch": add_s * 1000}
            },
        }

    def line(at_s, executors):
        return {"t_ms": start + int(at_s * 1000), "executors": executors}

    run = write_run(
        tmp_path,
        "s",
        {
            "summary.json": {"faults": [{"start_ms": start, "host": "node2"}]},
            "run.json": {"hosts": [{"name": "node2", "address": "10.0.0.2"}]},
            "engine/spark-progress.jsonl": [
                batch(-30, 9, 9),  # before the 20 s window: not counted
                batch(-15, 1, 0.5),
                batch(-10, 2, 1),
                batch(-5, 1.5, 1),
                {"t_ms": start, "event": "committed", "batch": 3},
                batch(8, 8.8, 8.4),
                batch(24, 12.2, 11.3),
                batch(70, 30, 30),  # after the 60 s window
            ],
            "engine/timeline.jsonl": [
                line(-1, {"10.0.0.2": 1, "10.0.0.3": 1}),
                line(2, {"10.0.0.3": 1}),
                line(5, {"10.0.0.2": 0, "10.0.0.3": 1}),
                line(10.3, {"10.0.0.2": 1, "10.0.0.3": 1}),
                line(12, {"10.0.0.2": 1, "10.0.0.3": 1}),
            ],
        },
    )
    found = three_engine_figures.spark_batches(tmp_path, run)
    assert found == {
        "median_before_s": 1.5,
        "longest_s": 12.2,
        "longest_add_batch_s": 11.3,
        "executor_back_s": 10.3,
    }
    said = three_engine_figures.batch_finding(
        [run, fault_run("gone", 1.0)], lambda r: found if r is run else None
    )
    assert said == (
        "Spark, in 1 of 2 runs with progress reports: the longest batch reported in the 60 s "
        "after the fault took 12.2 s, of which 11.3 s running its tasks (addBatch), against a "
        "median batch of 1.5 s in the 20 s before it (engine/spark-progress.jsonl); the fault's "
        "host listed an executor again 10.3 s after the fault (the timeline's executors). What "
        "made those batches longer the runs do not measure."
    )
    assert three_engine_figures.spark_batches(tmp_path, fault_run("gone", 1.0)) is None


def test_how_flink_learnt_of_the_lost_taskmanager_from_its_exception_history(tmp_path):
    start = 100_000
    lost = (
        "org.apache.flink.runtime.resourcemanager.exceptions.ResourceManagerException: "
        "TaskManager with id 10.77.0.12:6130-58a809 is no longer reachable.\n\tat ..."
    )
    no_slot = "java.util.concurrent.CompletionException: ... NoResourceAvailableException: ..."
    entries = [
        {"timestamp": start - 5_000, "stacktrace": "an earlier failure"},
        {"timestamp": start + 14_856, "stacktrace": no_slot},
        {"timestamp": start + 12_633, "stacktrace": lost},
        {"timestamp": start + 15_000, "stacktrace": no_slot},
    ]
    run = write_run(
        tmp_path,
        "f",
        {
            "summary.json": {"faults": [{"start_ms": start}]},
            "engine/flink-exceptions.json": {"exceptionHistory": {"entries": entries}},
        },
    )
    found = three_engine_figures.flink_exceptions(tmp_path, run)
    assert found == (
        12.633,
        "TaskManager with id 10.77.0.12:6130-58a809 is no longer reachable.",
        2,
    )
    other = (15.3, "TaskManager with id 10.77.0.13:6130-aaaaaa is no longer reachable.", 16)
    answers = iter([found, other])
    said = three_engine_figures.flink_finding([run, run], lambda _: next(answers))
    assert said == (
        "Flink, in 2 of 2 runs with an exception history: the job's first exception after the "
        "fault came 12.6 to 15.3 s after it, 'TaskManager with id <id> is no longer reachable.'; "
        "then 2 to 16 failures for want of a slot (NoResourceAvailableException) before the "
        "engine was whole again (engine/flink-exceptions.json)."
    )
    assert three_engine_figures.flink_exceptions(tmp_path, fault_run("gone", 1.0)) is None


def test_spark_latency_is_set_against_its_batches_and_the_rest_is_unexplained():
    runs = {
        "flink": [fault_run("f", 40.0, before_p50=90)],
        "spark": [
            fault_run("s1", 10.0, engine="spark", before_p50=1_300),  # batch 1.2 s: within
            fault_run("s2", 10.0, engine="spark", before_p50=2_100),  # batch 1.9 s: within
            fault_run("s3", 10.0, engine="spark", before_p50=3_100),  # batch 2.0 s: above 3.0
        ],
    }
    table = [(engine, "kill", "knob", 1, chosen) for engine, chosen in runs.items()]
    batch = {"s1": 1.2, "s2": 1.9, "s3": 2.0}
    notes = three_engine_figures.latency_finding(
        table, lambda run: {"median_before_s": batch[run.run_id]}
    )
    assert notes[0] == (
        "Steady p50 before the fault: Flink 90 ms, Spark 2,167 ms, at the same input rate. Where "
        "Flink's time goes the runs did not sample: it is unexplained by them."
    )
    assert notes[1].endswith(
        "in 2 of 3 runs it does (p50 1.3 to 3.1 s, median batch 1.2 to 2.0 s); the other runs' "
        "p50 is unexplained by their batches."
    )
    assert three_engine_figures.latency_finding(table[:1], None) == []
