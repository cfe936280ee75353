"""Documentation of the options the kit's Kafka modules share (module_utils/kafka_connection)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  bootstrap_servers: {description: host:port list., type: list, elements: str, required: true}
  security:
    description: >-
      How to connect: {} for PLAINTEXT, or protocol, mechanism, username, password and ca_pem
      (SASL_SSL).
    type: dict
    default: {}
  timeout_ms: {description: Request timeout., type: int, default: 10000}
"""
