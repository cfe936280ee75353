"""Intervals over repetitions (analysis/intervals.py) and compare's Intervals and Comparisons
sections, on hand-built values and run directories whose answers are worked out here."""

from __future__ import annotations

import csv
import json
import math

import pytest
from test_compare_verdicts import fault, summary

from analysis import compare, intervals


def test_t_quantiles_come_from_the_table_then_the_expansion():
    assert intervals.t_critical(1) == 12.706
    assert intervals.t_critical(2) == 4.303
    # Published t(0.975) values past the table: df 40 -> 2.0211, df 120 -> 1.9799.
    assert intervals.t_critical(40) == pytest.approx(2.0211, abs=0.001)
    assert intervals.t_critical(120) == pytest.approx(1.9799, abs=0.001)
    with pytest.raises(ValueError, match="at least 1"):
        intervals.t_critical(0)


def test_a_mean_interval_is_the_t_interval_clipped_at_zero():
    # 100, 110, 120: mean 110, sd 10, half-width 4.303 * 10 / sqrt(3) = 24.843.
    wide = intervals.mean_interval([100.0, 110.0, 120.0])
    assert wide is not None and wide.estimate == 110.0
    assert wide.low == pytest.approx(110 - 43.03 / math.sqrt(3))
    assert wide.high == pytest.approx(110 + 43.03 / math.sqrt(3))
    assert wide.text() == "110.0 [85.2, 134.8]"
    # 1, 2, 3: half-width 4.303 / sqrt(3) = 2.484 reaches below 0, which a count cannot.
    small = intervals.mean_interval([1.0, 2.0, 3.0])
    assert small is not None and small.low == 0.0 and small.high == pytest.approx(4.4843, 1e-4)
    # A group of one run has a mean and no interval; none without values.
    one = intervals.mean_interval([5.0])
    assert one is not None and not one.has_interval and one.text() == "5.0 (n=1, no interval)"
    assert intervals.mean_interval([]) is None


def test_kaplan_meier_median_with_censored_recoveries():
    km = intervals.kaplan_meier_median
    # Share unrecovered: 2/3 after 87 s, 1/3 after 92 s: the median is 92.
    assert km([(87.0, False), (92.0, False), (135.0, True)]) == (92.0, False)
    # Censored at 50 (2 at risk after it), then 60 halves the share: 60.
    assert km([(60.0, False), (50.0, True), (70.0, False)]) == (60.0, False)
    # Only one of three recovered: the share never falls to one half, so the median is at
    # least the longest time followed, 135.
    assert km([(87.0, False), (100.0, True), (135.0, True)]) == (135.0, True)
    # An event and a censoring both at 60: the event first (2/3), the censored run leaves, and
    # 80 takes the share to 0.
    assert km([(60.0, True), (60.0, False), (80.0, False)]) == (80.0, False)
    assert km([]) is None


def test_a_censored_recovery_gets_the_median_not_an_interval():
    censored = intervals.recovery_interval([(87.0, False), (92.0, False), (135.0, True)])
    assert censored is not None and not censored.has_interval
    assert censored.text() == "median 92.0 (Kaplan-Meier, 1 of 3 censored, no interval)"
    bound = intervals.recovery_interval([(87.0, False), (100.0, True), (135.0, True)])
    assert bound is not None
    assert bound.text() == "median >= 135.0 (Kaplan-Meier, 2 of 3 censored, no interval)"
    observed = intervals.recovery_interval([(100.0, False), (110.0, False), (120.0, False)])
    assert observed is not None and observed.text() == "110.0 [85.2, 134.8]"


def test_separation_and_the_repetitions_that_would_separate():
    first = intervals.mean_interval([100.0, 110.0, 120.0])  # [85.2, 134.8]
    second = intervals.mean_interval([130.0, 140.0, 150.0])  # [115.2, 164.8]
    far = intervals.mean_interval([200.0, 210.0, 220.0])  # [185.2, 234.8]
    assert intervals.separation(first, far) == "separate"
    assert intervals.separation(first, second) == "overlap"
    assert intervals.separation(first, intervals.mean_interval([5.0])).startswith("not judged")
    censored = intervals.recovery_interval([(1.0, False), (2.0, True)])
    assert intervals.separation(first, censored).startswith("not judged: a censored")
    # Means 30 apart, pooled sd 10: 2 * t(n-1) * 10 / sqrt(n) < 30 first at n = 5
    # (n=4: 2 * 3.182 * 10 / 2 = 31.8; n=5: 2 * 2.776 * 10 / sqrt(5) = 24.8).
    assert intervals.repetitions_to_separate([100, 110, 120], [130, 140, 150]) == 5
    assert intervals.repetitions_to_separate([1, 2], [1, 2]) is None
    assert intervals.repetitions_to_separate([1], [1, 2]) is None


def test_compare_writes_each_groups_intervals_and_judges_each_pair(tmp_path):
    # Group flink checkpoint_interval_s=5: replayed 1, 2, 3 s per fault; recoveries 100, 110,
    # 120 s. Group =30: replayed 10, 11, 12 s; recoveries 87, 92 and a censored >= 135.
    runs = [summary(tmp_path, f"five-{i}", [fault(100.0 + 10 * i, 1.0 + i)]) for i in range(3)] + [
        summary(tmp_path, "thirty-0", [fault(87.0, 10.0)]),
        summary(tmp_path, "thirty-1", [fault(92.0, 11.0)]),
        summary(tmp_path, "thirty-2", [fault(None, 12.0, bound=135.0)]),
    ]
    for directory in runs[3:]:
        text = (directory / "summary.json").read_text()
        (directory / "summary.json").write_text(
            text.replace('"checkpoint_interval_s": 5', '"checkpoint_interval_s": 30')
        )
    out = tmp_path / "cmp"
    groups = {
        group.parameters["checkpoint_interval_s"]: group for group in compare.compare(runs, out)
    }
    five, thirty = groups[5], groups[30]
    table = (out / "comparison.md").read_text()
    assert "## Intervals over repetitions" in table
    # Replayed 2 [0.0, 4.5] (half-width 2.484, clipped at 0) and 11 [8.5, 13.5]: separate.
    assert f"| {five.label} | 3 | 110.0 [85.2, 134.8] | " in table
    assert "| 2.0 [0.0, 4.5] |" in table and "| 11.0 [8.5, 13.5] |" in table
    # A share carries its unit after each number: every run's duplicate rate is 1 %.
    assert "| 1.000 % [1.000 %, 1.000 %] |" in table
    assert f"| {thirty.label} | 3 | median 92.0 (Kaplan-Meier, 1 of 3 censored, no interval) |" in (
        table
    )
    assert "## Comparisons" in table
    row = next(
        line for line in table.splitlines() if line.startswith(f"| {five.label} | {thirty.label}")
    )
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    labels = [compare._metric(key).label for key in compare.COMPARED_METRICS]
    judged = dict(zip(labels, cells[2:-1], strict=True))
    assert judged["replayed s/fault"] == "separate"
    # Every run's loss is 0: the same mean, no difference and no projection.
    assert judged["loss"] == "overlap: no difference shown"
    assert cells[-1] == "not judged: a censored recovery has no interval"
    rows = list(csv.DictReader((out / "comparison.csv").open()))
    low = next(r for r in rows if r["group"] == five.label and r["kind"] == "ci_low")
    high = next(r for r in rows if r["group"] == five.label and r["kind"] == "ci_high")
    assert float(low["replayed_s"]) == 0.0
    assert float(high["replayed_s"]) == pytest.approx(2 + 4.303 / math.sqrt(3))
    assert float(low["recovery_bound_s"]) == pytest.approx(110 - 43.03 / math.sqrt(3))
    censored_low = next(r for r in rows if r["group"] == thirty.label and r["kind"] == "ci_low")
    assert censored_low["recovery_bound_s"] == ""


def test_what_the_study_shows_follows_from_the_intervals(tmp_path):
    # As above: replayed 2 [0.0, 4.5] at 5 s against 11 [8.5, 13.5] at 30 s separate; every
    # other compared figure but recovery overlaps; the 30 s recovery is censored. One run at
    # 30 s lost 7 acknowledged messages.
    runs = [summary(tmp_path, f"five-{i}", [fault(100.0 + 10 * i, 1.0 + i)]) for i in range(3)] + [
        summary(tmp_path, "thirty-0", [fault(87.0, 10.0)]),
        summary(tmp_path, "thirty-1", [fault(92.0, 11.0)], lost=7),
        summary(tmp_path, "thirty-2", [fault(None, 12.0, bound=135.0)]),
    ]
    for directory in runs[3:]:
        text = (directory / "summary.json").read_text()
        (directory / "summary.json").write_text(
            text.replace('"checkpoint_interval_s": 5', '"checkpoint_interval_s": 30')
        )
    groups = compare.group_runs(compare.load_runs(runs))
    five, thirty = sorted(groups, key=lambda g: g.parameters["checkpoint_interval_s"])
    shown = compare.findings(groups).splitlines()
    assert shown[0] == "## What this study shows"
    assert shown[2] == (
        f"- Verdicts: {thirty.label}: 1 of 3 runs violated their guarantee: VIOLATED (7 lost)."
    )
    assert shown[3] == (
        f"- **{five.label} against {thirty.label}.** {five.label} had a lower replayed s/fault "
        f"than {thirty.label}: 2.0 [0.0, 4.5] (n=3) against 11.0 [8.5, 13.5] (n=3). No "
        "difference shown in loss, duplicate rate, before p50 ms, before p99 ms (the intervals "
        "overlap). Not "
        "judged: recovery s (a censored recovery has no interval)."
    )
    # Without a violation, loss is said once for every run.
    lossless = compare.group_runs(compare.load_runs(runs[:3]))
    assert compare.findings(lossless).splitlines()[2:4] == [
        "- Verdicts: 3 of 3 runs with a verdict held their guarantee.",
        "- Loss: no run with a verdict lost an acknowledged message.",
    ]
    # At most once, loss held the guarantee: it is counted, never said to be absent.
    first = runs[0] / "summary.json"
    data = json.loads(first.read_text())
    data["verdict"] |= {"guarantee": "at_most_once", "holds": True, "lost": 7}
    first.write_text(json.dumps(data))
    allowed = compare.group_runs(compare.load_runs(runs[:3]))
    (group,) = allowed
    assert compare.findings(allowed).splitlines()[2:4] == [
        "- Verdicts: 3 of 3 runs with a verdict held their guarantee.",
        f"- Loss: {group.label}: 1 of 3 runs lost acknowledged messages, as their guarantee "
        "allows (7).",
    ]


def test_a_phase_some_run_did_not_observe_gets_no_interval(tmp_path):
    # Whole again 50 and 60 s after the fault in two runs; the third never said so: a mean over
    # the two would lean towards the runs that showed it.
    runs = []
    for name, whole in (("a", 50.0), ("b", 60.0), ("c", None)):
        entry = fault(100.0, 1.0) | {"engine_whole_s": whole, "detected_s": 10.0}
        runs.append(summary(tmp_path, name, [entry]))
    (group,) = compare.group_runs(compare.load_runs(runs))
    whole = group.interval(compare._metric("engine_whole_s"))
    assert whole is not None and whole.text() == "no interval: 1 of 3 runs did not observe it"
    detected = group.interval(compare._metric("detected_s"))
    assert detected is not None and detected.text() == "10.0 [10.0, 10.0]"
    assert intervals.separation(whole, detected) == "not judged: a run did not observe it"
    # Nor does the CSV give one, and metrics outside the headline figures get none either.
    out = tmp_path / "cmp"
    compare.compare(runs, out)
    low = next(r for r in csv.DictReader((out / "comparison.csv").open()) if r["kind"] == "ci_low")
    assert low["engine_whole_s"] == "" and low["detected_s"] == "10.0"
    assert low["recovery_s"] == "" and low["latency_p50_ms"] == ""
