"""tests/run_suite.py: when the tests that need no test host may start beside the lab's."""

from __future__ import annotations

from run_suite import kafka_bundle_cached


def test_an_empty_cache_or_a_download_under_way_has_no_kafka_bundle(tmp_path):
    assert not kafka_bundle_cached(tmp_path)
    (tmp_path / "bundles").mkdir()
    (tmp_path / "bundles" / "kafka-4.1.1-maven.tar.gz.part").write_bytes(b"half")
    (tmp_path / "bundles" / "zookeeper-3.9.4-maven.tar.gz").write_bytes(b"other")
    assert not kafka_bundle_cached(tmp_path)


def test_a_downloaded_kafka_bundle_is_found(tmp_path):
    (tmp_path / "bundles").mkdir()
    (tmp_path / "bundles" / "kafka-4.1.1-maven.tar.gz").write_bytes(b"whole")
    assert kafka_bundle_cached(tmp_path)
