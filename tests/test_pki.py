"""streamlab_pki: a CA of the kit and the hosts' key stores on the control node (Kafka's and
Flink's)."""

from __future__ import annotations

import stat
import subprocess

from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from conftest import run_module


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def keystore(directory, host):
    password = (directory / f"{host}.p12.password").read_bytes()
    return pkcs12.load_pkcs12((directory / f"{host}.p12").read_bytes(), password)


def test_issues_a_key_store_per_broker_once_and_keeps_the_ca_private(tmp_path):
    pki = tmp_path / "pki"
    hosts = {"node1": "10.77.0.11", "node2": "10.77.0.12"}
    rc, first = run_module("streamlab_pki", {"dir": str(pki), "hosts": hosts})
    assert rc == 0, first
    assert first["changed"] is True
    assert sorted(first["issued"]) == ["node1", "node2"]
    assert mode(pki) == 0o700
    for name in ("ca.key", "node1.p12", "node1.p12.password", "node2.p12"):
        assert mode(pki / name) == 0o600, name
    ca = x509.load_pem_x509_certificate((pki / "ca.pem").read_bytes())
    assert first["ca_pem"] == (pki / "ca.pem").read_text()
    store = keystore(pki, "node1")
    cert = store.cert.certificate
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["10.77.0.11"]
    assert names.get_values_for_type(x509.DNSName) == ["node1"]
    assert "ca.key" not in str(first["keystores"])

    rc, second = run_module("streamlab_pki", {"dir": str(pki), "hosts": hosts})
    assert rc == 0 and second["changed"] is False and second["issued"] == [], second

    # A broker whose address changed gets a certificate for it; the other keeps its own.
    rc, third = run_module(
        "streamlab_pki", {"dir": str(pki), "hosts": hosts | {"node2": "10.77.0.22"}}
    )
    assert rc == 0 and third["issued"] == ["node2"], third
    names = keystore(pki, "node2").cert.certificate.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert [str(a) for a in names.value.get_values_for_type(x509.IPAddress)] == ["10.77.0.22"]


def test_the_jdk_reads_the_key_store_kafka_is_given(tmp_path):
    pki = tmp_path / "pki"
    rc, result = run_module("streamlab_pki", {"dir": str(pki), "hosts": {"node1": "10.77.0.11"}})
    assert rc == 0, result
    listed = subprocess.run(
        ["keytool", "-list", "-storetype", "PKCS12", "-keystore", str(pki / "node1.p12")]
        + ["-storepass", (pki / "node1.p12.password").read_text()],
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert "PrivateKeyEntry" in listed.stdout


def test_refuses_a_validity_it_would_renew_at_once(tmp_path):
    rc, result = run_module(
        "streamlab_pki", {"dir": str(tmp_path), "hosts": {"node1": "10.77.0.11"}, "days": 30}
    )
    assert rc != 0
    assert "give 31 days or more" in result["msg"]


def test_a_java_trust_store_holds_the_ca_alone_and_is_kept(tmp_path):
    pki = tmp_path / "pki"
    args = {"dir": str(pki), "name": "streamlab Flink CA", "hosts": {"node1": "10.77.0.11"}}
    rc, first = run_module("streamlab_pki", args | {"truststore": True})
    assert rc == 0, first
    assert first["truststore"]["path"] == str(pki / "truststore.p12")
    ca = x509.load_pem_x509_certificate(first["ca_pem"].encode())
    assert ca.subject.rfc4514_string() == "CN=streamlab Flink CA"
    listed = subprocess.run(
        ["keytool", "-list", "-v", "-storetype", "PKCS12", "-keystore", first["truststore"]["path"]]
        + ["-storepass", (pki / "truststore.p12.password").read_text()],
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert "Your keystore contains 1 entry" in listed.stdout, listed.stdout
    assert "trustedCertEntry" in listed.stdout and "CN=streamlab Flink CA" in listed.stdout
    assert mode(pki / "truststore.p12.password") == 0o600
    rc, second = run_module("streamlab_pki", args | {"truststore": True})
    assert rc == 0 and second["changed"] is False, second
    # A new CA (its files removed) gets a new trust store.
    (pki / "ca.key").unlink()
    rc, renewed = run_module("streamlab_pki", args | {"truststore": True})
    assert rc == 0 and renewed["ca_pem"] != first["ca_pem"], renewed
    assert renewed["changed"] and renewed["issued"] == ["node1"], renewed  # from the new CA
    password = (pki / "truststore.p12.password").read_bytes()
    stored = pkcs12.load_pkcs12((pki / "truststore.p12").read_bytes(), password)
    (held,) = [entry.certificate for entry in stored.additional_certs]
    assert held == x509.load_pem_x509_certificate(renewed["ca_pem"].encode())
    # A CA made by a run that stopped before the trust store (the old store left in place): the
    # next run puts the CA it finds in the store.
    kept_store = (pki / "truststore.p12").read_bytes()
    (pki / "ca.key").unlink()
    rc, stopped = run_module("streamlab_pki", args)  # makes a CA, asks for no trust store
    assert rc == 0 and (pki / "truststore.p12").read_bytes() == kept_store, stopped
    rc, mended = run_module("streamlab_pki", args | {"truststore": True})
    assert rc == 0 and mended["changed"], mended
    password = (pki / "truststore.p12.password").read_bytes()
    stored = pkcs12.load_pkcs12((pki / "truststore.p12").read_bytes(), password)
    (held,) = [entry.certificate for entry in stored.additional_certs]
    assert held == x509.load_pem_x509_certificate(stopped["ca_pem"].encode())
    # Without the option no trust store is asked for, and none is reported.
    rc, third = run_module("streamlab_pki", args)
    assert rc == 0 and "truststore" not in third, third
