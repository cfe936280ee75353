"""Preflight of the kafka role on the embedded default (inventory/local): settings that name
hosts are refused before any change when they name none."""

from __future__ import annotations

from conftest import LOCAL_INVENTORY, run_playbook


def test_a_kafka_api_host_outside_the_kafka_group_is_refused(tmp_path):
    """kafka_api_host (the host that asks Kafka for its brokers and topics) must be a Kafka host:
    preflight names the setting and the fix before anything is installed."""
    refused = run_playbook(
        "preflight.yml",
        LOCAL_INVENTORY,
        extravars={"preflight_components": ["kafka"], "kafka_api_host": "nowhere"},
        tmp_path=tmp_path,
    )
    assert refused.rc != 0
    message = " ".join(refused.output.split())
    assert "kafka_api_host=nowhere is not in the kafka group" in message, refused.output[-3000:]
