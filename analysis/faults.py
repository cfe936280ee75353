"""Per-fault figures (docs/metrics.md): the stall after a fault, and the recovery time.

Both are Spark queries over the run's records; each returns one row to the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analysis import histogram
from analysis.metrics import MS_PER_S, latency, latency_histogram

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
    """The p99 latency of the messages produced in the 30 s before a fault and received
    before it, and the recovery threshold it gives."""

    p99_ms: int | None
    messages: int

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
    return Baseline(histogram.nearest_rank(counts, "99"), histogram.total(counts))


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


def fault_figures(
    spark: SparkSession,
    table: DataFrame,
    received: DataFrame,
    fault: dict[str, Any],
    last_intended_ms: int | None,
    collection_end_ms: int | None,
) -> dict[str, Any]:
    """The summary.json entry of one fault: its record, stall, baseline and recovery."""
    start = fault["start_ms"]
    gap = stall(spark, received, start, last_intended_ms, collection_end_ms)
    base = baseline(table, start)
    back = recovery(table, start, base.threshold_ms, last_intended_ms)
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
        "threshold_ms": base.threshold_ms,
        "baseline_p99_ms": base.p99_ms,
        "baseline_messages": base.messages,
        "details": {k: v for k, v in fault.items() if k not in RECORD_KEYS},
    }
