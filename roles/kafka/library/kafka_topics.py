#!/usr/bin/python
"""Ansible module: list, and delete, the topics whose names start with a prefix (kafka-python)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kafka_topics
short_description: Delete the topics of a Kafka cluster whose names start with a prefix
description:
  - Runs where kafka-python is installed (the kit's virtualenv on a Kafka host, or the
    control node's).
  - Only topics whose names start with C(prefix) are touched; an empty prefix is refused.
  - In check mode nothing is deleted and C(topics) lists what would be.
  - When the cluster does not answer (no broker listens, or none gives metadata or deletes),
    or kafka-python is missing here, fails unless C(unreachable_ok) (then C(reachable=false)
    and the reason in C(msg)).
extends_documentation_fragment: [kafka_connection]
options:
  prefix: {description: Name prefix of the topics to delete., type: str, required: true}
  state:
    description: "absent deletes; listed lists."
    type: str
    choices: [absent, listed]
    default: absent
  unreachable_ok:
    {description: A cluster that does not answer is no error., type: bool, default: false}
"""

RETURN = r"""
topics:
  {description: "Matching topics (deleted, or to delete in check mode or when listed).", type: list}
reachable: {description: Whether the cluster answered., type: bool}
"""

import socket
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.kafka_connection import SECURITY_OPTION, client_settings

try:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError
except ImportError:  # reported below with a hint
    KafkaAdminClient = None


def any_listening(servers: list, timeout_s: float = 2.0) -> bool:
    """Whether any host:port accepts a connection (kafka-python takes ~30 s to give up on none)."""
    for server in servers:
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return True
        except (OSError, ValueError):
            continue
    return False


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "bootstrap_servers": {"type": "list", "elements": "str", "required": True},
            "security": SECURITY_OPTION,
            "prefix": {"type": "str", "required": True},
            "state": {"type": "str", "choices": ["absent", "listed"], "default": "absent"},
            "unreachable_ok": {"type": "bool", "default": False},
            "timeout_ms": {"type": "int", "default": 10000},
        },
        supports_check_mode=True,
    )
    p = module.params
    if not p["prefix"]:
        module.fail_json(msg="kafka_topics: an empty prefix would match every topic; give one")
    # Before the library: a host where Kafka never ran (half provisioned) may not have it.
    # A port nobody listens on fails at once, not after kafka-python's own 30 s of retries.
    if not any_listening(p["bootstrap_servers"]):
        if p["unreachable_ok"]:
            module.exit_json(changed=False, topics=[], reachable=False, msg="no broker answers")
        module.fail_json(
            msg=f"Kafka at {p['bootstrap_servers']}: no broker answers on any of these "
            "addresses; start the brokers (playbooks/site.yml) or fix the addresses",
            topics=[],
        )
    if KafkaAdminClient is None:
        missing = (
            f"kafka-python is missing from {sys.executable}: the kafka role installs it in the "
            "kit's virtualenv of each Kafka host (run playbooks/kafka.yml)"
        )
        if p["unreachable_ok"]:  # teardown: the topics go with the brokers' data anyway
            module.exit_json(changed=False, topics=[], reachable=False, msg=missing)
        module.fail_json(msg=missing)
    admin = None
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=p["bootstrap_servers"],
            **client_settings(p["security"]),
            request_timeout_ms=p["timeout_ms"],
            client_id="streamlab-teardown",
        )
        topics = sorted(t for t in admin.list_topics() if t.startswith(p["prefix"]))
        deleting = bool(topics) and p["state"] == "absent" and not module.check_mode
        if deleting:
            admin.delete_topics(topics, timeout_ms=p["timeout_ms"])
    except (KafkaError, OSError, ValueError, KeyError) as error:
        # A cluster that lost its quorum answers on a port but not with metadata: the same.
        if p["unreachable_ok"]:
            module.exit_json(changed=False, topics=[], reachable=False, msg=f"{error!r}")
        module.fail_json(msg=f"Kafka at {p['bootstrap_servers']}: {error!r}", topics=[])
    finally:
        if admin is not None:
            admin.close()
    module.exit_json(changed=bool(topics) and p["state"] == "absent", topics=topics, reachable=True)


if __name__ == "__main__":
    main()
