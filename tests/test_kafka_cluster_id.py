"""roles/kafka/files/kafka_cluster_id.py: a KRaft cluster id kafka-storage's --cluster-id takes.

A fresh converge in a CI run failed with kafka-storage's "argument --cluster-id/-t: expected one
argument", which an id that begins with '-' causes: 1 id in 64 does, and Kafka's own
Uuid.randomUuid() draws again for that reason."""

from __future__ import annotations

import base64
import subprocess
import sys

from local_kafka import kafka_cluster_id

from conftest import REPO

SCRIPT = REPO / "roles" / "kafka" / "files" / "kafka_cluster_id.py"
# 16 bytes whose URL-safe base64 begins with '-' (index 62: a first byte of 0xF8 to 0xFB).
LEADING_DASH = bytes([0xF8]) + bytes(15)


def test_an_id_that_would_start_with_a_dash_is_drawn_again():
    assert base64.urlsafe_b64encode(LEADING_DASH).decode().startswith("-")
    draws = iter([LEADING_DASH, LEADING_DASH, bytes(range(16))])
    cluster_id = kafka_cluster_id.new_cluster_id(lambda: next(draws))
    assert cluster_id == base64.urlsafe_b64encode(bytes(range(16))).decode().rstrip("=")
    assert next(draws, None) is None  # it stopped at the first id without the dash


def test_the_script_prints_16_bytes_in_url_safe_base64_without_padding():
    printed = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True
    ).stdout
    cluster_id = printed.strip()
    assert printed == cluster_id + "\n" and len(cluster_id) == 22
    assert not cluster_id.startswith("-")
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
