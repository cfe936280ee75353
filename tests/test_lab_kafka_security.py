"""Kafka's SASL_SSL on the test hosts: a client without the lab's credentials is refused, the
files that hold a secret are the service account's to read only. (Both engines completing an
experiment through it, and the client configuration an experiment writes: test_lab_experiment,
which runs with the lab's SASL_SSL on.)"""

from __future__ import annotations

import logging
import ssl

import pytest
from kafka import KafkaAdminClient
from kafka.errors import KafkaError, KafkaTimeoutError

from conftest import lab_kafka_settings, on_lab_host, wait_until

pytestmark = pytest.mark.lab

QUICK = {"request_timeout_ms": 5000, "bootstrap_timeout_ms": 5000}
KAFKA_LOG_DIR = "/var/log/streamlab/kafka"  # kafka_log_dir


def brokers(addresses: list[str], **settings: object) -> list[int]:
    admin = KafkaAdminClient(
        bootstrap_servers=[f"{a}:9092" for a in addresses], **QUICK, **settings
    )
    try:
        return sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"])
    finally:
        admin.close()


def reachable(address: str, sasl: dict[str, object]) -> None:
    """Wait until a client with the lab's credentials reaches the broker (a broker restarted by an
    earlier test may still be catching up): a refusal counts only from a broker that answers."""
    wait_until(
        lambda: brokers([address], **sasl),
        bool,
        f"the broker at {address} answering the lab's client",
        timeout_s=90,
        retry_on=(KafkaError, OSError),
    )


def refused_because(caplog, address: str, reasons: tuple[str, ...], **settings: object) -> str:
    """The client must fail to bootstrap from the broker, for one of reasons, as kafka-python
    logs it. A try that ends before the broker said why (a dropped connection) is tried again,
    up to 3 times; returns what was logged."""
    why = ""
    for _ in range(3):
        caplog.clear()
        with (
            caplog.at_level(logging.INFO, logger="kafka"),
            pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"),
        ):
            brokers([address], **settings)
        why = "\n".join(record.getMessage() for record in caplog.records)
        if any(reason in why for reason in reasons):
            break
    return why


@pytest.fixture(scope="module")
def sasl(converged) -> dict[str, object]:
    settings = lab_kafka_settings()
    assert settings, "the test lab turns kafka_sasl_enabled on (inventory/lab/group_vars/all.yml)"
    return settings


# Each refusal is shown on a broker that a client with the lab's credentials has just reached,
# and by the reason the client was given: a broker that does not answer is no refusal.
def test_the_lab_credentials_reach_every_broker(converged, sasl):
    assert brokers(list(converged.values()), **sasl) == [1, 2, 3]


def test_a_client_without_credentials_is_refused(converged, sasl, caplog):
    # A PLAINTEXT client reads the broker's TLS answer as a Kafka frame, or is cut off.
    reasons = ("Invalid frame length", "socket disconnected")
    for address in converged.values():
        reachable(address, sasl)
        why = refused_because(caplog, address, reasons)
        assert any(reason in why for reason in reasons), why


def broker_refusals(address: str, reason: str) -> int:
    """Failed authentications for reason in the broker's log (Kafka logs each one at INFO)."""
    # One string: ssh joins its arguments into one command line for the host's shell.
    done = on_lab_host(address, f"cat {KAFKA_LOG_DIR}/server.log* | grep -cF '{reason}'")
    assert done.returncode in (0, 1), done.stderr
    return int(done.stdout.strip() or 0)


def test_a_client_with_a_wrong_password_is_refused(converged, sasl, caplog):
    address = converged["node2"]
    reachable(address, sasl)
    reason = "invalid credentials with SASL mechanism SCRAM-SHA-512"
    wrong = sasl | {"sasl_plain_password": "not-the-password"}
    refused_before = broker_refusals(address, reason)
    why = refused_because(caplog, address, (reason,), **wrong)
    # The reason reaches the client in the broker's answer, which the broker sends just before it
    # closes the connection; on a loaded machine kafka-python can see the close first (each try
    # then fails "socket disconnected" after the version exchange). The broker's own log then
    # says why it refused.
    assert reason in why or broker_refusals(address, reason) > refused_before, why


def test_a_client_that_does_not_trust_the_kits_ca_is_refused(converged, sasl, caplog):
    address = converged["node3"]
    reachable(address, sasl)
    strangers_trust = ssl.create_default_context()  # the system's CAs, not the kit's
    reason = "CERTIFICATE_VERIFY_FAILED"
    why = refused_because(caplog, address, (reason,), **(sasl | {"ssl_context": strangers_trust}))
    assert reason in why, why


def test_files_with_a_kafka_secret_are_readable_by_root_and_the_service_account_only(converged):
    files = ["/etc/streamlab/kafka/server.properties", "/etc/streamlab/kafka/tls/broker.p12"]
    for host in ("node1", "node2", "node3"):
        for path in files:
            done = on_lab_host(converged[host], f"stat -c '%U:%G %a' {path}")
            assert done.stdout.split() == ["root:streamlab", "640"], (host, path, done.stdout)
