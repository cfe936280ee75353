"""The Kafka client properties file the kit writes, read by the Python clients."""

from __future__ import annotations

import argparse
import ssl

import pytest

from conftest import self_signed_ca_pem
from producer import arguments, kafka_security
from producer.kafka_security import ClientConfigError, client_settings, parse_properties


def escaped(pem: str) -> str:
    return pem.strip().replace("\n", "\\n")


def test_java_properties_escapes_comments_and_continuations():
    text = (
        "# a comment\n"
        "! another\n"
        "a=1\n"
        "b : two words\n"
        "c three\n"
        "d=first\\\n"
        "   second\n"
        "e=line\\nbreak\\u0041\\\\\n"
        "key\\=with\\:separators=x\n"
        "empty=\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "two words",
        "c": "three",
        "d": "firstsecond",
        "e": "line\nbreakA\\",
        "key=with:separators": "x",
        "empty": "",
    }


def test_plaintext_needs_nothing_beyond_the_bootstrap_servers():
    assert client_settings({}) == {}
    assert client_settings({"security.protocol": "PLAINTEXT"}) == {}


def test_sasl_ssl_with_scram_and_an_inline_pem_trust_store():
    pem = self_signed_ca_pem("test CA")
    properties = parse_properties(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="streamlab" password="p\\\\"w";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.certificates={escaped(pem)}\n"
    )
    settings = client_settings(properties)
    assert settings["security_protocol"] == "SASL_SSL"
    assert settings["sasl_mechanism"] == "SCRAM-SHA-512"
    assert settings["sasl_plain_username"] == "streamlab"
    assert settings["sasl_plain_password"] == 'p"w'
    context = settings["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname is True
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "test CA"),),)]
    # What a run summary may say: the user and the mechanism, never the password.
    described = kafka_security.describe(settings)
    assert described == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "streamlab",
    }


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        ({"security.protocol": "SSL"}, "security.protocol=SSL"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism=GSSAPI"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"},
            "sasl.jaas.config",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": 'x required username="u" password="p";',
                "ssl.truststore.type": "JKS",
            },
            "PEM only",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": 'x required username="u" password="p";',
                "ssl.truststore.certificates": "not a certificate",
            },
            "trust store cannot be read",
        ),
    ],
)
def test_what_the_python_clients_cannot_use_is_named(properties, named):
    with pytest.raises(ClientConfigError, match=named):
        client_settings(properties, source="client.properties")


def test_the_option_names_a_file_it_cannot_read(tmp_path):
    with pytest.raises(
        argparse.ArgumentTypeError, match="cannot read the Kafka client configuration"
    ):
        arguments.kafka_client_config(str(tmp_path / "missing.properties"))
