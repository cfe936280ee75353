"""The study's closing table on the terminal: each group's mean from comparison.csv."""

from __future__ import annotations

from analysis.study.report import comparison_rows, comparison_table

HEADER = (
    "group,fault,kind,run_id,n,loss_rate,duplicate_rate,latency_p50_ms,latency_p99_ms,recovery_s\n"
)


def test_one_line_per_group_mean_in_aligned_columns(tmp_path):
    """A comparison.csv written before verdicts, replayed seconds and censored bounds: their
    columns show '–', the recovery as it did."""
    csv = tmp_path / "comparison.csv"
    csv.write_text(
        HEADER
        + "flink checkpoint_interval_s=2,kill,run,r1,1,0.0,0.0126,7189.0,16771.0,\n"
        + "flink checkpoint_interval_s=2,kill,mean,,1,0.0,0.0126,7189.0,16771.0,\n"
        + "storm storm_message_timeout_s=10,kill,run,r2,1,0.001,0.1826,3446.0,12179.0,12.34\n"
        + "storm storm_message_timeout_s=10,kill,run,r3,1,0.0,0.1,3446.0,12179.0,13.0\n"
        + "storm storm_message_timeout_s=10,kill,mean,,2,0.0005,0.1413,3446.0,12179.0,12.67\n"
        # Its only run overloaded: no run counted, no mean (not "no recovery").
        + "storm storm_message_timeout_s=20,kill,run,r4,1,0.0,0.15,10950.0,19000.0,\n"
        + "storm storm_message_timeout_s=20,kill,mean,,0,,,,,\n"
        # No fault: no recovery to show.
        + "flink none,none,run,r5,1,0.0,0.0,12.0,40.0,\n"
        + "flink none,none,mean,,1,0.0,0.0,12.0,40.0,\n"
    )
    lines = comparison_table(csv).splitlines()
    head = "group                             n  verdict  loss %  replayed s  dup %  p50 ms  p99 ms"
    assert lines == [
        head + "  recovery s",
        "-" * 99,
        "flink checkpoint_interval_s=2     1        –    0.00           –   1.26    7189   16771"
        "  not in run",
        "storm storm_message_timeout_s=10  2        –    0.05           –  14.13    3446   12179"
        "        12.7",
        "storm storm_message_timeout_s=20  0        –       –           –      –       –       –"
        "           –",
        "flink none                        1        –    0.00           –   0.00      12      40"
        "           –",
    ]


NEW_HEADER = (
    "group,fault,kind,run_id,n,verdict,loss_rate,replayed_s,duplicate_rate,latency_p50_ms,"
    "latency_p99_ms,recovery_s,recovery_bound_s,recovery_censored\n"
)


def test_the_table_shows_verdicts_replayed_seconds_and_censored_recoveries(tmp_path):
    """A group with a censored run shows its mean over observed values and bounds as a lower
    bound, with how many were censored (recovery_s, observed runs only, is empty)."""
    csv = tmp_path / "comparison.csv"
    csv.write_text(
        NEW_HEADER
        + "flink checkpoint_interval_s=2,kill,mean,,3,2 of 3 held,0.001,1.234,0.0126,7189.0,"
        "16771.0,,41.03,1.0\n"
        + "storm storm_message_timeout_s=10,kill,mean,,2,2 of 2 held,0.0,12.5,0.1413,3446.0,"
        "12179.0,12.67,12.67,0.0\n" + "flink none,none,mean,,1,1 of 1 held,0.0,,0.0,12.0,40.0,,,\n"
    )
    rows = comparison_rows(csv)
    assert rows == [
        (
            "flink checkpoint_interval_s=2",
            "3",
            "2 of 3 held",
            "0.10",
            "1.23",
            "1.26",
            "7189",
            "16771",
            ">= 41.0 (1 censored)",
        ),
        (
            "storm storm_message_timeout_s=10",
            "2",
            "2 of 2 held",
            "0.00",
            "12.50",
            "14.13",
            "3446",
            "12179",
            "12.7",
        ),
        ("flink none", "1", "1 of 1 held", "0.00", "–", "0.00", "12", "40", "–"),
    ]
