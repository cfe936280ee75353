"""kafka-python connection settings for the kit's Kafka modules (they run on a Kafka host)."""

from __future__ import annotations

import ssl

# The `security` option of kafka_cluster and kafka_topics: {} (PLAINTEXT) or SASL_SSL's settings.
# Only the password is secret: Ansible masks a no_log value wherever it appears in a result, and
# the user name (`streamlab`) is in every topic name of the kit.
SECURITY_OPTION = {
    "type": "dict",
    "default": {},
    "options": {
        "protocol": {"type": "str", "default": "PLAINTEXT", "choices": ["PLAINTEXT", "SASL_SSL"]},
        "mechanism": {"type": "str"},
        "username": {"type": "str"},
        "password": {"type": "str", "no_log": True},
        "ca_pem": {"type": "str"},
    },
}


def client_settings(security: dict | None) -> dict:
    """kafka-python keyword arguments: none for PLAINTEXT; SASL_SSL with the kit's CA otherwise."""
    if not security or security.get("protocol", "PLAINTEXT") == "PLAINTEXT":
        return {}
    context = ssl.create_default_context(cadata=security["ca_pem"])
    return {
        "security_protocol": security["protocol"],
        "sasl_mechanism": security["mechanism"],
        "sasl_plain_username": security["username"],
        "sasl_plain_password": security["password"],
        "ssl_context": context,
    }
