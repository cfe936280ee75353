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
from test_fault_figures import fault_run  # noqa: E402


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
    # Without the engines' restart counts no sentence compares the two.
    assert not [n for n in notes if "recovered first" in n]


def test_a_censored_recovery_is_a_lower_bound_and_storm_has_no_reference():
    notes = three_engine_figures.findings(table_of(storm=(30.0, True)))
    assert notes == [
        "Storm: recovery at least 30.0 s, the failure detected 30.0 s after the fault, the "
        "engine whole again at 30.0 s, 0.5 s of input replayed per fault."
    ]


@pytest.mark.parametrize(
    ("flink_restarts", "spark_restarts", "said"),
    [
        ((1, 1, 1), (0, 0, 0), "A restart of the whole job is in every Flink recovery"),
        ((1, 0, 1), (0, 0, 0), "it is unexplained"),
        ((1, 1, 1), (0, 1, 0), "it is unexplained"),
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
    assert (
        f"Flink's job restarted in {sum(map(bool, flink_restarts))} of 3 runs and Spark's query "
        f"restarted in {sum(map(bool, spark_restarts))} of 3 runs"
    ) in compared
    assert said in compared


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
    (out / "engine" / "timeline.jsonl").write_text('{"t_ms": 3000, "executors": {}}\n')
    assert three_engine_figures.restarts_after_fault(tmp_path, run) is None


def test_a_configuration_is_an_engine_with_its_manifest_settings():
    config = engine_figures.Config.parse("spark:spark_trigger=continuous,spark_executors=1")
    assert config.engine == "spark"
    assert config.settings == {"spark_trigger": "continuous", "spark_executors": "1"}
    assert config.label == "spark (spark_trigger=continuous, spark_executors=1)"
    assert engine_figures.Config.parse("flink").label == "flink"
    with pytest.raises(argparse.ArgumentTypeError, match="ENGINE:KEY=VALUE"):
        engine_figures.Config.parse("spark:continuous")


def test_the_rate_search_doubles_until_a_run_fails_then_bisects(monkeypatch, capsys):
    capacity = 5_000.0  # a run passes at or below it

    def run_once(config, count, rate, warmup_s, results):
        return engine_figures.RunFigures(
            config, f"r{rate:.0f}", rate, 50, 200 if rate <= capacity else 5_000, 1.0, rate,
            rate > capacity, "complete", 60.0,
        )  # fmt: skip

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
    assert [r.rate for r in runs] == [2_000, 4_000, 8_000, 6_000, 5_000, 5_500]
    assert (good, bad) == (5_000, 5_500)
    assert "flink sustainable rate on the test hosts: 5,000/s" in capsys.readouterr().out
