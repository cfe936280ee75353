"""kafka-python connection settings for the kit's Kafka modules (they run on the control node)."""

from __future__ import annotations

import ssl

# The `security` option of kafka_cluster and kafka_topics: empty for PLAINTEXT.
SECURITY_OPTION = {"type": "dict", "no_log": True, "default": {}}


def client_settings(security: dict | None) -> dict:
    """kafka-python keyword arguments: none for PLAINTEXT; SASL_SSL with the kit's CA otherwise.

    security: {protocol, mechanism, username, password, ca_pem}, as roles/kafka/vars builds it.
    """
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
