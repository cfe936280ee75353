"""The part of kafka-python's consumer that the collector and the probe use, as Protocols."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from kafka.structs import TopicPartition

# ConsumerRecord.timestamp_type of a timestamp the broker set when it appended the record.
LOG_APPEND_TIME = 1


class ResultRecord(Protocol):
    """The part of kafka-python's ConsumerRecord the collector and the probe use."""

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def timestamp(self) -> int: ...

    @property
    def timestamp_type(self) -> int: ...

    @property
    def value(self) -> bytes | None: ...


class Consumer(Protocol):
    """The part of kafka-python's KafkaConsumer the collector and the probe use."""

    def partitions_for_topic(self, topic: str) -> set[int] | None: ...

    def assign(self, partitions: list[TopicPartition]) -> None: ...

    def seek_to_beginning(self, *partitions: TopicPartition) -> None: ...

    def poll(self, timeout_ms: int) -> Mapping[Any, Sequence[ResultRecord]]: ...

    def close(self) -> None: ...


def assign_from_beginning(consumer: Consumer, topic: str, partitions: Collection[int]) -> None:
    """Read every partition of topic from its first offset (no group, nothing committed)."""
    assigned = [TopicPartition(topic, partition) for partition in sorted(partitions)]
    consumer.assign(assigned)
    consumer.seek_to_beginning(*assigned)


def broker_ms(record: ResultRecord) -> int | None:
    """The record's timestamp if the broker set it on append (LogAppendTime), else None."""
    return record.timestamp if record.timestamp_type == LOG_APPEND_TIME else None
