"""The teardown's modules: streamlab_clear (lists, then removes, exactly what a directory holds)
and kafka_topics (only the topics of a prefix, and a fast answer when no broker listens)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from conftest import free_port, run_module


def state_dir(tmp_path):
    data = tmp_path / "data"
    for name in ("kafka/logs", "zookeeper", "supervisor"):
        (data / name).mkdir(parents=True)
    (data / "kafka" / "logs" / "00.log").write_text("x")
    (data / "supervisor" / "supervisor.sock").write_text("")
    (data / "loose-file").write_text("y")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "not-the-kit's").write_text("z")
    (data / "link").symlink_to(tmp_path / "elsewhere")
    return data


def test_check_mode_lists_what_would_go_and_removes_nothing(tmp_path):
    data = state_dir(tmp_path)
    args = {"directories": [{"path": str(data), "keep": ["supervisor"]}]}
    rc, result = run_module("streamlab_clear", args, "--check")
    assert rc == 0, result
    assert result["changed"] is True
    assert result["removed"] == [
        str(data / n) for n in ("kafka", "link", "loose-file", "zookeeper")
    ]
    assert (data / "kafka" / "logs" / "00.log").exists() and (data / "link").is_symlink()


def test_it_removes_all_but_what_is_kept_never_following_links_and_then_changes_nothing(tmp_path):
    data = state_dir(tmp_path)
    args = {"directories": [{"path": str(data), "keep": ["supervisor"]}]}
    rc, result = run_module("streamlab_clear", args)
    assert rc == 0 and result["changed"] is True, result
    assert sorted(p.name for p in data.iterdir()) == ["supervisor"]
    assert (tmp_path / "elsewhere" / "not-the-kit's").exists()  # the link went, not its target
    rc, again = run_module("streamlab_clear", args)
    assert rc == 0 and again["changed"] is False and again["removed"] == [], again


def test_whole_removes_the_directory_itself_and_a_missing_one_is_no_change(tmp_path):
    data = state_dir(tmp_path)
    args = {"directories": [{"path": str(data), "whole": True}, {"path": str(tmp_path / "none")}]}
    rc, result = run_module("streamlab_clear", args)
    assert rc == 0, result
    assert result["removed"][-1] == str(data) and not data.exists()


def test_system_directories_and_relative_paths_are_refused(tmp_path):
    for system in ("/", "/var/log/", "/opt"):
        args = {"directories": [{"path": str(tmp_path)}, {"path": system, "whole": True}]}
        rc, result = run_module("streamlab_clear", args, "--check")
        assert rc != 0 and "is a system directory, not one of the kit's" in result["msg"], result
    rc, result = run_module("streamlab_clear", {"directories": [{"path": "relative/dir"}]})
    assert rc != 0 and "'relative/dir' is not an absolute path" in result["msg"], result


def test_a_directory_given_as_a_link_is_emptied_through_it_and_both_stay(tmp_path):
    target = tmp_path / "big-disk" / "streamlab"
    (target / "kafka").mkdir(parents=True)
    link = tmp_path / "data"
    link.symlink_to(target)
    rc, result = run_module(
        "streamlab_clear", {"directories": [{"path": str(link), "whole": True}]}
    )
    assert rc == 0 and result["removed"] == [str(target / "kafka")], result
    assert link.is_symlink() and target.is_dir() and not any(target.iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root")
def test_a_mount_point_is_emptied_but_stays(tmp_path):
    """The test hosts' kit directories are bind mounts from the same file system, which
    os.path.ismount does not see: purge must empty them, not fail removing them."""
    source, mounted = tmp_path / "source", tmp_path / "mounted"
    source.mkdir()
    mounted.mkdir()
    subprocess.run(["mount", "--bind", str(source), str(mounted)], check=True)
    try:
        assert not os.path.ismount(mounted)
        (mounted / "state").mkdir()
        # Inside a directory too: a mounted entry (a data disk) is emptied, not removed.
        outer = tmp_path / "outer"
        (outer / "kafka").mkdir(parents=True)
        (outer / "zookeeper").mkdir()
        subprocess.run(["mount", "--bind", str(mounted), str(outer / "kafka")], check=True)
        try:
            args = {"directories": [{"path": str(outer)}, {"path": str(mounted), "whole": True}]}
            rc, listed = run_module("streamlab_clear", args, "--check")
            expected = [str(outer / "kafka" / "state"), str(outer / "zookeeper")]
            assert rc == 0 and listed["removed"][:2] == expected, listed
            rc, result = run_module("streamlab_clear", args)
            assert rc == 0 and result["removed"] == expected, result
            assert os.path.ismount(outer / "kafka") or (outer / "kafka").is_dir()
        finally:
            subprocess.run(["umount", str(outer / "kafka")], check=True)
        assert mounted.is_dir() and not any(mounted.iterdir())
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


def test_kafka_topics_refuses_an_empty_prefix():
    rc, result = run_module("kafka_topics", {"bootstrap_servers": ["127.0.0.1:9"], "prefix": ""})
    assert rc != 0 and "empty prefix would match every topic" in result["msg"], result


def test_kafka_topics_reports_a_cluster_that_does_not_listen_without_waiting_on_it():
    args = {
        "bootstrap_servers": [f"127.0.0.1:{free_port()}"],
        "prefix": "streamlab-",
        "unreachable_ok": True,
    }
    rc, result = run_module("kafka_topics", args)
    assert rc == 0 and result["reachable"] is False and result["topics"] == [], result
    assert result["msg"] == "no broker answers", (
        result
    )  # the connection check, not kafka-python's 30 s
    args["unreachable_ok"] = False
    rc, result = run_module("kafka_topics", args)
    assert rc != 0 and "no broker answers on any of these addresses" in result["msg"], result


def test_kafka_topics_without_kafka_python_says_so_and_teardown_may_go_on(tmp_path):
    """A Kafka host whose Python lacks kafka-python (provisioned before the kafka role installed
    it): with unreachable_ok (teardown) Kafka is reported as not asked, and why; otherwise the
    module fails with the fix."""
    python = tmp_path / "python-without-site-packages"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    with socket.socket() as broker:  # something listens: the library is needed
        broker.bind(("127.0.0.1", 0))
        broker.listen()
        args = {
            "bootstrap_servers": [f"127.0.0.1:{broker.getsockname()[1]}"],
            "prefix": "streamlab-",
            "unreachable_ok": True,
        }
        interpreter = ("-e", f"ansible_python_interpreter={python}")
        rc, result = run_module("kafka_topics", args, *interpreter)
        assert rc == 0 and result["reachable"] is False and result["topics"] == [], result
        assert "kafka-python is missing" in result["msg"], result
        assert "run playbooks/kafka.yml" in result["msg"], result
        args["unreachable_ok"] = False
        rc, result = run_module("kafka_topics", args, *interpreter)
        assert rc != 0 and "kafka-python is missing" in result["msg"], result
