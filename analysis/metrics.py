"""The per-record computations of docs/metrics.md as Spark aggregations.

Everything here takes DataFrames and returns aggregates only: counts, a latency histogram
(one row per distinct millisecond latency) and 1 s buckets, never one row per record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis.histogram import Histogram

MS_PER_S = 1000
# Per-second latency percentiles for the plot only (approximate; summary.json has exact ones).
PLOT_PERCENTILES = [0.5, 0.99]


def messages(produced: DataFrame, received: DataFrame) -> DataFrame:
    """One row per msg_id in either file, persisted.

    intended_ms, sent_ms, acked, input_partition (the input-topic partition of its
    acknowledged line; null for runs recorded before produced.jsonl had it) and lines
    (produced.jsonl lines of the id) are null for ids that were never produced; first_recv_ms
    and deliveries (records of the id) are null for ids never received.
    """
    by_id = produced.groupBy("msg_id").agg(
        F.min("intended_ms").alias("intended_ms"),
        F.min(F.coalesce("sent_ms", "intended_ms")).alias("sent_ms"),
        F.max("acked").alias("acked"),
        F.min(F.when(F.col("acked"), F.col("partition"))).alias("input_partition"),
        F.count(F.lit(1)).alias("lines"),
    )
    deliveries = (
        received.filter(F.col("msg_id").isNotNull())
        .groupBy("msg_id")
        .agg(
            F.min("recv_ms").alias("first_recv_ms"),
            F.count(F.lit(1)).alias("deliveries"),
            # The engine's and the broker's stamps of the first delivery (null when absent);
            # records of one poll share recv_ms: partition and offset break the tie the same
            # way everywhere.
            F.min_by("processed_ms", F.struct("recv_ms", "partition", "offset")).alias(
                "first_processed_ms"
            ),
            F.min_by("broker_ms", F.struct("recv_ms", "partition", "offset")).alias(
                "first_broker_ms"
            ),
        )
    )
    return by_id.join(deliveries, "msg_id", "full_outer").persist(StorageLevel.MEMORY_AND_DISK)


def lost_sent_ms(table: DataFrame) -> list[int]:
    """When each lost message (acknowledged, never received) was sent, ascending."""
    rows = (
        table.filter(F.col("acked") & F.col("first_recv_ms").isNull())
        .select("sent_ms")
        .orderBy("sent_ms")
        .collect()
    )
    return [int(row.sent_ms) for row in rows if row.sent_ms is not None]


def lost_where(table: DataFrame) -> dict[str, Any]:
    """Where the lost messages lie: per input partition, and the first and last send time
    (null when nothing was lost), so a loss can be set against a fault's time and its target."""
    lost = table.filter(F.col("acked") & F.col("first_recv_ms").isNull())
    per_partition = lost.groupBy("input_partition").agg(
        F.count(F.lit(1)).alias("lost"),
        F.min("sent_ms").alias("first_sent_ms"),
        F.max("sent_ms").alias("last_sent_ms"),
    )
    rows = per_partition.collect()
    firsts = [row.first_sent_ms for row in rows if row.first_sent_ms is not None]
    lasts = [row.last_sent_ms for row in rows if row.last_sent_ms is not None]
    return {
        # "unknown" holds ids of runs recorded before produced.jsonl had partitions.
        "by_partition": {
            str(row.input_partition if row.input_partition is not None else "unknown"): int(
                row.lost
            )
            for row in sorted(rows, key=lambda r: (r.input_partition is None, r.input_partition))
        },
        "first_sent_ms": int(min(firsts)) if firsts else None,
        "last_sent_ms": int(max(lasts)) if lasts else None,
    }


def latency() -> Column:
    """A message's latency: its first delivery's recv_ms - its intended_ms."""
    return F.col("first_recv_ms") - F.col("intended_ms")


def delivered_acked() -> Column:
    return F.col("acked") & F.col("deliveries").isNotNull()


@dataclass(frozen=True)
class Totals:
    """The message counts and the time span of the produced messages."""

    produced: int
    unacked: int
    received_unique: int
    lost: int
    duplicated_messages: int
    unacked_received: int
    received_not_produced: int
    repeated_produced_lines: int
    # Acknowledged messages whose produced.jsonl line has the input partition.
    with_partition: int
    first_intended_ms: int | None
    last_intended_ms: int | None


def totals(table: DataFrame) -> Totals:
    acked = F.col("acked")
    received = F.col("deliveries").isNotNull()
    row = table.agg(
        F.count_if(acked).alias("produced"),
        F.count_if(~acked).alias("unacked"),
        F.count_if(received).alias("received_unique"),
        F.count_if(acked & ~received).alias("lost"),
        F.count_if(F.col("deliveries") > 1).alias("duplicated_messages"),
        F.count_if(received & ~F.coalesce(acked, F.lit(False))).alias("unacked_received"),
        F.count_if(received & F.col("lines").isNull()).alias("received_not_produced"),
        F.coalesce(F.sum(F.col("lines") - 1), F.lit(0)).alias("repeated_produced_lines"),
        F.count_if(acked & F.col("input_partition").isNotNull()).alias("with_partition"),
        F.min("intended_ms").alias("first_intended_ms"),
        F.max("intended_ms").alias("last_intended_ms"),
    ).first()
    return Totals(**row.asDict())


def latency_histogram(
    table: DataFrame,
    intended_from_ms: int | None = None,
    intended_before_ms: int | None = None,
    received_before_ms: int | None = None,
) -> Histogram:
    """(latency ms, messages) ascending, over acknowledged delivered messages, optionally only
    those with intended_ms in [from, before) and first delivered before a time."""
    chosen = table.filter(delivered_acked())
    if intended_from_ms is not None:
        chosen = chosen.filter(F.col("intended_ms") >= intended_from_ms)
    if intended_before_ms is not None:
        chosen = chosen.filter(F.col("intended_ms") < intended_before_ms)
    if received_before_ms is not None:
        chosen = chosen.filter(F.col("first_recv_ms") < received_before_ms)
    rows = chosen.groupBy(latency().alias("latency")).count().orderBy("latency").collect()
    return [(row["latency"], row["count"]) for row in rows]


# The parts of a message's latency, from the timestamps of its first delivery (docs/metrics.md).
LATENCY_PARTS = {
    "send_lag": ("intended_ms", "sent_ms"),
    "to_engine": ("sent_ms", "first_processed_ms"),
    "engine_to_broker": ("first_processed_ms", "first_broker_ms"),
    "broker_to_collector": ("first_broker_ms", "first_recv_ms"),
}


def latency_part_histograms(table: DataFrame, intended_from_ms: int) -> dict[str, Histogram]:
    """(ms, messages) ascending for each part of the latency, over the acknowledged messages
    first delivered whose intended_ms >= intended_from_ms and whose first delivery carries both
    stamps. One aggregation per part; each returns one row per distinct millisecond."""
    chosen = table.filter(
        delivered_acked()
        & (F.col("intended_ms") >= intended_from_ms)
        & F.col("first_processed_ms").isNotNull()
        & F.col("first_broker_ms").isNotNull()
    )
    histograms: dict[str, Histogram] = {}
    for name, (start, end) in LATENCY_PARTS.items():
        rows = (
            chosen.groupBy((F.col(end) - F.col(start)).alias("ms")).count().orderBy("ms").collect()
        )
        histograms[name] = [(row["ms"], row["count"]) for row in rows]
    return histograms


def _second(column: str, t0_ms: int) -> Column:
    """The 1 s bucket of a time: whole seconds since t0_ms (floor)."""
    return F.floor((F.col(column) - F.lit(t0_ms)) / MS_PER_S).cast("long").alias("second")


@dataclass(frozen=True)
class Buckets:
    """Counts per 1 s bucket, all of them and only those of messages after the warm-up."""

    all: dict[int, int]
    steady: dict[int, int]

    def steady_mean(self) -> float | None:
        """Steady messages / seconds from the first to the last bucket that holds one."""
        if not self.steady:
            return None
        span = max(self.steady) - min(self.steady) + 1
        return sum(self.steady.values()) / span

    def describe(self) -> dict[str, Any]:
        return {
            "mean": self.steady_mean(),
            "max": max(self.steady.values()) if self.steady else None,
            "seconds": max(self.steady) - min(self.steady) + 1 if self.steady else 0,
            "messages": sum(self.steady.values()),
        }


def _buckets(frame: DataFrame, time_column: str, t0_ms: int, steady_from_ms: int) -> Buckets:
    steady = (F.col("intended_ms") >= steady_from_ms).alias("steady")
    rows = frame.groupBy(_second(time_column, t0_ms), steady).count().collect()
    every: dict[int, int] = {}
    after: dict[int, int] = {}
    for row in rows:
        every[row["second"]] = every.get(row["second"], 0) + row["count"]
        if row["steady"]:
            after[row["second"]] = row["count"]
    return Buckets(every, after)


def produced_per_second(table: DataFrame, t0_ms: int, steady_from_ms: int) -> Buckets:
    """Acknowledged messages per 1 s bucket of their sent_ms (intended_ms when absent)."""
    return _buckets(table.filter(F.col("acked")), "sent_ms", t0_ms, steady_from_ms)


def delivered_per_second(table: DataFrame, t0_ms: int, steady_from_ms: int) -> Buckets:
    """First deliveries of acknowledged messages per 1 s bucket of their recv_ms."""
    return _buckets(table.filter(delivered_acked()), "first_recv_ms", t0_ms, steady_from_ms)


def records_per_second(received: DataFrame, t0_ms: int) -> dict[int, int]:
    """Received records with a msg_id (first deliveries and duplicates) per 1 s bucket."""
    rows = (
        received.filter(F.col("msg_id").isNotNull())
        .groupBy(_second("recv_ms", t0_ms))
        .count()
        .collect()
    )
    return {row["second"]: row["count"] for row in rows}


def first_deliveries_per_second(table: DataFrame, t0_ms: int) -> dict[int, int]:
    """First deliveries of every id received (acked or not) per 1 s bucket of recv_ms."""
    rows = (
        table.filter(F.col("deliveries").isNotNull())
        .groupBy(_second("first_recv_ms", t0_ms))
        .count()
        .collect()
    )
    return {row["second"]: row["count"] for row in rows}


def latency_per_second(table: DataFrame, t0_ms: int) -> list[dict[str, Any]]:
    """Per 1 s bucket of intended_ms: messages, approximate p50/p99 and the exact max latency."""
    rows = (
        table.filter(delivered_acked())
        .groupBy(_second("intended_ms", t0_ms))
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.percentile_approx(latency(), PLOT_PERCENTILES, 1000).alias("quantiles"),
            F.max(latency()).alias("max"),
        )
        .orderBy("second")
        .collect()
    )
    return [
        {
            "second": row["second"],
            "messages": row["messages"],
            "p50": row["quantiles"][0],
            "p99": row["quantiles"][1],
            "max": row["max"],
        }
        for row in rows
    ]


def received_span(received: DataFrame) -> tuple[int | None, int | None]:
    row = received.agg(F.min("recv_ms").alias("first"), F.max("recv_ms").alias("last")).first()
    return row["first"], row["last"]
