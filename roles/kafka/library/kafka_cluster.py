#!/usr/bin/python
"""Ansible module: ask a Kafka cluster for its brokers and controller (kafka-python)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kafka_cluster
short_description: Describe a Kafka cluster through a metadata request
description:
  - Runs where kafka-python is installed (the kit's virtualenv on a Kafka host, or the
    control node's).
extends_documentation_fragment: [kafka_connection]
"""

RETURN = r"""
brokers: {description: "Brokers (node_id, host, port, fenced) by node_id.", type: list}
controller_id: {description: Active controller's node id (-1 when unknown)., type: int}
cluster_id: {description: Cluster id., type: str}
"""

import sys

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.kafka_connection import SECURITY_OPTION, client_settings

try:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError
except ImportError:  # reported below with a hint
    KafkaAdminClient = None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "bootstrap_servers": {"type": "list", "elements": "str", "required": True},
            "security": SECURITY_OPTION,
            "timeout_ms": {"type": "int", "default": 10000},
        },
        supports_check_mode=True,
    )
    if KafkaAdminClient is None:
        module.fail_json(
            msg=f"kafka-python is missing from {sys.executable}: the kafka role installs it in the "
            "kit's virtualenv of each Kafka host (run playbooks/kafka.yml)"
        )
    p = module.params
    admin = None
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=p["bootstrap_servers"],
            **client_settings(p["security"]),
            request_timeout_ms=p["timeout_ms"],
            client_id="streamlab-health",
        )
        described = admin.describe_cluster()
    except (KafkaError, OSError, ValueError, KeyError) as error:
        module.fail_json(msg=f"No metadata from {p['bootstrap_servers']}: {error!r}", brokers=[])
    finally:
        if admin is not None:
            admin.close()
    brokers = sorted(
        (
            {
                "node_id": b["broker_id"],
                "host": b["host"],
                "port": b["port"],
                "fenced": bool(b.get("is_fenced")),
            }
            for b in described["brokers"]
        ),
        key=lambda broker: broker["node_id"],
    )
    module.exit_json(
        changed=False,
        brokers=brokers,
        controller_id=described.get("controller_id", -1),
        cluster_id=described.get("cluster_id"),
    )


if __name__ == "__main__":
    main()
