"""Kafka's SASL_SSL on the test hosts: a client without the lab's credentials is refused, the
files that hold a secret are the service account's to read only. (Both engines completing an
experiment through it, and the client configuration an experiment writes: test_lab_experiment,
which runs with the lab's SASL_SSL on.)"""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from conftest import lab_kafka_settings, on_lab_host

pytestmark = pytest.mark.lab

QUICK = {
    "request_timeout_ms": 5000,
    "bootstrap_timeout_ms": 5000,
    "api_version_auto_timeout_ms": 5000,
}


def brokers(addresses: list[str], **settings: object) -> list[int]:
    admin = KafkaAdminClient(
        bootstrap_servers=[f"{a}:9092" for a in addresses], **QUICK, **settings
    )
    try:
        return sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"])
    finally:
        admin.close()


@pytest.fixture(scope="module")
def sasl(converged) -> dict[str, object]:
    settings = lab_kafka_settings()
    assert settings, "the test lab turns kafka_sasl_enabled on (inventory/lab/group_vars/all.yml)"
    return settings


def test_the_lab_credentials_reach_every_broker(converged, sasl):
    assert brokers(list(converged.values()), **sasl) == [1, 2, 3]


def test_a_client_without_credentials_is_refused(converged, sasl):
    for address in converged.values():
        with pytest.raises((KafkaError, OSError)):
            brokers([address])


def test_a_client_with_a_wrong_password_is_refused(converged, sasl):
    wrong = sasl | {"sasl_plain_password": "not-the-lab-password-at-all"}
    with pytest.raises((KafkaError, OSError)):
        brokers(list(converged.values()), **wrong)


def test_a_client_that_does_not_trust_the_kits_ca_is_refused(converged, sasl):
    import ssl

    strangers_trust = ssl.create_default_context()  # the system's CAs, not the kit's
    with pytest.raises((KafkaError, OSError)):
        brokers(list(converged.values()), **(sasl | {"ssl_context": strangers_trust}))


def test_files_with_a_kafka_secret_are_readable_by_root_and_the_service_account_only(converged):
    files = ["/etc/streamlab/kafka/server.properties", "/etc/streamlab/kafka/tls/broker.p12"]
    for host in ("node1", "node2", "node3"):
        for path in files:
            done = on_lab_host(converged[host], f"stat -c '%U:%G %a' {path}")
            assert done.stdout.split() == ["root:streamlab", "640"], (host, path, done.stdout)
