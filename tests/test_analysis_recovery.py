"""The per-fault recovery timeline, per-fault duplicates, the steady state, latency by phase and
the verdict (docs/metrics.md), on hand-made run directories whose answers are worked out here."""

from __future__ import annotations

import json

import pytest
from analysis_runs import BASE_MS, RunDir

from analysis import recovery, report, steady, summarize, verdict
from analysis.engines import flink as flink_engine
from analysis.recovery import BacklogSample

B = BASE_MS
F = B + 30_000  # the first fault
F2 = B + 45_000  # the second fault


def partitioned_run(tmp_path, **options) -> RunDir:
    """100 msg/s for 60 s into two input partitions: odd ids (intended at multiples of 20 ms
    after B) to partition 1 with latency 30 ms, even ids to partition 0 with latency 10 ms.

    The fault at F (30 s) stalls partition 1 only: its messages that would arrive at or after
    F, up to those due at F + 8 s, all arrive at F + 8 s; partition 0 flows on. A second fault
    at F2 (45 s) changes nothing. Duplicates: id 5 again at 1 s (before any fault), the 100
    messages due in the second before F again at F + 9 s, and 50 more at F2 + 2 s.
    """
    run = RunDir(tmp_path, parameters={"rate": 100, "warmup_s": 0}, **options)
    run.fault(F, F + 3_000)
    run.fault(F2, F2 + 1_000)
    run.collection_end_ms = B + 70_000
    for i in range(1, 6001):
        intended = B + 10 * (i - 1)
        partition = i % 2
        run.produce(i, intended, partition=partition)
        recv = intended + (30 if partition else 10)
        if partition and recv >= F and intended < F + 8_000:
            recv = F + 8_000
        run.receive(i, recv)
    run.receive(5, B + 1_000)
    for j, i in enumerate(range(2901, 3001)):  # due in [F - 1 s, F)
        run.receive(i, F + 9_000 + j)
    for j, i in enumerate(range(1, 51)):
        run.receive(i, F2 + 2_000 + j)
    return run


def run_summary(spark, run: RunDir) -> dict:
    return summarize.summarize(spark, run.write(), draw=False)


def test_one_partition_stalls_while_the_other_flows(spark, tmp_path):
    run = partitioned_run(tmp_path)
    # The backlog: 20 before the fault (25 once, the level), up at F + 1 s, a dip to 10 at
    # F + 2 s (before the first output: not caught up), then 500 until F + 8 s, 300, 26, 25.
    lag = [{"t_ms": B + t, "backlog": 20} for t in range(1_000, 30_000, 1_000)]
    lag[24]["backlog"] = 25  # at F - 5 s
    after = [(1, 100), (2, 10), *((k, 500) for k in range(3, 9)), (9, 300), (10, 26), (11, 25)]
    lag += [{"t_ms": F + 1_000 * k, "backlog": backlog} for k, backlog in after]
    lag.append({"t_ms": F + 11_500, "error": "timeout"})
    run.engine_files["lag.jsonl"] = lag
    run.engine_files["timeline.jsonl"] = [
        {"t_ms": F - 1_000, "healthy": True},
        {"t_ms": F + 1_000, "healthy": True},
        {"t_ms": F + 2_000, "healthy": False},
        {"t_ms": F + 3_000, "healthy": False},
        {"t_ms": F + 6_500, "healthy": True},
    ]
    s = run_summary(spark, run)
    first, second = s["faults"]

    # The whole output never stops: partition 0 delivers every 20 ms.
    assert first["stall_s"] == 0.02
    # Partition 1: its messages due from F to F + 8 s wait for the one delivery at F + 8 s,
    # the one due at F longest (8 s). Partition 0: every message waits its 10 ms latency; the
    # first such wait is that of the message due at F + 10 ms.
    assert first["partition_stalls"] == [
        {"partition": 0, "stall_s": 0.01, "from_ms": F + 10, "to_ms": F + 20},
        {"partition": 1, "stall_s": 8.0, "from_ms": F, "to_ms": F + 8_000},
    ]
    assert first["partition_stall_s"] == 8.0
    assert first["first_output_s"] == 8.0

    # Baseline: due in [F - 30 s, F) and received before F: 1499 at 10 ms, 1499 at 30 ms (the
    # partition 0 message due at F - 10 arrives at F, the partition 1 one due at F - 20 later).
    assert (first["baseline_messages"], first["baseline_p50_ms"]) == (2998, 10)
    assert (first["baseline_p99_ms"], first["threshold_ms"]) == (30, 1000)
    # Recovery: the last late message is partition 1's due at F + 6980 (1020 ms); the next,
    # partition 0's due at F + 6990, arrives at F + 7000 and opens 5 s of on-time delivery.
    assert first["recovery_msg_id"] == 3700 and first["recovery_intended_ms"] == F + 6_990
    assert first["recovery_s"] == 7.0
    assert (first["recovery_censored"], first["recovery_at_least_s"]) == (False, None)
    # Failure cost: the largest latency due in [F, F + 6990] (the message due at F, 8000 ms)
    # minus the baseline p50 (10 ms).
    assert (first["failure_cost_max_latency_ms"], first["failure_cost_ms"]) == (8_000, 7_990)
    # The engine's word: unwell from F + 2 s, whole again at F + 6.5 s.
    assert (first["detected_s"], first["engine_whole_s"]) == (2.0, 6.5)
    # Caught up: the first sample at or after the first output (F + 8 s), after the rise at
    # F + 1 s, whose backlog is back at or below 25: F + 11 s (26 at F + 10 s is still above).
    assert first["backlog_before"] == 25
    assert (first["caught_up_s"], first["caught_up_at_ms"], first["caught_up_censored"]) == (
        11.0,
        F + 11_000,
        False,
    )

    # Duplicates by receive time: id 5 before any fault; 100 after the first fault, 50 after
    # the second; at 100 msg/s (parameters.rate) 1 s and 0.5 s of input replayed.
    assert s["duplicate_records"] == 151 and s["duplicates_before_faults"] == 1
    assert (first["duplicate_records"], first["replayed_s"]) == (100, 1.0)
    assert (second["duplicate_records"], second["replayed_s"]) == (50, 0.5)
    assert (s["input_rate_per_s"], s["input_rate_source"]) == (100.0, "parameters.rate")

    # The second fault: everything on time, the message due at F2 (30 ms) is M. Its baseline
    # (due in [F2 - 30 s, F2)): 1500 at 10 ms and 1500 of partition 1 at 30 ms or more: p50 10.
    assert second["recovery_s"] == 0.03 and second["recovery_intended_ms"] == F2
    assert (second["baseline_p50_ms"], second["failure_cost_ms"]) == (10, 20)
    assert second["caught_up_censored"] is False and second["caught_up_s"] is None

    # Steady from the first window (every 5 s window's p50 is 10 ms, the backlog flat).
    steady_state = s["steady_state"]
    assert steady_state["reached"] is True
    assert steady_state["detected_from_ms"] == B and steady_state["from_ms"] == B
    assert steady_state["warmup_from_ms"] == B and steady_state["windows"] == 6
    phases = s["latency_phases"]
    # Before the first fault: due in [B, F) and received before F, the baseline's messages.
    assert phases["before_fault"] == {
        "count": 2998,
        "p50": 10,
        "p90": 30,
        "p99": 30,
        "p99.9": 30,
        "max": 30,
        "mean": 20.0,
        "from_ms": B,
        "to_ms": F,
    }
    # After the last recovery: due from F2 + 5 s to the end (B + 59 990): 500 + 500 messages.
    assert phases["after_recovery"] == {
        "count": 1000,
        "p50": 10,
        "p90": 30,
        "p99": 30,
        "p99.9": 30,
        "max": 30,
        "mean": 20.0,
        "from_ms": F2 + 5_000,
        "to_ms": B + 59_990,
    }
    assert phases["after_recovery_reason"] is None
    # The whole run's latency keeps its meaning: every message from the first on.
    assert s["latency_ms"]["count"] == 6000 and s["latency_ms"]["max"] == 8_020
    assert s["verdict"] == {
        "guarantee": "at_least_once",
        "holds": True,
        "lost": 0,
        "duplicate_records": 151,
        "reason": "at-least-once held: 0 of 6,000 acknowledged messages lost",
    }
    report = (run.path / "report.md").read_text()
    assert "at-least-once held" in report


def test_a_censored_recovery_and_a_run_without_partitions(spark, tmp_path):
    """100 msg/s for 20 s, 20 ms latency; after the fault at 10 s every message is 2 s late:
    no recovery shows. No partition in produced.jsonl, no lag samples, a Storm run."""
    run = RunDir(tmp_path, engine="storm")
    fault = B + 10_000
    run.fault(fault, fault + 1_000)
    run.collection_end_ms = B + 25_000
    for i in range(1, 2001):
        intended = B + 10 * (i - 1)
        run.produce(i, intended)
        run.receive(i, intended + (2_000 if intended >= fault else 20))
    s = run_summary(spark, run)
    (entry,) = s["faults"]
    assert entry["recovery_s"] is None and entry["recovery_censored"] is True
    # From the fault to the last message's due time, B + 19 990.
    assert entry["recovery_at_least_s"] == 9.99
    # The largest latency due from the fault to the end of producing, 2000 ms, minus the
    # baseline p50 of 20 ms.
    assert entry["failure_cost_ms"] == 1_980
    assert entry["partition_stalls"] is None and entry["partition_stall_s"] is None
    assert entry["first_output_s"] is None
    assert entry["caught_up_s"] is None and entry["caught_up_censored"] is None
    assert entry["detected_s"] is None and entry["engine_whole_s"] is None
    assert (entry["checkpoint_age_s"], entry["checkpoint_age_note"]) == (None, None)
    # No duplicates; the input rate from the produced messages: 2000 over 19.99 s.
    assert entry["duplicate_records"] == 0 and entry["replayed_s"] == 0.0
    assert s["input_rate_per_s"] == pytest.approx(2000 / 19.99)
    assert s["input_rate_source"] == "produced / producing span"
    assert s["latency_phases"]["after_recovery"] is None
    assert "censored" in s["latency_phases"]["after_recovery_reason"]
    # Due before the fault and received before it: all but those due at F - 20 and F - 10 ms.
    assert s["latency_phases"]["before_fault"]["count"] == 998
    assert ">= 9.990 s" in (run.path / "report.md").read_text()


def test_a_flink_fault_gets_the_age_of_the_last_checkpoint(spark, tmp_path):
    """The JobManager's clock runs 500 ms ahead: checkpoint 5 completed at F - 4 s on the
    driver's clock, 6 after the fault."""
    hosts = [{"name": "node1", "roles": ["flink_jobmanager"], "clock_offset_ms": 500}]
    run = RunDir(tmp_path, hosts=hosts)
    run.fault(F, F + 1_000)
    for i in range(1, 4001):
        intended = B + 10 * (i - 1)
        run.produce(i, intended).receive(i, intended + 20)
    run.engine_files["flink-checkpoints.json"] = {
        "counts": {"total": 7, "completed": 6, "failed": 1},
        "history": [
            {"id": 7, "status": "FAILED", "trigger_timestamp": F + 5_500},
            {"id": 6, "status": "COMPLETED", "latest_ack_timestamp": F + 1_500},
            {"id": 5, "status": "COMPLETED", "latest_ack_timestamp": F - 3_500},
        ],
        "latest": {"completed": {"id": 6, "latest_ack_timestamp": F + 1_500}},
    }
    (entry,) = run_summary(spark, run)["faults"]
    assert (entry["checkpoint_age_s"], entry["checkpoint_age_note"]) == (4.0, None)


def test_checkpoint_age_from_a_short_history(tmp_path):
    run = {"hosts": [{"name": "jm", "roles": ["flink_jobmanager"], "clock_offset_ms": -200}]}
    engine = tmp_path / "engine"
    engine.mkdir()

    def age(document):
        (engine / "flink-checkpoints.json").write_text(json.dumps(document))
        return flink_engine.checkpoint_age(tmp_path, run, F)

    # Only the latest completed checkpoint, before the fault: nothing completed after it, so
    # it is the last before the fault (ack at F - 7.2 s on the JobManager = F - 7 s here).
    assert age({"latest": {"completed": {"latest_ack_timestamp": F - 7_200}}}) == (7.0, None)
    # No acknowledgement time: trigger + end-to-end duration.
    only_trigger = {"trigger_timestamp": F - 9_200, "end_to_end_duration": 1_000}
    assert age({"history": [{"id": 3, "status": "COMPLETED", **only_trigger}]}) == (8.0, None)
    # The latest completed after the fault and the history cut: unknown.
    cut = {
        "counts": {"total": 40},
        "history": [{"id": 40, "status": "COMPLETED", "latest_ack_timestamp": F + 5_000}],
        "latest": {"completed": {"id": 40, "latest_ack_timestamp": F + 5_000}},
    }
    value, note = age(cut)
    assert value is None and "pushed out" in note
    # The whole history kept, none completed before the fault.
    whole = {**cut, "counts": {"total": 1}}
    assert age(whole) == (None, "no checkpoint had completed before the fault")
    assert flink_engine.checkpoint_age(tmp_path / "nowhere", run, F) == (
        None,
        "no engine/flink-checkpoints.json",
    )
    # At most once the job takes no checkpoints: no age, and the note says why.
    at_most_once = {**run, "settings": {"checkpointing_mode": "none"}}
    assert flink_engine.checkpoint_age(tmp_path, at_most_once, F) == (
        None,
        "no checkpoints: the job ran at most once",
    )


def test_caught_up_is_censored_when_the_backlog_never_comes_back():
    samples = [BacklogSample(F - 2_000, 40), BacklogSample(F - 1_000, 50)]
    samples += [BacklogSample(F + 1_000 * k, 60 + k) for k in range(1, 5)]
    figures = recovery.caught_up(samples, F, None)
    assert figures == {
        "backlog_before": 50,
        "caught_up_s": None,
        "caught_up_at_ms": None,
        "caught_up_censored": True,
    }
    # Samples more than 30 s before the fault do not set the level.
    early = [BacklogSample(F - 31_000, 500), BacklogSample(F + 1_000, 400)]
    assert recovery.caught_up(early, F, None)["backlog_before"] is None
    # From the fault when the first output is unknown: back at F + 3 s.
    back = [BacklogSample(F - 1_000, 5), BacklogSample(F + 1_000, 90), BacklogSample(F + 3_000, 5)]
    assert recovery.caught_up(back, F, None)["caught_up_s"] == 3.0


def test_lost_messages_do_not_keep_the_backlog_up():
    # 30 messages sent during the outage never arrive: the result end stays 30 behind for good.
    samples = [BacklogSample(F - 1_000, 10), BacklogSample(F + 2_000, 90)]
    samples += [BacklogSample(F + 5_000, 40), BacklogSample(F + 9_000, 40)]
    assert recovery.caught_up(samples, F, None)["caught_up_censored"] is True
    lost = [F + 100 * k for k in range(30)]
    adjusted = recovery.without_lost(samples, lost)
    assert [s.backlog for s in adjusted] == [10, 69, 10, 10]  # 21 of them sent by F + 2 s
    assert recovery.caught_up(adjusted, F, None)["caught_up_s"] == 5.0


def window(second: int, p50: int) -> steady.Window:
    return steady.Window(B + 1_000 * second, p50, 500)


def test_the_steady_state_starts_where_latency_stops_falling():
    # p50 by 5 s window: 510, 210, then 10 ms (the window at 15 s at 9: above 0.8 x 10).
    windows = [window(0, 510), window(5, 210), window(10, 10), window(15, 9), window(20, 10)]
    found = steady.detect(windows, [], B + 25_000, B + 2_000, 100.0)
    assert found["detected_from_ms"] == B + 10_000 and found["from_ms"] == B + 10_000
    assert found["reached"] is True and found["warmup_from_ms"] == B + 2_000
    assert "too few lag samples" in found["method"]
    # A warm-up longer than the transient is used: the run shows it was enough.
    found = steady.detect(windows, [], B + 25_000, B + 12_000, 100.0)
    assert (found["detected_from_ms"], found["from_ms"]) == (B + 10_000, B + 12_000)
    # 7 in a later window is below 0.8 x 10 (and 0.8 x 9): the steady state starts there.
    dipping = [*windows[:4], window(20, 7), window(25, 7)]
    assert steady.detect(dipping, [], B + 30_000, B, None)["detected_from_ms"] == B + 20_000
    # Latency falls to the end: no window qualifies (the last has no later window).
    falling = [window(0, 1000), window(5, 700), window(10, 450), window(15, 300)]
    found = steady.detect(falling, [], B + 20_000, B + 1_000, None)
    assert found["reached"] is False and found["detected_from_ms"] is None
    assert found["from_ms"] == B + 1_000


def test_the_steady_state_waits_for_the_backlog_to_stop_falling():
    """Flat latency, but the backlog falls 200 msg/s until 10 s (2000 at 0 s), then stays 0.
    Fitted from 0 s and from 5 s its slope's 95 % interval lies below -10 msg/s (1 % of
    100 msg/s is less than the 10 msg/s floor); from 10 s it is exactly 0."""
    windows = [window(k, 10) for k in range(0, 30, 5)]
    samples = [BacklogSample(B + 1_000 * t, 200 * max(0, 10 - t)) for t in range(30)]
    end = B + 30_000
    assert steady.backlog_falling(samples, B, end, 100.0) is True
    assert steady.backlog_falling(samples, B + 5_000, end, 100.0) is True
    assert steady.backlog_falling(samples, B + 10_000, end, 100.0) is False
    assert steady.backlog_falling(samples[:4], B, end, 100.0) is None  # too few
    found = steady.detect(windows, samples, end, B, 100.0)
    assert found["detected_from_ms"] == B + 10_000 and found["reached"] is True
    assert "backlog's slope" in found["method"]


def test_a_run_that_never_settles_and_loses_messages(spark, tmp_path):
    """No fault, 100 msg/s for 20 s; latency falls by half every 5 s (800, 400, 200, 100 ms):
    no steady state. Three messages are lost, under an exactly-once guarantee."""
    run = RunDir(tmp_path, parameters={"guarantee": "exactly_once", "warmup_s": 1})
    for i in range(1, 2001):
        intended = B + 10 * (i - 1)
        run.produce(i, intended, partition=i % 4)
        if i in (7, 700, 1400):
            continue
        run.receive(i, intended + 800 // 2 ** ((i - 1) // 500))
    s = run_summary(spark, run)
    assert s["steady_state"]["reached"] is False
    assert s["steady_state"]["from_ms"] == B + 1_000 and s["steady_state"]["windows"] == 4
    # Without a fault, before_fault covers the steady start to the end of producing.
    before = s["latency_phases"]["before_fault"]
    assert (before["count"], before["from_ms"], before["to_ms"]) == (1898, B + 1_000, B + 19_990)
    assert s["latency_phases"]["after_recovery_reason"] == "no fault"
    assert s["lost"] == 3
    # 7 on partition 3, 700 and 1400 on partition 0; without a fault, from the first message.
    assert s["lost_where"] == {
        "by_partition": {"0": 2, "3": 1},
        "first_sent_ms": B + 60,
        "last_sent_ms": B + 13_990,
    }
    assert report.lost_where_text(s) == (
        "input partitions 0 (2), 3 (1); sent +0.060 s to +13.990 s from the first message"
    )
    assert s["verdict"] == {
        "guarantee": "exactly_once",
        "holds": False,
        "lost": 3,
        "duplicate_records": 0,
        "reason": ("exactly-once violated: 3 of 2,000 acknowledged messages lost"),
    }
    assert s["duplicates_before_faults"] == 0 and s["faults"] == []


@pytest.mark.parametrize(
    ("guarantee", "lost", "duplicates", "holds", "reason"),
    [
        (None, 0, 9, True, "at-least-once held: 0 of 40,000 acknowledged messages lost"),
        (
            "at_least_once",
            123,
            0,
            False,
            "at-least-once violated: 123 of 40,000 acknowledged messages lost",
        ),
        (
            "at_most_once",
            5,
            0,
            True,
            "at-most-once held: 0 duplicate records",
        ),
        (
            "at_most_once",
            0,
            2,
            False,
            "at-most-once violated: 2 duplicate records",
        ),
        (
            "exactly_once",
            0,
            0,
            True,
            "exactly-once held: 0 of 40,000 acknowledged messages lost; 0 duplicate records",
        ),
        (
            "exactly_once",
            0,
            1,
            False,
            "exactly-once violated: 1 duplicate record",
        ),
    ],
)
def test_verdict_rules(guarantee, lost, duplicates, holds, reason):
    found = verdict.verdict(guarantee, 40_000, lost, duplicates)
    assert found == {
        "guarantee": guarantee or "at_least_once",
        "holds": holds,
        "lost": lost,
        "duplicate_records": duplicates,
        "reason": reason,
    }


def test_an_unknown_guarantee_is_not_judged():
    found = verdict.verdict("maybe_once", 10, 1, 1)
    assert found["holds"] is None
    assert found["reason"] == "maybe_once is not a guarantee the kit judges"
    assert verdict.run_guarantee({"parameters": {"guarantee": "exactly_once"}}) == "exactly_once"
    assert verdict.run_guarantee({}) == "at_least_once"
