"""Per-fault figures (docs/metrics.md): the stall after a fault, the recovery time, the stall
of each input partition, the failure cost and the duplicates that follow each fault.

Each is a Spark query over the run's records that returns a few rows to the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analysis import histogram
from analysis.metrics import MS_PER_S, delivered_acked, latency, latency_histogram

STALL_WINDOW_MS = 120_000
BASELINE_MS = 30_000
RECOVERY_HOLD_MS = 5_000
MIN_THRESHOLD_MS = 1_000
# faults.jsonl fields summary.json has at the top of each fault; the rest go to its details.
RECORD_KEYS = frozenset({"fault", "host", "start_ms", "end_ms"})


@dataclass(frozen=True)
class Stall:
    """The longest interval without any received record, and where it was."""

    seconds: float
    from_ms: int
    to_ms: int


@dataclass(frozen=True)
class Baseline:
    """The p50 and p99 latency of the messages produced in the 30 s before a fault and
    received before it, and the recovery threshold it gives."""

    p99_ms: int | None
    messages: int
    p50_ms: int | None = None

    @property
    def threshold_ms(self) -> int:
        if self.p99_ms is None:
            return MIN_THRESHOLD_MS
        return max(MIN_THRESHOLD_MS, 2 * self.p99_ms)


@dataclass(frozen=True)
class Recovery:
    """The first message M after a fault that starts 5 s of on-time delivery."""

    seconds: float
    at_ms: int
    msg_id: int
    intended_ms: int


def stall(
    spark: SparkSession,
    received: DataFrame,
    start_ms: int,
    last_intended_ms: int | None,
    collection_end_ms: int | None,
) -> Stall | None:
    """Longest interval without a received record among the intervals that start between
    start_ms and 120 s after it; the first runs from start_ms to the first record after it.

    When nothing at all was received after the window, the interval after the last record
    ends at collection_end_ms (the collector's end) if messages were produced after that
    record, and is not counted otherwise. None when there is no interval.
    """
    times = received.select(F.col("recv_ms").alias("t"))
    window_end = start_ms + STALL_WINDOW_MS
    inside = times.filter((F.col("t") >= start_ms) & (F.col("t") <= window_end)).distinct()
    ends = times.agg(
        F.min(F.when(F.col("t") > window_end, F.col("t"))).alias("after"),
        F.max("t").alias("last"),
    ).first()
    closing = ends["after"]
    if closing is None and collection_end_ms is not None:
        # Nothing came after the window: the silence after the last record is a stall only
        # while messages were still being produced (else it is just the end of the input).
        last = ends["last"]
        still_sending = last_intended_ms is not None and (last is None or last < last_intended_ms)
        closing = collection_end_ms if still_sending else None
    points = inside.union(spark.range(1).select(F.lit(start_ms).cast("long").alias("t")))
    if closing is not None:
        points = points.union(spark.range(1).select(F.lit(closing).cast("long").alias("t")))
    ordered = Window.orderBy("t")
    gaps = points.distinct().withColumn("from_ms", F.lag("t").over(ordered))
    longest = (
        gaps.filter(F.col("from_ms").isNotNull())
        .select("from_ms", F.col("t").alias("to_ms"), (F.col("t") - F.col("from_ms")).alias("gap"))
        .orderBy(F.desc("gap"), "from_ms")
        .first()
    )
    if longest is None:
        return None
    return Stall(longest["gap"] / MS_PER_S, longest["from_ms"], longest["to_ms"])


def baseline(table: DataFrame, start_ms: int) -> Baseline:
    counts = latency_histogram(
        table,
        intended_from_ms=start_ms - BASELINE_MS,
        intended_before_ms=start_ms,
        received_before_ms=start_ms,
    )
    return Baseline(
        histogram.nearest_rank(counts, "99"),
        histogram.total(counts),
        histogram.nearest_rank(counts, "50"),
    )


def recovery(
    table: DataFrame, start_ms: int, threshold_ms: int, last_intended_ms: int | None
) -> Recovery | None:
    """The first acknowledged message M produced at or after start_ms (by intended_ms, then
    msg_id) that was delivered within threshold_ms, like every acknowledged message produced in
    the 5 s after it, with the run going on for those 5 s; None when there is none.

    Messages are cut into 5 s buckets from start_ms, so the 5 s after M reach at most into the
    next bucket: the first late or lost message after M is the first one after it in its own
    bucket (a window sorted within each bucket), or the next bucket's first one.
    """
    if last_intended_ms is None:
        return None
    intended = F.col("intended_ms")
    on_time = F.col("deliveries").isNotNull() & (latency() <= threshold_ms)
    candidates = table.filter(F.col("acked") & (intended >= start_ms)).select(
        "msg_id",
        "intended_ms",
        "first_recv_ms",
        on_time.alias("on_time"),
        F.floor((intended - start_ms) / RECOVERY_HOLD_MS).cast("long").alias("bucket"),
    )
    late = F.when(~F.col("on_time"), intended)
    first_late_next = (
        candidates.filter(~F.col("on_time"))
        .groupBy((F.col("bucket") - 1).alias("bucket"))
        .agg(F.min("intended_ms").alias("next_bucket_late_ms"))
    )
    # The rows after M in its bucket, as a frame that grows row by row (Spark recomputes a
    # frame that ends at unbounded following for every row: quadratic in the bucket's size).
    rest_of_bucket = (
        Window.partitionBy("bucket")
        .orderBy(F.desc("intended_ms"), F.desc("msg_id"))
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    horizon = intended + RECOVERY_HOLD_MS
    qualified = (
        candidates.withColumn("bucket_late_ms", F.min(late).over(rest_of_bucket))
        .join(F.broadcast(first_late_next), "bucket", "left")
        .filter(
            F.col("on_time")
            & (horizon <= last_intended_ms)
            & (F.col("bucket_late_ms").isNull() | (F.col("bucket_late_ms") > horizon))
            & (F.col("next_bucket_late_ms").isNull() | (F.col("next_bucket_late_ms") > horizon))
        )
    )
    first = qualified.agg(
        F.min(F.struct("intended_ms", "msg_id", "first_recv_ms")).alias("first")
    ).first()["first"]
    if first is None:
        return None
    return Recovery(
        (first["first_recv_ms"] - start_ms) / MS_PER_S,
        first["first_recv_ms"],
        first["msg_id"],
        first["intended_ms"],
    )


@dataclass(frozen=True)
class PartitionStall:
    """The longest wait of a message of one input partition after a fault (docs/metrics.md)."""

    partition: int
    seconds: float
    from_ms: int
    to_ms: int

    def as_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "stall_s": self.seconds,
            "from_ms": self.from_ms,
            "to_ms": self.to_ms,
        }


def partition_stalls(table: DataFrame, start_ms: int) -> list[PartitionStall]:
    """Per input partition p: the largest w(m) over p's acknowledged, delivered messages m with
    intended_ms in [start_ms, start_ms + 120 s], where w(m) = first_recv_ms(m) - max(
    intended_ms(m), the latest first delivery of a message of p at or after start_ms and
    before m's, or start_ms). Ties go to the earliest wait. Sorted by partition; empty when
    no such message (or none carries a partition)."""
    intended, first = F.col("intended_ms"), F.col("first_recv_ms")
    due = (
        F.col("acked") & (intended >= start_ms) & (intended <= start_ms + STALL_WINDOW_MS)
    ).alias("due")
    delivered = table.filter(
        F.col("input_partition").isNotNull() & first.isNotNull() & (first >= start_ms)
    ).select(F.col("input_partition").alias("partition"), "intended_ms", "first_recv_ms", due)
    # The first deliveries of the partition strictly before this one (rangeBetween on the
    # ordering value: a message delivered in the same millisecond does not count).
    earlier = (
        Window.partitionBy("partition")
        .orderBy("first_recv_ms")
        .rangeBetween(Window.unboundedPreceding, -1)
    )
    previous = F.coalesce(F.max("first_recv_ms").over(earlier), F.lit(start_ms))
    waits = (
        delivered.withColumn("from_ms", F.greatest(intended, previous))
        .filter(F.col("due"))
        .withColumn("wait", first - F.col("from_ms"))
    )
    rows = (
        waits.groupBy("partition")
        .agg(
            F.max(
                F.struct(
                    F.col("wait"), (-F.col("from_ms")).alias("neg_from"), F.col("first_recv_ms")
                )
            ).alias("longest")
        )
        .orderBy("partition")
        .collect()
    )
    return [
        PartitionStall(
            row["partition"],
            row["longest"]["wait"] / MS_PER_S,
            -row["longest"]["neg_from"],
            row["longest"]["first_recv_ms"],
        )
        for row in rows
    ]


def largest_latency(table: DataFrame, from_ms: int, to_ms: int) -> int | None:
    """The largest latency among acknowledged delivered messages due in [from_ms, to_ms]."""
    intended = F.col("intended_ms")
    row = (
        table.filter(delivered_acked() & (intended >= from_ms) & (intended <= to_ms))
        .agg(F.max(latency()).alias("largest"))
        .first()
    )
    return row["largest"]


def duplicates_by_fault(received: DataFrame, starts: list[int]) -> tuple[int, list[int]]:
    """Records beyond the first delivery of their id (ids not null), by receive time: those
    before the first fault, and for each fault (in the order of starts) those received from
    its start_ms to the next fault's start_ms (the next in time; the last fault's run to the
    end of the collection). A record's rank among its id's records follows (recv_ms,
    partition, offset), the first delivery's tie-break everywhere."""
    if not starts:
        return 0, []
    order = sorted(range(len(starts)), key=lambda i: (starts[i], i))
    by_id = Window.partitionBy("msg_id").orderBy("recv_ms", "partition", "offset")
    recv = F.col("recv_ms")
    # The position (in time order) of the last fault that began at or before the record.
    position = reduce(
        lambda total, step: total + step,
        [F.when(recv >= starts[i], 1).otherwise(0) for i in order],
    ) - F.lit(1)
    rows = (
        received.filter(F.col("msg_id").isNotNull())
        .withColumn("rank", F.row_number().over(by_id))
        .filter(F.col("rank") > 1)
        .groupBy(position.alias("position"))
        .count()
        .collect()
    )
    counts = {row["position"]: row["count"] for row in rows}
    per_fault = [0] * len(starts)
    for position_, index in enumerate(order):
        per_fault[index] = counts.get(position_, 0)
    return counts.get(-1, 0), per_fault


def fault_figures(
    spark: SparkSession,
    table: DataFrame,
    received: DataFrame,
    fault: dict[str, Any],
    last_intended_ms: int | None,
    collection_end_ms: int | None,
    has_partitions: bool = False,
) -> dict[str, Any]:
    """The summary.json entry of one fault: its record, stall, baseline, recovery (or its
    lower bound), the stall of each input partition and the failure cost. The figures that
    come from the engine's evidence and the per-fault duplicates are added by summarize."""
    start = fault["start_ms"]
    gap = stall(spark, received, start, last_intended_ms, collection_end_ms)
    base = baseline(table, start)
    back = recovery(table, start, base.threshold_ms, last_intended_ms)
    censored_bound = (
        max(0, last_intended_ms - start) / MS_PER_S
        if back is None and last_intended_ms is not None
        else None
    )
    stalls = partition_stalls(table, start) if has_partitions else None
    worst = max(stalls, key=lambda p: (p.seconds, -p.from_ms, -p.partition)) if stalls else None
    # PGVal's failure cost: the largest latency of the messages due from the fault up to the
    # recovery message M (to the end of producing when the recovery is censored) minus the
    # baseline p50.
    cost_to = back.intended_ms if back else last_intended_ms
    largest = largest_latency(table, start, cost_to) if cost_to is not None else None
    cost = largest - base.p50_ms if largest is not None and base.p50_ms is not None else None
    return {
        "fault": fault.get("fault"),
        "host": fault.get("host"),
        "start_ms": start,
        "end_ms": fault.get("end_ms"),
        "stall_s": gap.seconds if gap else None,
        "stall_from_ms": gap.from_ms if gap else None,
        "stall_to_ms": gap.to_ms if gap else None,
        "recovery_s": back.seconds if back else None,
        "recovered_at_ms": back.at_ms if back else None,
        "recovery_msg_id": back.msg_id if back else None,
        "recovery_intended_ms": back.intended_ms if back else None,
        "recovery_censored": back is None,
        "recovery_at_least_s": censored_bound,
        "threshold_ms": base.threshold_ms,
        "baseline_p99_ms": base.p99_ms,
        "baseline_p50_ms": base.p50_ms,
        "baseline_messages": base.messages,
        "partition_stalls": [p.as_json() for p in stalls] if stalls is not None else None,
        "partition_stall_s": worst.seconds if worst else None,
        "first_output_s": (worst.to_ms - start) / MS_PER_S if worst else None,
        "failure_cost_ms": cost,
        "failure_cost_max_latency_ms": largest,
        "details": {k: v for k, v in fault.items() if k not in RECORD_KEYS},
    }
