#!/usr/bin/python
"""Ansible module: a certificate authority of the kit and one key store per host (Kafka, Flink)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: streamlab_pki
short_description: Keep a certificate authority and each host's TLS key store on the control node
description:
  - Runs on the control node (cryptography, which ansible-core needs, is there). The CA's key
    never leaves it; each host gets a PKCS12 key store (its key and a certificate the CA signed
    for its names and addresses) and the password of that key store.
  - One directory is one CA. Each component that uses TLS has its own (Kafka's brokers, Flink's
    daemons), so a key store of one is never trusted by the other.
  - A certificate is issued again when it is missing, was signed by another CA, names other hosts
    or addresses, or expires within 30 days. Otherwise nothing changes.
options:
  dir: {description: Directory of the CA and key stores (created 0700)., type: path, required: true}
  name:
    description: The CA certificate's common name (when the CA is made).
    type: str
    default: streamlab CA
  hosts:
    description: Inventory name -> the host's cluster address; its certificate names both.
    type: dict
    required: true
  days: {description: Validity of a host certificate in days., type: int, default: 825}
  truststore:
    description:
      - Also keep a Java trust store (PKCS12) that holds the CA certificate only, for Java
        programs that take a trust store file (Flink). Made again unless it holds this CA alone.
    type: bool
    default: false
"""

RETURN = r"""
ca_pem: {description: The CA certificate (PEM)., type: str}
keystores: {description: "Inventory name -> {path, password_file}.", type: dict}
truststore: {description: "{path, password_file} of the trust store, when asked for.", type: dict}
issued: {description: Inventory names whose certificate was issued in this run., type: list}
"""

import datetime
import ipaddress
import os
import secrets

from ansible.module_utils.basic import AnsibleModule

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError:  # reported below with a hint
    x509 = None

CA_DAYS = 3650
RENEW_BEFORE = datetime.timedelta(days=30)


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def write_private(path: str, data: bytes) -> None:
    """Write data so that the file is never readable by others, even while written."""
    temporary = path + ".tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


def load_or_make_ca(
    directory: str, common_name: str
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate, bool]:
    key_path, cert_path = os.path.join(directory, "ca.key"), os.path.join(directory, "ca.pem")
    if os.path.exists(key_path) and os.path.exists(cert_path):
        with open(key_path, "rb") as handle:
            key = serialization.load_pem_private_key(handle.read(), password=None)
        with open(cert_path, "rb") as handle:
            cert = x509.load_pem_x509_certificate(handle.read())
        return key, cert, False
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now() - datetime.timedelta(minutes=5))
        .not_valid_after(now() + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    write_private(
        key_path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    write_private(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return key, cert, True


def general_names(names: list[str]) -> list:
    out = []
    for name in names:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out


def current(cert_path: str, ca_cert: x509.Certificate, names: list[str]) -> bool:
    """The host certificate there is the CA's, names exactly these names and is not expiring."""
    try:
        with open(cert_path, "rb") as handle:
            cert = x509.load_pem_x509_certificate(handle.read())
        cert.verify_directly_issued_by(ca_cert)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
        return False
    wanted = set(general_names(names))
    return set(sans) == wanted and cert.not_valid_after_utc - now() > RENEW_BEFORE


def issue(
    directory: str,
    host: str,
    names: list[str],
    days: int,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now() - datetime.timedelta(minutes=5))
        .not_valid_after(now() + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(general_names(names)), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    password = secrets.token_urlsafe(24)
    store = pkcs12.serialize_key_and_certificates(
        host.encode(),
        key,
        cert,
        [ca_cert],
        serialization.BestAvailableEncryption(password.encode()),
    )
    base = os.path.join(directory, host)
    # The certificate goes first and comes back last: a run stopped in between leaves no
    # certificate, so the next run issues all three again (a key store and a password that do
    # not belong together are never taken for current).
    if os.path.exists(base + ".pem"):
        os.remove(base + ".pem")
    write_private(base + ".p12.password", password.encode())
    write_private(base + ".p12", store)
    write_private(base + ".pem", cert.public_bytes(serialization.Encoding.PEM))


def holds_only(path: str, password_file: str, ca_cert: x509.Certificate) -> bool:
    """The trust store there opens with its password and holds this CA's certificate alone."""
    try:
        with open(password_file, "rb") as handle:
            password = handle.read()
        with open(path, "rb") as handle:
            stored = pkcs12.load_pkcs12(handle.read(), password)
    except (OSError, ValueError, TypeError):
        return False
    held = [entry.certificate for entry in stored.additional_certs]
    return stored.key is None and stored.cert is None and held == [ca_cert]


def keep_truststore(directory: str, ca_cert: x509.Certificate) -> dict:
    """The Java trust store of the CA (and its password), made again unless it holds this CA
    alone (a run stopped after making a new CA must not leave the old one trusted)."""
    path = os.path.join(directory, "truststore.p12")
    password_file = path + ".password"
    if not holds_only(path, password_file, ca_cert):
        password = secrets.token_urlsafe(24)
        store = pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(ca_cert, b"ca")],
            serialization.BestAvailableEncryption(password.encode()),
        )
        # The store goes first: a store without its password is made again by the next run.
        if os.path.exists(password_file):
            os.remove(password_file)
        write_private(path, store)
        write_private(password_file, password.encode())
        return {"path": path, "password_file": password_file, "changed": True}
    return {"path": path, "password_file": password_file, "changed": False}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dir": {"type": "path", "required": True},
            "name": {"type": "str", "default": "streamlab CA"},
            "hosts": {"type": "dict", "required": True},
            "days": {"type": "int", "default": 825},
            "truststore": {"type": "bool", "default": False},
        },
        supports_check_mode=False,
    )
    if x509 is None:
        module.fail_json(
            msg="the cryptography package is missing on the control node: run `make setup`"
        )
    directory, days = module.params["dir"], module.params["days"]
    if days < 31:
        module.fail_json(
            msg=f"days={days}: give 31 days or more "
            "(certificates are renewed 30 days before they expire)"
        )
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    ca_key, ca_cert, changed = load_or_make_ca(directory, module.params["name"])
    keystores, issued = {}, []
    for host, address in sorted(module.params["hosts"].items()):
        if not address:
            module.fail_json(msg=f"{host} has no cluster address to put in its certificate")
        names = [str(address)] + ([host] if host != str(address) else [])
        base = os.path.join(directory, host)
        ready = all(os.path.exists(base + suffix) for suffix in (".p12", ".p12.password"))
        if not (ready and current(base + ".pem", ca_cert, names)):
            issue(directory, host, names, days, ca_key, ca_cert)
            issued.append(host)
        keystores[host] = {"path": base + ".p12", "password_file": base + ".p12.password"}
    result = {}
    if module.params["truststore"]:
        if not hasattr(pkcs12, "serialize_java_truststore"):
            module.fail_json(
                msg="a Java trust store needs cryptography 45 or later on the control node: "
                "run `make setup`"
            )
        result["truststore"] = keep_truststore(directory, ca_cert)
        changed = changed or result["truststore"].pop("changed")
    module.exit_json(
        changed=changed or bool(issued),
        **result,
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM).decode(),
        keystores=keystores,
        issued=issued,
    )


if __name__ == "__main__":
    main()
