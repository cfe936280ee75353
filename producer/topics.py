"""Create the fresh input and result topics of one run and wait until every partition has a leader.

python -m producer.topics --bootstrap H:9092 --partitions 4 --replication 3 \
    [--config KEY=VALUE ...] TOPIC [TOPIC ...]

Every --config setting (e.g. message.timestamp.type=LogAppendTime) is applied to every topic.
Prints one JSON line: {"topics": {name: partitions}, "configs": {key: value}}. A topic that
already exists is an error: every run gets its own topics, so no earlier run's records can
leak into its results.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from producer import arguments

EXIT_OK, EXIT_FAILED = 0, 1


def wait_for_leaders(
    admin: KafkaAdminClient, topics: Sequence[str], partitions: int, timeout_s: float
) -> None:
    """Poll until each topic reports `partitions` partitions, all with a leader."""
    deadline = time.monotonic() + timeout_s
    while True:
        described = admin.describe_topics(list(topics))
        ready = len(described) == len(topics) and all(
            topic["error_code"] == 0
            and len(topic["partitions"]) == partitions
            and all(p["leader_id"] >= 0 for p in topic["partitions"])
            for topic in described
        )
        if ready:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"topics {list(topics)} lack a leader somewhere after {timeout_s:.0f} s"
            )
        time.sleep(0.3)


def create_topics(
    admin: Any,
    topics: Sequence[str],
    partitions: int,
    replication: int,
    configs: Mapping[str, str],
    timeout_s: float,
) -> None:
    """Create topics, each with configs, and wait until every partition has a leader."""
    admin.create_topics(
        [NewTopic(t, partitions, replication, topic_configs=dict(configs)) for t in topics],
        timeout_ms=int(timeout_s * 1000),
    )
    wait_for_leaders(admin, topics, partitions, timeout_s)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m producer.topics", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--bootstrap", required=True, type=arguments.bootstrap_servers)
    arguments.add_kafka_config(parser)
    parser.add_argument("--partitions", required=True, type=arguments.positive_int)
    parser.add_argument("--replication", required=True, type=arguments.positive_int)
    parser.add_argument("--timeout-s", type=arguments.positive_seconds, default=60.0)
    parser.add_argument(
        "--config",
        dest="configs",
        action="append",
        default=[],
        type=arguments.config_setting,
        metavar="KEY=VALUE",
        help="a topic setting for every topic created (repeatable)",
    )
    parser.add_argument("topics", nargs="+")
    args = parser.parse_args(argv)
    keys = [key for key, _ in args.configs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        parser.error(f"argument --config: {', '.join(twice)} given more than once")
    args.configs = dict(args.configs)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=args.bootstrap, client_id="streamlab-topics", **args.kafka_security
        )
        try:
            create_topics(
                admin, args.topics, args.partitions, args.replication, args.configs, args.timeout_s
            )
        finally:
            admin.close()
    except TopicAlreadyExistsError as error:
        print(f"a topic of this run already exists ({error}); pick a new run_id", file=sys.stderr)
        return EXIT_FAILED
    except (KafkaError, TimeoutError) as error:
        print(
            f"cannot create {args.topics} at {','.join(args.bootstrap)}: {error!r}", file=sys.stderr
        )
        return EXIT_FAILED
    created = {t: args.partitions for t in args.topics}
    print(json.dumps({"topics": created, "configs": args.configs}))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
