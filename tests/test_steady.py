"""Steady-state figures: exact nearest-rank latency percentiles after the warm-up, output rate,
and the overload flag from the backlog's trend."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from producer.lagsampler import LagSample
from producer.linefit import fit_line, t_quantile_975
from producer.steady import (
    ArrivalTimes,
    latency_figures,
    latency_histogram,
    nearest_rank,
    output_rate,
    overload,
    steady_figures,
)

T0 = 1_734_258_123_000  # intended_ms of message 1


def brute_force_percentile(values, p):
    """The definition: the smallest L such that at least p % of the values are <= L."""
    ordered = sorted(values)
    return next(v for v in ordered if sum(1 for x in ordered if x <= v) * 100 >= p * len(ordered))


@pytest.mark.parametrize("n", [1, 7, 100, 1000, 1001])
def test_nearest_rank_matches_the_definition_exactly_even_at_p99_9(n):
    rng = random.Random(n)
    values = [rng.randint(0, 50) for _ in range(n)]
    counts = Counter(values)
    for name, per_mille in (("p50", 500), ("p90", 900), ("p99", 990), ("p99.9", 999)):
        assert nearest_rank(counts, per_mille) == brute_force_percentile(values, per_mille / 10), (
            name
        )
    # 1000 values 1..1000: p99.9 is the 999th; 1001 values: the 1000th (rank ceil(999.999)).
    assert nearest_rank(Counter(range(1, 1001)), 999) == 999
    assert nearest_rank(Counter(range(1, 1002)), 999) == 1000


def run_times(latencies, first=1, acked=None, warmup_ids=0):
    """ArrivalTimes for ids first.. with 10 ms slots and the given latencies (None: lost)."""
    times = ArrivalTimes()
    for offset, latency in enumerate(latencies):
        msg_id = first + offset
        intended = T0 + (msg_id - 1) * 10
        times.produced(msg_id, intended, acked is None or msg_id in acked)
        if latency is not None:
            times.first_delivery(msg_id, intended + latency)
    return times


def test_latency_leaves_out_the_warm_up_unacked_and_lost_ids():
    # ids 1..100 (warm-up: the first second, ids 1..100 at 10 ms slots), then 101..200.
    latencies = [5000] * 100 + [10 + i % 7 for i in range(100)]
    latencies[150] = None  # id 151 lost
    acked = set(range(1, 201)) - {160}  # id 160 arrived but was never acked
    times = run_times(latencies, acked=acked)
    start = times.steady_start_ms(warmup_s=1.0)
    assert start == T0 + 1000
    counts = latency_histogram(times, start)
    expected = [10 + i % 7 for i in range(100) if i + 101 not in (151, 160)]
    assert counts == Counter(expected)
    figures = latency_figures(counts, 1.0)
    assert figures == {
        "warmup_s": 1.0,
        "messages": 98,
        "p50": brute_force_percentile(expected, 50),
        "p90": brute_force_percentile(expected, 90),
        "p99": 16,
        "p99.9": 16,
        "max": 16,
        "mean": round(sum(expected) / 98, 3),
    }


def test_produced_lines_in_any_order_give_the_same_figures():
    latencies = [20 + i % 13 for i in range(300)]
    ordered = run_times(latencies)
    shuffled = ArrivalTimes()
    ids = list(range(1, 301))
    random.Random(3).shuffle(ids)
    for msg_id in ids:
        shuffled.produced(msg_id, T0 + (msg_id - 1) * 10, True)
    for msg_id in range(1, 301):
        shuffled.first_delivery(msg_id, T0 + (msg_id - 1) * 10 + latencies[msg_id - 1])
    assert shuffled.first_intended_ms == ordered.first_intended_ms == T0
    start = ordered.steady_start_ms(0.5)
    assert latency_histogram(shuffled, start) == latency_histogram(ordered, start)


def test_no_steady_messages_gives_null_figures():
    assert latency_figures(Counter(), 10.0) == {
        "warmup_s": 10.0,
        "messages": 0,
        "p50": None,
        "p90": None,
        "p99": None,
        "p99.9": None,
        "max": None,
        "mean": None,
    }


def test_output_rate_counts_first_deliveries_from_the_steady_start():
    times = run_times([100] * 1000)  # 100 msg/s in, each out 100 ms later
    start = times.steady_start_ms(2.0)  # T0 + 2000
    rate = output_rate(times, start)
    # First deliveries from T0+2000 to the last at T0+9990+100: ids 191..1000.
    assert rate["first_deliveries"] == 810
    assert rate["window_ms"] == [T0 + 2000, T0 + 10090]
    assert rate["messages_per_s"] == round(810 * 1000 / 8090, 3)
    assert output_rate(ArrivalTimes(), None)["messages_per_s"] is None


def test_fit_line_gives_the_slope_and_its_standard_error():
    exact = fit_line([(0, 1), (1, 3), (2, 5), (3, 7)])
    assert exact is not None
    assert exact.slope == pytest.approx(2.0) and exact.standard_error == pytest.approx(0.0)
    assert exact.interval() == pytest.approx((2.0, 2.0))
    flat = fit_line([(0, 10), (1, 12), (2, 9), (3, 11)])
    assert flat is not None and flat.slope == pytest.approx(0.0)
    # Residuals -0.5, 1.5, -1.5, 0.5 around y = 10.5: s^2 = 5 / (4 - 2), spread of x 5.
    assert flat.standard_error == pytest.approx((2.5 / 5) ** 0.5)
    assert flat.interval() == pytest.approx((-4.303 * 0.5**0.5, 4.303 * 0.5**0.5))
    assert fit_line([(1, 1), (1, 2), (1, 3)]) is None  # x does not vary
    assert fit_line([(0, 1), (1, 2)]) is None  # two points leave no scatter to estimate


def test_t_quantiles_step_down_to_the_normal_ones_and_never_narrow_between_rows():
    assert t_quantile_975(1) == 12.706 and t_quantile_975(5) == 2.571
    assert t_quantile_975(35) == t_quantile_975(30) == 2.042  # the wider of the two rows
    assert t_quantile_975(100) == 2.000
    assert t_quantile_975(500) == t_quantile_975(120) == 1.980  # never the narrower 1.960
    with pytest.raises(ValueError, match="1 degree of freedom or more, not 0"):
        t_quantile_975(0)


def samples(backlogs, t0=T0, step_ms=1000, lag=None):
    """Samples of one partition whose input end is `backlog` ahead of the result end."""
    return [
        LagSample(
            t0 + i * step_ms,
            (0,),
            (10_000 + b,),
            (None if lag is None else 10_000 + b - lag,),
            (10_000,),
        )
        for i, b in enumerate(backlogs)
    ]


def test_a_growing_backlog_flags_an_overloaded_job():
    window = (T0, T0 + 10_000)
    growing = samples([i * 500 for i in range(11)], lag=3)  # +500 records a second
    flagged = overload(growing, window, rate=20_000.0)
    assert flagged["overloaded"] is True
    assert flagged["backlog_slope_per_s"] == pytest.approx(500.0)
    assert flagged["threshold_per_s"] == 200.0  # 1 % of 20,000 msg/s
    assert (flagged["backlog_first"], flagged["backlog_last"], flagged["backlog_max"]) == (
        0,
        5000,
        5000,
    )
    assert flagged["samples"] == 11 and flagged["window_ms"] == [T0, T0 + 10_000]
    assert flagged["lag_max"] == 3
    assert flagged["backlog_slope_ci95_per_s"] == [500.0, 500.0]  # the samples lie on a line
    assert flagged["reason"] == (
        "the backlog (input end - result end) grew 500.0 msg/s (95 % interval 500.0 to 500.0) "
        "over 11 samples, above the threshold 200 msg/s"
    )


def test_a_backlog_that_wobbles_is_not_overload_and_slow_rates_get_the_floor():
    steady = samples([40, 60, 50, 45, 55, 50, 52, 48])
    result = overload(steady, (T0, T0 + 7000), rate=300.0)
    assert result["overloaded"] is False
    assert result["threshold_per_s"] == 10.0  # max(1 % of 300, 10)
    assert result["lag_max"] is None  # no committed offsets sampled


def test_a_slope_over_the_threshold_within_the_samples_scatter_is_not_called_either_way():
    """The Storm run of a `make demo` (docs/results.md): 7 samples a second apart between the
    warm-up and the fault, a backlog of 37, 0, 38, 0, 23, 152 and 47 (results written in
    batches). Its slope, 11.0 msg/s, was over the 10 msg/s threshold and the run was flagged
    overloaded; the slope's 95 % interval is about -14 to 36 msg/s."""
    times_ms = (497, 1336, 2336, 3797, 4337, 5349, 6340)
    backlogs = (37, 0, 38, 0, 23, 152, 47)
    demo = [
        LagSample(T0 + t, (0,), (10_000 + b,), (None,), (10_000,))
        for t, b in zip(times_ms, backlogs, strict=True)
    ]
    verdict = overload(demo, (T0, T0 + 7000), rate=1000.0)
    assert verdict["overloaded"] is None
    assert verdict["backlog_slope_per_s"] == pytest.approx(10.992, abs=0.001)
    low, high = verdict["backlog_slope_ci95_per_s"]
    assert low < 0 < 10.0 < high
    assert verdict["reason"].endswith(
        "an interval that straddles the threshold 10 msg/s: the samples scatter too much over "
        "this window to tell whether the job kept up"
    )


def test_a_real_overload_is_flagged_through_noise_and_a_steady_job_is_cleared_through_it():
    """Backlogs scattered by +-150 records (batched results): growing 100 msg/s over 20 s is
    flagged against a 20 msg/s threshold (2,000 msg/s in), flat ones are cleared."""
    noise = random.Random(7)
    growing = samples([100 * i + noise.randint(-150, 150) for i in range(21)])
    flagged = overload(growing, (T0, T0 + 20_000), rate=2000.0)
    assert flagged["overloaded"] is True, flagged["reason"]
    assert flagged["backlog_slope_ci95_per_s"][0] > flagged["threshold_per_s"] == 20.0
    flat = samples([200 + noise.randint(-150, 150) for _ in range(21)])
    cleared = overload(flat, (T0, T0 + 20_000), rate=2000.0)
    assert cleared["overloaded"] is False, cleared["reason"]
    assert cleared["backlog_slope_ci95_per_s"][1] <= 20.0


def test_samples_outside_the_window_and_failed_ones_do_not_count():
    inside = samples([0, 1, 2, 3], t0=T0 + 1000)
    outside = samples([9999, 9999], t0=T0 + 60_000)
    failed = [LagSample(T0 + 1500, error="KafkaTimeoutError")]
    result = overload(inside + failed + outside, (T0, T0 + 10_000), rate=1000.0)
    assert result["overloaded"] is None and result["samples"] == 4
    assert result["reason"] == f"4 lag samples in the steady window [{T0}, {T0 + 10000}], 5 needed"
    missing = overload(inside, None, None)
    assert missing["overloaded"] is None and "producer's files are missing" in missing["reason"]


def test_steady_figures_put_it_together_with_the_producers_send_lag():
    times = run_times([30] * 2000)  # 100 msg/s for 20 s
    produced = {"end_ms": T0 + 20_000, "rate": 100.0, "send_lag_ms": {"p50": 0.1}}
    lag = samples([5] * 15, t0=T0 + 5000)
    figures = steady_figures(times, 10.0, produced, lag)
    assert figures["latency_ms"]["messages"] == 1000  # ids 1001..2000
    assert figures["latency_ms"]["p99.9"] == 30
    assert figures["latency_ms"]["steady_start_ms"] == T0 + 10_000
    assert figures["send_lag_ms"] == {"p50": 0.1}
    assert figures["overload"]["window_ms"] == [T0 + 10_000, T0 + 20_000]
    assert figures["overload"]["samples"] == 10 and figures["overload"]["overloaded"] is False
    nothing = steady_figures(ArrivalTimes(), 10.0, None, [])
    assert nothing["latency_ms"]["messages"] == 0 and nothing["send_lag_ms"] is None


def test_with_faults_the_overload_window_ends_at_the_first_fault():
    """A fault's stall grows the backlog; whether the lab kept up is judged before it."""
    times = run_times([30] * 2000)  # 100 msg/s for 20 s
    produced = {"start_ms": T0, "end_ms": T0 + 20_000, "rate": 100.0, "send_lag_ms": {"p50": 0.1}}
    flat_then_stalled = samples([5] * 6 + [200 * i for i in range(1, 10)], t0=T0 + 10_000)
    whole_run = steady_figures(times, 10.0, produced, flat_then_stalled)
    assert whole_run["overload"]["overloaded"] is True
    before_fault = steady_figures(times, 10.0, produced, flat_then_stalled, 15.0)
    assert before_fault["overload"]["window_ms"] == [T0 + 10_000, T0 + 15_000]
    assert before_fault["overload"]["overloaded"] is False
    assert before_fault["overload"]["samples"] == 6


def test_without_the_producers_start_the_overload_window_is_the_whole_run():
    """--overload-until-s counts from the producer's start_ms: a summary without it (a producer
    killed before writing one) leaves the window at the producer's end, never at a guess."""
    times = run_times([30] * 2000)
    produced = {"end_ms": T0 + 20_000, "rate": 100.0, "send_lag_ms": {"p50": 0.1}}
    flat_then_stalled = samples([5] * 6 + [200 * i for i in range(1, 10)], t0=T0 + 10_000)
    figures = steady_figures(times, 10.0, produced, flat_then_stalled, 15.0)
    assert figures["overload"]["window_ms"] == [T0 + 10_000, T0 + 20_000]
    at_once = steady_figures(times, 10.0, produced | {"start_ms": T0}, flat_then_stalled, 0.0)
    assert at_once["overload"]["window_ms"] == [T0 + 10_000, T0]
    assert at_once["overload"]["overloaded"] is None  # no steady time before a fault at 0 s
