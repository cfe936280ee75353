"""Steady-state figures of a run: latency after the warm-up, output rate, and the overload flag.

Memory is bounded by the id range, not by the number of records: two array('q') indexed by
msg_id (intended_ms of acked ids, recv_ms of each id's first delivery) and a Counter of
integer-millisecond latencies, from which nearest-rank percentiles are exact.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from producer.idset import DENSE_LIMIT
from producer.lagsampler import LagSample
from producer.linefit import fit_line

# Percentiles reported, as (name, per mille): p is the smallest latency L such that at least
# p % of the messages have a latency <= L.
PERCENTILES = (("p50", 500), ("p90", 900), ("p99", 990), ("p99.9", 999))
MIN_OVERLOAD_SAMPLES = 5
# The backlog may grow this much without calling the run overloaded: 1 % of the input rate,
# and never less than 10 msg/s (sampling noise at low rates).
OVERLOAD_RATE_SHARE = 0.01
OVERLOAD_MIN_PER_S = 10.0


class ArrivalTimes:
    """Per msg_id: intended_ms if acked (0: unknown or not acked) and first recv_ms (0: none).

    Ids outside 1..DENSE_LIMIT-1 are not real messages and are left out.
    """

    def __init__(self) -> None:
        self.intended = array("q")
        self.first_recv = array("q")
        self.first_intended_ms: int | None = None
        self.last_first_recv_ms: int | None = None

    def first_delivery(self, msg_id: int, recv_ms: int) -> None:
        """msg_id arrived for the first time at recv_ms."""
        if 0 < msg_id < DENSE_LIMIT:
            _grow(self.first_recv, msg_id)
            self.first_recv[msg_id] = recv_ms
            self.last_first_recv_ms = recv_ms

    def produced(self, msg_id: int, intended_ms: int | None, acked: bool) -> None:
        """A produced.jsonl line (in any order)."""
        if intended_ms is None:
            return
        if self.first_intended_ms is None or intended_ms < self.first_intended_ms:
            self.first_intended_ms = intended_ms
        if acked and 0 < msg_id < DENSE_LIMIT:
            _grow(self.intended, msg_id)
            self.intended[msg_id] = intended_ms

    def steady_start_ms(self, warmup_s: float) -> int | None:
        """First message's intended_ms + warm-up: where steady-state figures start."""
        if self.first_intended_ms is None:
            return None
        return self.first_intended_ms + round(warmup_s * 1000)


def _grow(values: array[int], msg_id: int) -> None:
    if msg_id >= len(values):
        size = min(DENSE_LIMIT, max(msg_id + 1, 2 * len(values), 1024))
        values.frombytes(bytes(values.itemsize * (size - len(values))))


def latency_histogram(times: ArrivalTimes, steady_start_ms: int) -> Counter[int]:
    """Counts of first recv_ms - intended_ms over acked ids first delivered whose
    intended_ms >= steady_start_ms."""
    counts: Counter[int] = Counter()
    # zip stops at the shorter array: ids beyond it lack one of the two times.
    for intended_ms, recv_ms in zip(times.intended, times.first_recv):  # noqa: B905 - 3.9
        if recv_ms and intended_ms >= steady_start_ms:
            counts[recv_ms - intended_ms] += 1
    return counts


def nearest_rank(counts: Mapping[int, int], per_mille: int) -> int:
    """The smallest value L with at least per_mille/1000 of the counted values <= L."""
    total = sum(counts.values())
    if total == 0:
        raise ValueError("percentile of no values")
    rank = -(-per_mille * total // 1000)  # ceil, in integers: no float rounding at p99.9
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return value
    raise AssertionError("unreachable: rank <= total")


def latency_figures(counts: Mapping[int, int], warmup_s: float) -> dict[str, Any]:
    messages = sum(counts.values())
    figures: dict[str, Any] = {"warmup_s": warmup_s, "messages": messages}
    for name, per_mille in PERCENTILES:
        figures[name] = nearest_rank(counts, per_mille) if messages else None
    figures["max"] = max(counts) if messages else None
    total = sum(value * count for value, count in counts.items())
    figures["mean"] = round(total / messages, 3) if messages else None
    return figures


def output_rate(times: ArrivalTimes, steady_start_ms: int | None) -> dict[str, Any]:
    """First deliveries per second over [steady start, last first delivery]."""
    last_ms = times.last_first_recv_ms
    rate: dict[str, Any] = {"messages_per_s": None, "first_deliveries": 0, "window_ms": None}
    if steady_start_ms is None or last_ms is None or last_ms <= steady_start_ms:
        return rate
    delivered = sum(1 for recv_ms in times.first_recv if recv_ms >= steady_start_ms)
    rate["first_deliveries"] = delivered
    rate["window_ms"] = [steady_start_ms, last_ms]
    rate["messages_per_s"] = round(delivered * 1000 / (last_ms - steady_start_ms), 3)
    return rate


def overload(
    samples: Sequence[LagSample], window_ms: tuple[int, int] | None, rate: float | None
) -> dict[str, Any]:
    """Whether the job fell behind the input: the trend of input_end - result_end over the
    lag samples inside the steady window [first intended + warm-up, producer end].

    True when the slope's 95 % interval lies above the threshold, False when it lies at or
    below it, None when the interval straddles it (the samples scatter too much over this
    window to tell) or when there are too few samples.
    """
    figures: dict[str, Any] = {
        "overloaded": None,
        "backlog_slope_per_s": None,
        "backlog_slope_ci95_per_s": None,
        "threshold_per_s": None,
        "backlog_first": None,
        "backlog_last": None,
        "backlog_max": None,
        "lag_max": None,
        "samples": 0,
        "window_ms": list(window_ms) if window_ms else None,
        "reason": None,
    }
    if window_ms is None or rate is None:
        figures["reason"] = "no steady window: the producer's files are missing"
        return figures
    start, end = window_ms
    inside = [s for s in samples if s.error is None and start <= s.t_ms <= end]
    figures["samples"] = len(inside)
    if inside:
        backlogs = [s.backlog for s in inside]
        lags = [s.lag for s in inside if s.lag is not None]
        figures["backlog_first"], figures["backlog_last"] = backlogs[0], backlogs[-1]
        figures["backlog_max"] = max(backlogs)
        figures["lag_max"] = max(lags) if lags else None
    if len(inside) < MIN_OVERLOAD_SAMPLES:
        figures["reason"] = (
            f"{len(inside)} lag sample{'s' if len(inside) != 1 else ''} in the steady window "
            f"[{start}, {end}], {MIN_OVERLOAD_SAMPLES} needed"
        )
        return figures
    fit = fit_line([((s.t_ms - start) / 1000, s.backlog) for s in inside])
    if fit is None:
        figures["reason"] = "the lag samples in the steady window share one time"
        return figures
    threshold = max(OVERLOAD_RATE_SHARE * rate, OVERLOAD_MIN_PER_S)
    low, high = fit.interval()
    overloaded = True if low > threshold else False if high <= threshold else None
    trend = (
        f"the backlog (input end - result end) {'grew' if fit.slope > 0 else 'changed'} "
        f"{fit.slope:.1f} msg/s (95 % interval {low:.1f} to {high:.1f}) over {len(inside)} "
        f"samples"
    )
    verdict = {
        True: f"above the threshold {threshold:g} msg/s",
        False: f"within the threshold {threshold:g} msg/s",
        None: (
            f"an interval that straddles the threshold {threshold:g} msg/s: the samples scatter "
            "too much over this window to tell whether the job kept up"
        ),
    }[overloaded]
    figures |= {
        "overloaded": overloaded,
        "backlog_slope_per_s": round(fit.slope, 3),
        "backlog_slope_ci95_per_s": [round(low, 3), round(high, 3)],
        "threshold_per_s": round(threshold, 3),
        "reason": f"{trend}, {verdict}",
    }
    return figures


def steady_figures(
    times: ArrivalTimes,
    warmup_s: float,
    produced_summary: Mapping[str, Any] | None,
    samples: Sequence[LagSample],
    overload_until_s: float | None = None,
) -> dict[str, Any]:
    """The received.summary.json fields latency_ms, output_rate, send_lag_ms and overload.

    The overload flag looks at [steady start, producer end], or up to overload_until_s after
    message 1 was due (the producer's start_ms) when that is earlier (a run with faults: whether
    the lab kept up before the first one).
    """
    steady_start = times.steady_start_ms(warmup_s)
    counts = latency_histogram(times, steady_start) if steady_start is not None else Counter()
    latency = latency_figures(counts, warmup_s) | {"steady_start_ms": steady_start}
    produced = produced_summary or {}
    end_ms, rate = produced.get("end_ms"), produced.get("rate")
    start_ms = produced.get("start_ms")
    if end_ms is not None and start_ms is not None and overload_until_s is not None:
        end_ms = min(end_ms, start_ms + round(overload_until_s * 1000))
    window = (steady_start, end_ms) if steady_start is not None and end_ms is not None else None
    return {
        "latency_ms": latency,
        "output_rate": output_rate(times, steady_start),
        "send_lag_ms": produced.get("send_lag_ms"),
        "overload": overload(samples, window, rate),
    }
