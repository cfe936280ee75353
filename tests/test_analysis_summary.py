"""summarize on hand-made run directories: every figure exactly as docs/metrics.md defines it."""

from __future__ import annotations

import json

from analysis_runs import BASE_MS, RunDir

from analysis import summarize

B = BASE_MS


def run_summary(spark, run: RunDir, draw: bool = False) -> dict:
    return summarize.summarize(spark, run.write(), draw=draw)


def test_gaps_duplicates_triples_and_unacknowledged_ids(spark, tmp_path):
    run = RunDir(tmp_path)
    for i in range(1, 11):
        run.produce(i, B + 1000 * i, acked=i != 9)
    # id 3 and id 10 never arrive; 5 arrives twice, 7 three times; 9 was not acked but
    # arrives; 42 was never produced; one record is not a result at all.
    for msg_id, recv in [
        (1, 1010),
        (2, 2020),
        (4, 4040),
        (5, 5050),
        (6, 6060),
        (5, 6500),
        (7, 7070),
        (7, 7100),
        (8, 8080),
        (7, 8200),
        (9, 9090),
        (42, 9500),
        (None, 9600),
    ]:
        run.receive(msg_id, B + recv)
    s = run_summary(spark, run, draw=True)

    assert s["produced_lines"] == 10 and s["produced"] == 9 and s["unacked"] == 1
    assert s["received_records"] == 13 and s["malformed_records"] == 1
    assert s["received_unique"] == 9
    assert (s["lost"], s["loss_rate"]) == (2, 2 / 9)
    # Written without partitions, as before produced.jsonl had them.
    assert s["lost_where"] == {
        "by_partition": {"unknown": 2},
        "first_sent_ms": B + 3000,
        "last_sent_ms": B + 10000,
    }
    assert (s["duplicate_records"], s["duplicate_rate"]) == (3, 3 / 9)
    assert (s["duplicated_messages"], s["duplicated_messages_rate"]) == (2, 2 / 9)
    assert s["unacked_received"] == 2 and s["received_not_produced"] == 1
    # Latency over acknowledged delivered messages: 1, 2, 4, 5, 6, 7, 8 (first deliveries).
    assert s["latency_ms"] == {
        "count": 7,
        "p50": 50,
        "p90": 80,
        "p99": 80,
        "p99.9": 80,
        "max": 80,
        "mean": 330 / 7,
    }
    assert s["faults"] == [] and s["partial_inputs"] == []
    assert s["run_id"] == "run-1" and s["engine"] == "flink"

    written = json.loads((run.path / "summary.json").read_text())
    assert written["lost"] == 2
    plots = {p.name for p in (run.path / "plots").iterdir()}
    assert plots == {
        "latency_cdf.png",
        "throughput.png",
        "latency_over_time.png",
        "duplicates_over_time.png",
    }
    report = (run.path / "report.md").read_text()
    assert (
        "| where the lost were | input partitions unknown (2); sent +2.000 s to +9.000 s " in report
    )
    assert "| lost | 2 | 22.22 % |" in report and "![Latency CDF](plots/latency_cdf.png)" in report
    assert "data:image/png;base64," in (run.path / "report.html").read_text()


def test_nearest_rank_percentiles_are_exact(spark, tmp_path):
    run = RunDir(tmp_path)
    for i in range(1, 1001):  # latencies 1..1000 ms, delivered in reverse order
        run.produce(i, B + 10 * i)
    for i in range(1000, 0, -1):
        run.receive(i, B + 10 * i + i)
    latency = run_summary(spark, run)["latency_ms"]
    assert latency == {
        "count": 1000,
        "p50": 500,
        "p90": 900,
        "p99": 990,
        "p99.9": 999,
        "max": 1000,
        "mean": 500.5,
    }


def test_the_warm_up_leaves_early_messages_out_of_latency_only(spark, tmp_path):
    run = RunDir(tmp_path, parameters={"warmup_s": 2})
    for msg_id, intended, latency in [
        (1, 0, 1000),
        (2, 1000, 900),
        (3, 2000, 5),
        (4, 2500, 7),
        (5, 3000, 9),
        (6, 4000, 11),
    ]:
        run.produce(msg_id, B + intended).receive(msg_id, B + intended + latency)
    run.receive(1, B + 5000)
    s = run_summary(spark, run)
    assert s["warmup_s"] == 2 and s["steady_from_ms"] == B + 2000
    assert s["latency_ms"] == {
        "count": 4,
        "p50": 7,
        "p90": 11,
        "p99": 11,
        "p99.9": 11,
        "max": 11,
        "mean": 8.0,
    }
    assert (s["produced"], s["duplicate_records"], s["duplicated_messages"]) == (6, 1, 1)


def test_latency_is_cut_at_the_first_delivery_stamps(spark, tmp_path):
    run = RunDir(tmp_path, parameters={"warmup_s": 1})
    # msg_id, intended, sent, processed, broker, recv (ms after B); 1 is in the warm-up.
    for msg_id, intended, sent, processed, broker, recv in [
        (1, 0, 0, 500, 600, 700),
        (2, 1000, 1002, 1040, 1050, 1070),
        (3, 1500, 1500, 1600, 1610, 1650),
        (4, 2000, 2001, 2031, 2101, 2111),
    ]:
        run.produce(msg_id, B + intended, sent_ms=B + sent)
        run.receive(msg_id, B + recv, processed_ms=B + processed, broker_ms=B + broker)
    # A replay of 3 later, with other stamps: only the first delivery counts.
    run.receive(3, B + 9000, processed_ms=B + 8000, broker_ms=B + 8500)
    parts = run_summary(spark, run)["latency_parts_ms"]
    assert {name: (part["count"], part["p50"], part["max"]) for name, part in parts.items()} == {
        "send_lag": (3, 1, 2),
        "to_engine": (3, 38, 100),
        "engine_to_broker": (3, 10, 70),
        "broker_to_collector": (3, 20, 40),
    }


def test_throughput_is_per_second_buckets_and_their_mean(spark, tmp_path):
    run = RunDir(tmp_path)
    for i in range(1, 31):  # 10 msg/s for 3 s
        run.produce(i, B + (i - 1) * 100)
    for i in range(1, 21):
        run.receive(i, B + (i - 1) * 100 + 50)
    for i in range(21, 31):  # the last second's messages all arrive 5 s in
        run.receive(i, B + 5000 + i)
    throughput = run_summary(spark, run)["throughput"]
    assert throughput["produced_per_s"] == {"mean": 10.0, "max": 10, "seconds": 3, "messages": 30}
    assert throughput["received_per_s"] == {"mean": 5.0, "max": 10, "seconds": 6, "messages": 30}


def fault_run(tmp_path, late_from_s: float | None = None, **options) -> RunDir:
    """100 msg/s for 60 s, 20 ms latency; a fault at 30 s stalls delivery until 35 s."""
    run = RunDir(tmp_path, **options)
    fault = B + 30_000
    run.fault(fault, fault + 3_000, daemon="flink-taskmanager")
    run.collection_end_ms = B + 70_000
    for i in range(1, 6001):
        intended = B + (i - 1) * 10
        run.produce(i, intended)
        if intended == fault + 7_000:
            continue  # lost, 7 s after the fault
        recv = intended + 20
        if late_from_s is not None and intended >= fault - 20:
            recv = intended + int(late_from_s * 1000)
        elif fault <= recv < fault + 5_000:
            recv = fault + 5_000
        run.receive(i, recv)
    return run


def test_a_fault_with_a_stall_and_a_recovery(spark, tmp_path):
    s = run_summary(spark, fault_run(tmp_path))
    fault = B + 30_000
    (entry,) = s["faults"]
    assert entry["fault"] == "kill" and entry["host"] == "node2"
    assert entry["details"] == {"daemon": "flink-taskmanager"}
    assert (entry["start_ms"], entry["end_ms"]) == (fault, fault + 3_000)
    # No record from the fault until 5 s after it.
    assert (entry["stall_s"], entry["stall_from_ms"], entry["stall_to_ms"]) == (
        5.0,
        fault,
        fault + 5_000,
    )
    # Baseline: produced in the 30 s before the fault and received before it (the last two
    # arrive at or after it): p99 20 ms, so the threshold is the 1000 ms floor.
    assert (entry["baseline_messages"], entry["baseline_p99_ms"], entry["threshold_ms"]) == (
        2998,
        20,
        1000,
    )
    # Message at +4 s is the first on time (1000 ms) but the one lost at +7 s is within 5 s
    # of every message up to it: the first good message is the one right after, at +7.01 s.
    assert entry["recovery_msg_id"] == 3702
    assert entry["recovered_at_ms"] == fault + 7_030
    assert entry["recovery_s"] == 7.03
    assert s["lost"] == 1


def test_a_run_that_never_recovers(spark, tmp_path):
    s = run_summary(spark, fault_run(tmp_path, late_from_s=2.0))
    (entry,) = s["faults"]
    assert entry["recovery_s"] is None and entry["recovered_at_ms"] is None
    # The first record after the fault is the one due 20 ms before it, 2 s late.
    assert entry["stall_s"] == 1.98
    assert entry["threshold_ms"] == 1000


def test_a_job_that_never_delivers_again_stalls_until_the_collector_ends(spark, tmp_path):
    run = RunDir(tmp_path)
    run.fault(B + 30_000, None)
    run.collection_end_ms = B + 70_000
    for i in range(1, 6001):
        intended = B + (i - 1) * 10
        run.produce(i, intended)
        if intended + 20 < B + 30_000:
            run.receive(i, intended + 20)
    (entry,) = run_summary(spark, run)["faults"]
    assert (entry["stall_s"], entry["stall_to_ms"]) == (40.0, B + 70_000)
    assert entry["recovery_s"] is None


def test_an_empty_received_file(spark, tmp_path):
    run = RunDir(tmp_path)
    for i in range(1, 6):
        run.produce(i, B + 100 * i)
    s = run_summary(spark, run, draw=True)
    assert (s["produced"], s["received_records"], s["received_unique"]) == (5, 0, 0)
    assert (s["lost"], s["loss_rate"]) == (5, 1.0)
    assert (s["duplicate_records"], s["duplicate_rate"], s["duplicated_messages"]) == (0, 0.0, 0)
    assert s["latency_ms"] == {
        "count": 0,
        "p50": None,
        "p90": None,
        "p99": None,
        "p99.9": None,
        "max": None,
        "mean": None,
    }
    assert s["throughput"]["received_per_s"]["mean"] is None
    assert (run.path / "summary.json").exists() and (run.path / "report.html").exists()


def test_part_files_are_read_and_their_cut_last_line_ignored(spark, tmp_path):
    run = RunDir(tmp_path)
    for i in range(1, 5):
        run.produce(i, B + 100 * i).receive(i, B + 100 * i + 7)
    run.produced_lines.append('{"msg_id":5,"intended_ms":17000000')  # the writer died here
    path = run.write(produced_name="produced.jsonl.part", received_name="received.jsonl.part")
    s = summarize.summarize(spark, path, draw=False)
    assert s["partial_inputs"] == ["produced.jsonl.part", "received.jsonl.part"]
    assert s["inputs"]["produced"] == "produced.jsonl.part"
    assert (s["produced_lines"], s["produced"], s["received_records"], s["lost"]) == (4, 4, 4, 0)


def test_only_run_id_and_engine_are_needed_from_run_json(spark, tmp_path):
    run = RunDir(tmp_path, engine="storm")
    run.produce(1, B).receive(1, B + 3)
    path = run.write()
    (path / "faults.jsonl").unlink()
    s = summarize.summarize(spark, path, draw=False)
    assert (s["engine"], s["parameters"], s["warmup_s"], s["fault"]) == ("storm", {}, 0, None)
    assert s["inputs"]["faults"] is None and s["latency_ms"]["p50"] == 3
