"""The kafka-python clients, configured for the experiment."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import kafka
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError
from kafka.record.util import crc32c_c

from producer import kafka_security

# Retries are bounded by delivery_timeout_ms (2 min), as in the Java client: a leader election
# after a broker fault must not turn into lost input.
PRODUCER_SETTINGS = {
    "acks": "all",
    "retries": 2_147_483_647,
    "delivery_timeout_ms": 120_000,
    "linger_ms": 5,
    "batch_size": 64 * 1024,
    "max_in_flight_requests_per_connection": 5,
    "max_block_ms": 30_000,
    "client_id": "streamlab-producer",
}
CONSUMER_SETTINGS = {
    "group_id": None,
    "enable_auto_commit": False,
    "auto_offset_reset": "earliest",
    "allow_auto_create_topics": False,
    "client_id": "streamlab-collector",
}


# PLAINTEXT: no settings beyond the bootstrap servers (producer.kafka_security gives the others).
NO_SECURITY: Mapping[str, object] = MappingProxyType({})


class StartupError(Exception):
    """Kafka cannot be used as asked; the message says what to check."""


def describe_producer(
    idempotence: bool, security: Mapping[str, object] = NO_SECURITY
) -> dict[str, object]:
    """The client and settings, for the run summary (never a password)."""
    return {
        "library": f"kafka-python {kafka.__version__}",
        # Without the crc32c package kafka-python checksums batches in pure Python (slow).
        "crc32c": "C extension" if crc32c_c is not None else "pure Python",
        "enable_idempotence": idempotence,
        **PRODUCER_SETTINGS,
        **kafka_security.describe(security),
    }


def open_producer(
    bootstrap: list[str],
    topic: str,
    idempotence: bool,
    security: Mapping[str, object] = NO_SECURITY,
) -> KafkaProducer:
    """A connected producer that already knows the topic's partitions."""
    return _connected_producer(
        bootstrap, topic, {"enable_idempotence": idempotence, **PRODUCER_SETTINGS, **security}
    )


def open_probe_producer(
    bootstrap: list[str], topic: str, security: Mapping[str, object] = NO_SECURITY
) -> KafkaProducer:
    """A producer for the readiness probe (acks=all, no lingering) that knows topic's partitions."""
    return _connected_producer(
        bootstrap,
        topic,
        PRODUCER_SETTINGS | {"linger_ms": 0, "client_id": "streamlab-probe"} | dict(security),
    )


def _connected_producer(
    bootstrap: list[str], topic: str, settings: dict[str, object]
) -> KafkaProducer:
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, **settings)
    except KafkaError as error:
        raise StartupError(f"cannot reach Kafka at {','.join(bootstrap)}: {error!r}") from error
    try:
        producer.partitions_for(topic)
    except KafkaError as error:
        producer.close(timeout=5)
        raise StartupError(
            f"topic {topic!r} is not available at {','.join(bootstrap)} ({error!r}); "
            "create it first (automatic topic creation is off in the kit)"
        ) from error
    return producer


def describe_consumer(
    isolation_level: str, security: Mapping[str, object] = NO_SECURITY
) -> dict[str, object]:
    """The client and settings, for the run summary (never a password)."""
    return {
        "library": f"kafka-python {kafka.__version__}",
        "isolation_level": isolation_level,
        **CONSUMER_SETTINGS,
        **kafka_security.describe(security),
    }


def open_consumer(
    bootstrap: list[str], isolation_level: str, security: Mapping[str, object] = NO_SECURITY
) -> KafkaConsumer:
    """A consumer outside any group: it commits nothing and is assigned partitions explicitly."""
    try:
        return KafkaConsumer(
            bootstrap_servers=bootstrap,
            isolation_level=isolation_level,
            **CONSUMER_SETTINGS,
            **security,
        )
    except KafkaError as error:
        raise StartupError(f"cannot reach Kafka at {','.join(bootstrap)}: {error!r}") from error
