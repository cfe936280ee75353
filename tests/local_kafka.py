"""A throwaway single-node KRaft Kafka broker on 127.0.0.1, from the kit's artifact cache.

Import the `kafka_broker` fixture into a test module (session scope). The jars come from the
artifact cache that site.yml fills (~/.cache/streamlab/artifacts, or $STREAMLAB_CACHE_DIR): an
unpacked kafka directory with libs/*.jar, or the cached bundle kafka-<version>-*.tar.gz, which
is unpacked into the session's tmp directory. Storage is formatted and the broker started the
way roles/kafka does it (kafka.tools.StorageTool format, then kafka.Kafka server.properties).
A machine without the jars fails the tests that need the broker, with the way to get them.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, free_port

# The kafka role's cluster id generator (roles/kafka/files), so the broker here is formatted the
# same way.
_SPEC = importlib.util.spec_from_file_location(
    "kafka_cluster_id", REPO / "roles" / "kafka" / "files" / "kafka_cluster_id.py"
)
kafka_cluster_id = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(kafka_cluster_id)

START_TIMEOUT_S = 60
HEAP = "-Xmx512m"
HOW_TO_GET_KAFKA = (
    "run `make lab` and then playbooks/site.yml on the lab inventory once (or `make test`): "
    "site.yml fills the artifact cache with the Kafka bundle; or point STREAMLAB_CACHE_DIR at "
    "a cache that has it"
)
LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.console.ref = STDOUT
"""


@dataclass(frozen=True)
class LocalBroker:
    bootstrap: str  # 127.0.0.1:PORT
    workdir: Path
    log: Path


def cache_dir() -> Path:
    """The kit's artifact cache on this machine (roles/artifact/defaults/main.yml)."""
    configured = os.environ.get("STREAMLAB_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "streamlab" / "artifacts"


def _is_kafka_home(directory: Path) -> bool:
    libs = directory / "libs"
    return libs.is_dir() and any(libs.glob("kafka_2.13-*.jar"))


UNPACKED = ("kafka_2.13-*", "kafka-*", "*/kafka_2.13-*", "*/kafka-*")


def find_kafka(cache: Path, unpack_to: Path) -> Path | None:
    """A directory with libs/kafka_2.13-*.jar: unpacked in the cache, or from its bundle."""
    for root in (cache, cache.parent):
        for pattern in UNPACKED:
            for home in sorted(root.glob(pattern), reverse=True):  # the newest version first
                if _is_kafka_home(home):
                    return home
    for bundle in sorted(cache.glob("bundles/kafka-*.tar.gz"), reverse=True):
        with tarfile.open(bundle) as archive:
            archive.extractall(unpack_to, filter="data")
        for home in sorted(unpack_to.glob("*/")):
            if _is_kafka_home(home):
                return home
    return None


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        pytest.fail(
            "no java on PATH (or JAVA_HOME) to run the local Kafka broker: install a JRE 17"
        )
    return found


def server_properties(workdir: Path, port: int, controller_port: int) -> str:
    return "\n".join(
        [
            "node.id=1",
            "process.roles=broker,controller",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={workdir / 'data'}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "min.insync.replicas=1",
            "auto.create.topics.enable=false",
            "group.initial.rebalance.delay.ms=0",
            "",
        ]
    )


def wait_until_serving(bootstrap: str, process: subprocess.Popen[bytes], log: Path) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the local Kafka broker exited ({process.returncode}):\n{tail(log)}")
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, bootstrap_timeout_ms=2000)
        except KafkaError:
            time.sleep(0.3)
            continue
        try:
            admin.list_topics()
            return
        except KafkaError:
            time.sleep(0.3)
        finally:
            admin.close()
    pytest.fail(f"the local Kafka broker did not serve within {START_TIMEOUT_S} s:\n{tail(log)}")


def tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    """A running single-node broker for the session; killed at the end. Fails, never skips."""
    workdir = tmp_path_factory.mktemp("kafka")
    home = find_kafka(cache_dir(), workdir / "dist")
    if home is None:
        pytest.fail(f"no Kafka jars in the artifact cache {cache_dir()}: {HOW_TO_GET_KAFKA}")
    port, controller_port = free_port(), free_port()
    properties = workdir / "server.properties"
    properties.write_text(server_properties(workdir, port, controller_port))
    (workdir / "log4j2.properties").write_text(LOG4J2)
    base = [
        java(),
        HEAP,
        f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}",
        f"-Dkafka.logs.dir={workdir / 'logs'}",
        "-cp",
        f"{home / 'libs'}/*",
    ]
    cluster_id = kafka_cluster_id.new_cluster_id()
    formatted = subprocess.run(
        [*base, "kafka.tools.StorageTool", "format", "--cluster-id", cluster_id]
        + ["--config", str(properties)],
        capture_output=True,
        text=True,
        check=False,
    )
    if formatted.returncode != 0:
        pytest.fail(f"formatting the local Kafka storage failed:\n{formatted.stderr[-3000:]}")
    log = workdir / "broker.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*base, "kafka.Kafka", str(properties)], stdout=output, stderr=subprocess.STDOUT
        )
    try:
        bootstrap = f"127.0.0.1:{port}"
        wait_until_serving(bootstrap, process, log)
        yield LocalBroker(bootstrap, workdir, log)
    finally:
        stop(process)
