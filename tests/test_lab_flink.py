"""Flink on the test hosts: health, a TaskManager leaving and coming back, and TLS."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    pkcs12,
)

from conftest import (
    REPO,
    daemon_down,
    flink_cli_run,
    flink_rest,
    lab_pki,
    on_lab_host,
    role_default,
    taskmanager_rpc_port,
    wait_until,
)

pytestmark = pytest.mark.lab


def rest(lab: dict[str, str], path: str, body: bytes | None = None, headers: dict | None = None):
    return flink_rest(lab, path, body, headers)


def overview(lab: dict[str, str]) -> dict:
    return rest(lab, "/overview")


def wait_for_taskmanagers(lab: dict[str, str], count: int) -> dict:
    """Wait until exactly count TaskManagers are registered with all their slots.

    A TaskManager that has just registered reports its slots a moment later (CI saw
    2 TaskManagers with 2 slots), so the count alone is not "back".
    """
    slots = role_default("flink", "flink_taskmanager_slots")
    return wait_until(
        lambda: overview(lab),
        lambda seen: seen.get("taskmanagers") == count and seen.get("slots-total") == count * slots,
        f"{count} TaskManagers with {count * slots} slots",
    )


def taskmanager_rpc_ports(lab: dict[str, str]) -> dict[str, int]:
    """Each registered TaskManager's RPC port by address (its id: <address>:<port>-<random>)."""
    ids = [tm["id"] for tm in rest(lab, "/taskmanagers")["taskmanagers"]]
    return {tm_id.split(":")[0]: taskmanager_rpc_port(tm_id) for tm_id in ids}


def test_jobmanager_reports_both_taskmanagers_and_their_slots(converged):
    seen = overview(converged)
    assert seen["flink-version"] == role_default("flink", "flink_version")
    assert seen["taskmanagers"] == 2
    assert seen["slots-total"] == 4


def test_a_killed_taskmanager_leaves_and_a_started_one_returns(converged, tmp_path):
    """... on the next port of its range: the JobManager may still hold the dead one's address
    quarantined, and a new TaskManager there could not register."""
    first, last = map(int, str(role_default("flink", "flink_taskmanager_rpc_ports")).split("-"))
    before = taskmanager_rpc_ports(converged)[converged["node3"]]
    with daemon_down("flink-taskmanager", "killed", "node3", tmp_path):
        wait_for_taskmanagers(converged, 1)  # fails the test if node3's does not leave
    wait_for_taskmanagers(converged, 2)  # ... or does not come back with its slots
    after = taskmanager_rpc_ports(converged)[converged["node3"]]
    assert after == (before + 1 if before < last else first), (before, after)


def test_smoke_job_runs_to_completion_on_both_taskmanagers(converged):
    """Submitted with the Flink CLI on the JobManager host, as the kit does: the REST API's jar
    upload is off (flink_web_submit: false), so nobody who reaches port 8081 runs code with it."""
    project = REPO / "jobs" / "flink-smoke"
    version = role_default("flink", "flink_version")
    subprocess.run(
        ["mvn", "-q", "-B", "package", f"-Dflink.version={version}"], cwd=project, check=True
    )
    jar = project / "target" / "flink-smoke-1.0.jar"
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="jarfile"; '
            f'filename="{jar.name}"\r\nContent-Type: application/x-java-archive\r\n\r\n'
        ).encode()
        + jar.read_bytes()
        + f"\r\n--{boundary}--\r\n".encode()
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        rest(
            converged,
            "/jars/upload",
            body,
            {"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
    answer = refused.value.read().decode()
    assert refused.value.code == 400 and "POST request not allowed" in answer, answer
    with pytest.raises(urllib.error.HTTPError) as no_jars:
        rest(converged, "/jars")  # the jar handlers are not there at all
    assert no_jars.value.code == 404, no_jars.value
    remote_jar = f"/tmp/flink-smoke-{boundary}.jar"
    job_id = flink_cli_run(converged, jar, remote_jar, ["--parallelism", "4"], ["200000"])
    on_lab_host(converged["node1"], "rm", "-f", remote_jar)
    deadline = time.monotonic() + 180
    while (job := rest(converged, f"/jobs/{job_id}"))["state"] not in ("FINISHED", "FAILED"):
        assert time.monotonic() < deadline, f"job still {job['state']} after 180 s"
        time.sleep(1)
    assert job["state"] == "FINISHED", job
    addresses = {  # a TaskManager's id is <address>:<rpc port>-<random>
        tm["taskmanager-id"].split(":")[0]
        for vertex in job["vertices"]
        for tm in rest(converged, f"/jobs/{job_id}/vertices/{vertex['id']}/taskmanagers")[
            "taskmanagers"
        ]
    }
    assert addresses == {converged["node2"], converged["node3"]}, addresses


# ------------------------------------------------------------------ TLS (on in the test lab)

FLINK_PKI = lab_pki("flink")


def handshake(address: str, port: int, context: ssl.SSLContext) -> x509.Certificate:
    """A TLS handshake, then a read (TLS 1.3 servers refuse a client certificate only after the
    handshake); returns the server's certificate."""
    with (
        socket.create_connection((address, port), timeout=10) as raw,
        context.wrap_socket(raw) as tls,
    ):
        certificate = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))
        tls.settimeout(2)
        with contextlib.suppress(TimeoutError):
            tls.recv(1)  # nothing to say: a server that accepted us waits for a request
        return certificate


def flink_context(client_host: str | None, tmp_path: Path) -> ssl.SSLContext:
    """Trusts Flink's CA (not the address: internal connections skip hostname checks); presents
    client_host's key and certificate from the kit's PKI when given."""
    context = ssl.create_default_context(cafile=str(FLINK_PKI / "ca.pem"))
    context.check_hostname = False
    if client_host:
        password = (FLINK_PKI / f"{client_host}.p12.password").read_bytes()
        key, cert, _ = pkcs12.load_key_and_certificates(
            (FLINK_PKI / f"{client_host}.p12").read_bytes(), password
        )
        pem = tmp_path / f"{client_host}.pem"
        pem.write_bytes(
            key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
            + cert.public_bytes(Encoding.PEM)
        )
        context.load_cert_chain(pem)
        pem.unlink()  # the key is in the context now: no copy of it is left behind
    return context


@pytest.mark.parametrize(
    ("host", "port", "what"),
    [
        ("node1", 6123, "JobManager RPC"),
        ("node1", 6124, "blob service"),
        ("node2", 6121, "TaskManager data exchange"),
        ("node2", None, "TaskManager RPC"),  # the port its TaskManager took
    ],
)
def test_internal_ports_speak_tls_only_to_a_holder_of_a_flink_certificate(
    converged, tmp_path, host, port, what
):
    """flink_tls_internal: each internal port presents its host's certificate from Flink's CA,
    and completes a handshake only with a client that presents one too (node3's here)."""
    address = converged[host]
    port = port or taskmanager_rpc_ports(converged)[address]
    served = handshake(address, port, flink_context("node3", tmp_path))
    assert served.issuer.rfc4514_string() == "CN=streamlab Flink CA", what
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert address in [str(a) for a in names.get_values_for_type(x509.IPAddress)], what
    with pytest.raises((ssl.SSLError, ConnectionError)):
        handshake(address, port, flink_context(None, tmp_path))


def test_the_rest_api_speaks_https_with_a_certificate_for_its_address(converged):
    """flink_tls_rest: plain HTTP is only redirected to HTTPS (Flink's redirecting handler), a
    client that trusts other CAs (the system's) refuses the certificate, and one that trusts
    Flink's CA gets the API (conftest.flink_rest)."""
    assert flink_rest(converged, "/overview")["taskmanagers"] == 2

    class NoRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *_: object, **__: object) -> None:
            return None

    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirects())
    with pytest.raises(urllib.error.HTTPError) as redirected:
        direct.open(f"http://{converged['node1']}:8081/overview", timeout=10)
    location = redirected.value.headers.get("Location", "")
    redirected.value.close()
    assert redirected.value.code in (301, 302, 307, 308), redirected.value
    assert location.startswith(f"https://{converged['node1']}:8081/"), location
    strangers_trust = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        urllib.request.HTTPSHandler(context=ssl.create_default_context()),
    )
    with pytest.raises(urllib.error.URLError) as refused:
        strangers_trust.open(f"https://{converged['node1']}:8081/overview", timeout=10)
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value.reason), refused.value


def test_files_with_a_flink_secret_are_readable_by_root_and_the_service_account_only(converged):
    secret = {
        "/etc/streamlab/flink/config.yaml": "640",
        "/etc/streamlab/flink/tls": "750",
        "/etc/streamlab/flink/tls/flink.p12": "640",
        "/etc/streamlab/flink/tls/truststore.p12": "640",
    }
    for host in ("node1", "node2", "node3"):
        for path, mode in secret.items():
            done = on_lab_host(converged[host], f"stat -c '%U:%G %a' {path}")
            assert done.stdout.split() == ["root:streamlab", mode], (host, path, done.stdout)
        # The CA certificate is for anyone (the kit's REST checks run as the login user).
        done = on_lab_host(converged[host], "stat -c '%U %a' /etc/streamlab/flink/flink-ca.pem")
        assert done.stdout.split() == ["root", "644"], (host, done.stdout)
