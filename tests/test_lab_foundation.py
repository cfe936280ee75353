"""ZooKeeper and Kafka provisioned over real SSH on the network-namespace test hosts."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from conftest import (
    SECOND_SITE_RUN,
    daemon_down,
    lab_hosts_state,
    lab_inventory_copy,
    lab_kafka_settings,
    on_lab_host,
    run_playbook,
    wait_until,
)

pytestmark = pytest.mark.lab


def zookeeper_says(address: str, word: str) -> str:
    with socket.create_connection((address, 2181), timeout=5) as connection:
        connection.sendall(word.encode())
        return b"".join(iter(lambda: connection.recv(65536), b"")).decode()


def live_brokers(addresses: list[str]) -> list[int]:
    admin = KafkaAdminClient(
        bootstrap_servers=[f"{a}:9092" for a in addresses],
        request_timeout_ms=5000,
        **lab_kafka_settings(),
    )
    try:
        return sorted(
            b["broker_id"] for b in admin.describe_cluster()["brokers"] if not b.get("is_fenced")
        )
    finally:
        admin.close()


def wait_for_brokers(addresses: list[str], count: int) -> list[int]:
    return wait_until(
        lambda: live_brokers(addresses),
        lambda seen: len(seen) == count,
        f"{count} live brokers",
        timeout_s=90,
        retry_on=(OSError, KafkaError),
    )


def test_second_run_changes_nothing(converged, lab, request):
    """site.yml run again right after the session's first converge (conftest's `converged`
    runs both, under the SSH-only cut-off) changes nothing on any host."""
    second = request.config.stash[SECOND_SITE_RUN]
    assert second.rc == 0, second.output[-6000:]
    assert second.changed_nothing_on(lab), second.changed


def test_zookeeper_ensemble_has_one_leader_and_synced_followers(converged):
    states = {}
    for name, address in converged.items():
        assert zookeeper_says(address, "ruok") == "imok", name
        metrics = dict(line.split("\t", 1) for line in zookeeper_says(address, "mntr").splitlines())
        states[name] = metrics["zk_server_state"]
        if metrics["zk_server_state"] == "leader":
            assert metrics["zk_synced_followers"] == str(len(converged) - 1)
    assert sorted(states.values()) == ["follower", "follower", "leader"], states
    # Only what health needs is answered: no sessions, clients or configuration to strangers.
    for word in ("stat", "cons", "conf", "envi", "dump"):
        assert "is not executed because it is not in the whitelist" in zookeeper_says(
            converged["node1"], word
        ), word


# What root runs or writes, and every directory above it: the service account must not be able
# to replace any of them (supervisord's socket and log, the daemons' stdout logs, job jars,
# fault schedules, the run files of the producer and collector, the kit's programs).
ROOT_ONLY = (
    "/var/lib/streamlab",
    "/var/lib/streamlab/supervisor",
    "/var/lib/streamlab/faults",
    "/var/log/streamlab",
    "/var/log/streamlab/supervisord.log",
    "/var/log/streamlab/kafka.out",
    "/etc/streamlab",
    "/etc/streamlab/supervisord.conf",
    "/etc/streamlab/supervisor.d",
    "/opt/streamlab",
    "/opt/streamlab/bin",
    "/opt/streamlab/venv/bin",
)
DRIVER_ROOT_ONLY = ("/var/lib/streamlab/runs", "/opt/streamlab/driver/producer")
# What the service account must write (so the check can tell the two apart).
ACCOUNT_WRITES = ("/var/lib/streamlab/kafka", "/var/log/streamlab/kafka")


def test_the_service_account_cannot_replace_what_root_runs_or_writes(converged):
    for name, address in converged.items():
        paths = ROOT_ONLY + (DRIVER_ROOT_ONLY if name == "node1" else ())
        script = "; ".join(
            f"runuser -u streamlab -- test -w {path} && echo writable {path}"
            for path in (*paths, *ACCOUNT_WRITES)
        )
        done = on_lab_host(address, script + "; true")  # ssh hands it to the host's shell
        writable = {line.split(" ", 1)[1] for line in done.stdout.splitlines()}
        assert writable == set(ACCOUNT_WRITES), (name, writable, done.stderr)


def test_kafka_lists_every_broker_and_round_trips_1000_messages(converged):
    addresses = list(converged.values())
    assert live_brokers(addresses) == [1, 2, 3]
    bootstrap = [f"{a}:9092" for a in addresses]
    topic = f"roundtrip-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **lab_kafka_settings())
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])
    admin.close()
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", retries=5, **lab_kafka_settings()
    )
    futures = [producer.send(topic, str(i).encode()) for i in range(1000)]
    producer.flush(timeout=60)
    assert all(f.get(timeout=30).offset >= 0 for f in futures)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        **lab_kafka_settings(),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
    )
    received = [int(record.value) for record in consumer]
    consumer.close()
    assert len(received) == 1000
    assert sorted(received) == list(range(1000))


def test_the_kafka_commands_users_reach_for_work_on_a_kafka_host(converged):
    """kafka-topics.sh, kafka-console-producer.sh, kafka-console-consumer.sh and
    kafka-consumer-groups.sh on node2, given no broker and no client configuration: they find
    the cluster and connect as the kit's clients do (SASL_SSL on the test hosts)."""
    bin_dir = "/opt/streamlab/bin"
    topic = f"tools-{uuid.uuid4().hex[:8]}"
    group = f"tools-group-{uuid.uuid4().hex[:8]}"
    node2 = converged["node2"]
    made = on_lab_host(
        node2, f"{bin_dir}/kafka-topics.sh", "--create", "--topic", topic, "--partitions", "1"
    )
    assert made.returncode == 0, made.stdout + made.stderr
    listed = on_lab_host(node2, f"{bin_dir}/kafka-topics.sh", "--list")
    assert listed.returncode == 0 and topic in listed.stdout.split(), listed.stderr
    sent = on_lab_host(
        node2, f"echo tools-message | {bin_dir}/kafka-console-producer.sh --topic {topic}"
    )
    assert sent.returncode == 0, sent.stderr
    read = on_lab_host(
        node2,
        f"{bin_dir}/kafka-console-consumer.sh",
        *("--topic", topic, "--group", group, "--from-beginning", "--max-messages", "1"),
        *("--timeout-ms", "30000"),
    )
    assert read.returncode == 0 and read.stdout.split() == ["tools-message"], read.stderr
    groups = on_lab_host(node2, f"{bin_dir}/kafka-consumer-groups.sh", "--list")
    assert groups.returncode == 0 and group in groups.stdout.split(), groups.stderr


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_service_layer_stops_and_starts_one_broker(converged, tmp_path, how):
    addresses = list(converged.values())
    with daemon_down("kafka", how, "node3", tmp_path) as down:
        assert down.changed == {"node3": 1}
        assert wait_for_brokers(addresses, 2) == [1, 2]
    assert wait_for_brokers(addresses, 3) == [1, 2, 3]


def bad_inventory(tmp_path: Path, change) -> Path:
    """A copy of the lab inventory (with its group_vars) whose groups change(groups) altered."""
    return lab_inventory_copy(tmp_path / "inventory", lambda data: change(data["all"]["children"]))


# On the test hosts: site.yml stops before any change, for a rule on the inventory's groups and
# for rules on each host's settings. Every rule's own message: test_preflight_rules.py.
@pytest.mark.parametrize(
    "name,change,extravars,message",
    [
        (
            "even zookeeper group",
            lambda g: g["zookeeper"]["hosts"].pop("node3"),
            {},
            "needs an odd number",
        ),
        (
            "short spark secret",
            lambda g: None,
            {"spark_authenticate_secret": "short"},
            "and spark_authenticate_secret is shorter than 16 characters",
        ),
        (
            "one worker with another secret",
            lambda g: g["spark_worker"]["hosts"]["node2"].update(
                spark_authenticate_secret="another-secret-of-enough-length"
            ),
            {},
            "differ in spark_authenticate or spark_authenticate_secret",
        ),
    ],
)
def test_bad_input_stops_before_any_change(converged, tmp_path, name, change, extravars, message):
    inventory = bad_inventory(tmp_path, change)
    before = lab_hosts_state(converged)
    run = run_playbook("site.yml", inventory, extravars=extravars, tmp_path=tmp_path)
    assert run.rc != 0, f"{name}: the play went through"
    assert message in " ".join(run.output.split()), run.output[-3000:]
    assert run.changed_nothing_on(converged), run.changed
    # Not only an empty recap: no file of the kit changed and no daemon restarted on any host.
    assert lab_hosts_state(converged) == before


def test_a_host_whose_key_is_not_known_is_not_reached(converged, tmp_path):
    """The tests' playbooks check host keys as a user's do: with a known hosts file that lacks
    the lab's keys, node1 is unreachable and nothing runs there."""
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    # ControlPath=none: a master connection an earlier run left open would skip the check.
    args = f"-o UserKnownHostsFile={empty} -o StrictHostKeyChecking=yes -o ControlPath=none"
    inventory = lab_inventory_copy(
        tmp_path / "unknown",
        lambda data: data["all"]["vars"].update(ansible_ssh_common_args=args),
    )
    run = run_playbook("health.yml", inventory, limit="node1", tmp_path=tmp_path)
    assert run.rc != 0 and run.failed_hosts == {"node1"}, run.output[-3000:]
    assert "host key" in run.output.lower(), run.output[-3000:]
