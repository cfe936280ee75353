"""The study's closing table on the terminal: each group's mean from comparison.csv."""

from __future__ import annotations

from analysis.study.report import comparison_table

HEADER = (
    "group,fault,kind,run_id,n,loss_rate,duplicate_rate,latency_p50_ms,latency_p99_ms,recovery_s\n"
)


def test_one_line_per_group_mean_in_aligned_columns(tmp_path):
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
    assert lines == [
        "group                             n  loss %  dup %  p50 ms  p99 ms  recovery s",
        "-" * 78,
        "flink checkpoint_interval_s=2     1    0.00   1.26    7189   16771  not in run",
        "storm storm_message_timeout_s=10  2    0.05  14.13    3446   12179        12.7",
        "storm storm_message_timeout_s=20  0       –      –       –       –           –",
        "flink none                        1    0.00   0.00      12      40           –",
    ]
