"""The kafka-python OffsetSource for lag samples: its own consumer and admin client."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.structs import TopicPartition

from producer.kafka_clients import CONSUMER_SETTINGS, NO_SECURITY

# Each request of a sample gives up after this long: a sample is late at worst by that much.
REQUEST_TIMEOUT_MS = 5_000


class KafkaOffsets:
    """End offsets from a consumer outside any group, committed offsets from an admin client.

    Used from the sampler's thread only; separate from the collector's consumer, so sampling
    never touches the fetches that timestamp results. Read committed, an end offset is the last
    stable offset: no reader of committed data gets past it, though it still counts transaction
    markers and aborted records.
    """

    def __init__(
        self,
        bootstrap: list[str],
        security: Mapping[str, object] = NO_SECURITY,
        isolation_level: str = "read_uncommitted",
    ) -> None:
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            request_timeout_ms=REQUEST_TIMEOUT_MS + 1_000,
            isolation_level=isolation_level,
            **(CONSUMER_SETTINGS | {"client_id": "streamlab-lag"} | dict(security)),
        )
        try:
            self._admin = KafkaAdminClient(
                bootstrap_servers=bootstrap,
                client_id="streamlab-lag",
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                bootstrap_timeout_ms=REQUEST_TIMEOUT_MS,
                **security,
            )
        except Exception:
            self._consumer.close()
            raise

    def partitions(self, topic: str) -> list[int]:
        return sorted(self._consumer.partitions_for_topic(topic) or ())

    def committed(self, group: str, topic: str, partitions: Sequence[int]) -> list[int | None]:
        wanted = [TopicPartition(topic, p) for p in partitions]
        offsets = self._admin.list_group_offsets({group: wanted}).get(group, {})
        committed: list[int | None] = []
        for tp in wanted:
            entry = offsets.get(tp)
            committed.append(entry.offset if entry is not None and entry.offset >= 0 else None)
        return committed

    def end_offsets(self, topics: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
        wanted = [TopicPartition(t, p) for t, partitions in topics.items() for p in partitions]
        ends = self._consumer.end_offsets(wanted, timeout_ms=REQUEST_TIMEOUT_MS)
        return {
            t: [ends[TopicPartition(t, p)] for p in partitions] for t, partitions in topics.items()
        }

    def close(self) -> None:
        try:
            self._admin.close()
        finally:
            self._consumer.close()
