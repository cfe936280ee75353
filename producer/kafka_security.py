"""How a kafka-python client connects, read from a Kafka client properties file.

The kit writes one client properties file per host (roles/kafka/tasks/client.yml), in the form the
Java clients read (`--command-config`, the jobs' `--kafka-config`), so every client of a run, in
Python or in Java, connects the same way. This module turns it into kafka-python's keyword
arguments: PLAINTEXT, or SASL_SSL with SCRAM (or PLAIN) and a PEM trust store, given inline
(`ssl.truststore.certificates`) or as a file (`ssl.truststore.location`).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from pathlib import Path

SUPPORTED_PROTOCOLS = ("PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class ClientConfigError(ValueError):
    """The client properties file cannot be used; the message says what to fix."""


def parse_properties(text: str) -> dict[str, str]:
    """Java properties (java.util.Properties.load): comments, continuations, escapes."""
    properties: dict[str, str] = {}
    lines = iter(text.splitlines())
    for raw in lines:
        line = raw.lstrip()
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1] + next(lines, "").lstrip()
        key, value = _split_key(line)
        properties[_unescape(key)] = _unescape(value)
    return properties


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t\f":
            rest = line[index:].lstrip(" \t\f")
            # One = or : ends the key, after any whitespace that ended it first.
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return line[:index], rest.lstrip(" \t\f")
        index += 1
    return line, ""


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 == len(text):
            out.append(char)
            index += 1
            continue
        following = text[index + 1]
        if following == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[index + 2 : index + 6]):
            out.append(chr(int(text[index + 2 : index + 6], 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(following, following))
        index += 2
    return "".join(out)


def client_settings(
    properties: Mapping[str, str], source: str = "the client configuration"
) -> dict[str, object]:
    """kafka-python keyword arguments for the connection the properties describe."""
    protocol = properties.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in SUPPORTED_PROTOCOLS:
        raise ClientConfigError(
            f"{source}: security.protocol={protocol} is not supported by the kit's Python clients "
            f"(supported: {', '.join(SUPPORTED_PROTOCOLS)})"
        )
    if protocol == "PLAINTEXT":
        return {}
    mechanism = properties.get("sasl.mechanism", "").upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ClientConfigError(
            f"{source}: sasl.mechanism={mechanism or '(unset)'} is not supported "
            f"(supported: {', '.join(SUPPORTED_MECHANISMS)})"
        )
    options = {
        name: re.sub(r"\\(.)", r"\1", value)
        for name, value in _JAAS_OPTION.findall(properties.get("sasl.jaas.config", ""))
    }
    if not options.get("username") or "password" not in options:
        raise ClientConfigError(
            f'{source}: sasl.jaas.config must give username="..." and password="..."'
        )
    return {
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": options["username"],
        "sasl_plain_password": options["password"],
        "ssl_context": _trust_context(properties, source),
    }


def _trust_context(properties: Mapping[str, str], source: str) -> ssl.SSLContext:
    store_type = properties.get("ssl.truststore.type", "PEM").upper()
    if store_type != "PEM":
        raise ClientConfigError(
            f"{source}: ssl.truststore.type={store_type}; the kit's Python clients read PEM only"
        )
    inline = properties.get("ssl.truststore.certificates", "")
    location = properties.get("ssl.truststore.location", "")
    try:
        if inline:
            context = ssl.create_default_context(cadata=inline)
        elif location:
            context = ssl.create_default_context(cafile=location)
        else:
            context = ssl.create_default_context()
    except (ssl.SSLError, OSError) as error:
        raise ClientConfigError(f"{source}: the trust store cannot be read ({error})") from error
    # Kafka's ssl.endpoint.identification.algorithm: https (the default) checks the broker's name;
    # empty turns that off, as in the Java client.
    context.check_hostname = properties.get("ssl.endpoint.identification.algorithm", "https") != ""
    return context


def load_client_settings(path: str | None) -> dict[str, object]:
    """The settings of the properties file at path; none (PLAINTEXT) without a path."""
    if not path:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ClientConfigError(
            f"cannot read the Kafka client configuration {path}: {error}"
        ) from error
    return client_settings(parse_properties(text), source=path)


def describe(settings: Mapping[str, object]) -> dict[str, object]:
    """What a run summary may say about the connection: never the password."""
    return {
        "security_protocol": settings.get("security_protocol", "PLAINTEXT"),
        "sasl_mechanism": settings.get("sasl_mechanism"),
        "sasl_username": settings.get("sasl_plain_username"),
    }
