"""argparse value types that reject bad input with the problem and the fix."""

from __future__ import annotations

import argparse
import math
import re
from fractions import Fraction
from pathlib import Path

from producer import kafka_security
from producer.files import new_output_problem


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (1, 2, ...), got {text!r}")
    return value


def positive_rate(text: str) -> Fraction:
    """Messages per second, kept exact (decimal text -> Fraction)."""
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        value = Fraction(0)
    if value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a number of messages per second > 0 (e.g. 1000 or 2.5), got {text!r}"
        )
    return value


def seconds(text: str) -> float:
    """A duration >= 0 in seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    value = seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def bootstrap_servers(text: str) -> list[str]:
    """HOST:PORT[,HOST:PORT...] -> ['HOST:PORT', ...]."""
    servers = [part.strip() for part in text.split(",") if part.strip()]
    for server in servers:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise argparse.ArgumentTypeError(
                f"{server!r} is not HOST:PORT; expected e.g. 10.77.0.2:9092,10.77.0.3:9092"
            )
    if not servers:
        raise argparse.ArgumentTypeError("no broker given; expected HOST:PORT[,HOST:PORT...]")
    return servers


def kafka_client_config(path: str) -> dict[str, object]:
    """A Kafka client properties file -> kafka-python connection settings."""
    try:
        return kafka_security.load_client_settings(path)
    except kafka_security.ClientConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def add_kafka_config(parser: argparse.ArgumentParser) -> None:
    """The --kafka-config option every Kafka client of the kit takes."""
    parser.add_argument(
        "--kafka-config",
        dest="kafka_security",
        type=kafka_client_config,
        default={},
        metavar="FILE",
        help="a Kafka client properties file (security.protocol, sasl.*, ssl.truststore.*); "
        "without it, PLAINTEXT",
    )


CONFIG_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def config_setting(text: str) -> tuple[str, str]:
    """KEY=VALUE (a Kafka topic setting) -> (KEY, VALUE); both parts must be there."""
    key, equals, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not equals or not CONFIG_KEY.fullmatch(key) or not value:
        raise argparse.ArgumentTypeError(
            f"must be KEY=VALUE, e.g. message.timestamp.type=LogAppendTime, got {text!r}"
        )
    return key, value


def new_output_file(text: str) -> Path:
    """A result file that does not exist yet, in a directory that does."""
    path = Path(text)
    problem = new_output_problem(path)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return path
