"""Shared helpers: run playbooks with ansible-playbook against the repository's inventories."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lab"))
import processes  # noqa: E402  (tests/lab/processes.py, shared with the test-host scripts)

# Shared with the benches; the tests import them from here.
from labutil import bridge_address_and_routes, lab_group_vars, tcp_connects  # noqa: E402, F401

LAB_INVENTORY = REPO / "inventory" / "lab" / "hosts.yml"
# Messages per second of the lab tests' experiments (tests/studies/lab-study.yml says it too):
# at 2,000/s the shared cores could not keep up and Storm's runs spent most of their time draining
# (docs/testing.md); at 500/s a Storm run may still be flagged overloaded, but it drains within
# the collector's quiet period.
LAB_EXPERIMENT_RATE = 500
# The embedded default: this machine, over a local connection.
LOCAL_INVENTORY = REPO / "inventory" / "local"
# Programs an archive tool could be: none may be on the PATH where the kit unpacks without tar.
ARCHIVERS = frozenset(
    {"tar", "gtar", "bsdtar", "gzip", "gunzip", "zcat", "pigz", "xz", "bzip2", "unzip"}
)
# Programs the tests start look ansible-playbook up on PATH: the one beside this interpreter.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


@dataclass
class PlaybookRun:
    rc: int
    changed: dict[str, int]
    failed_hosts: set[str]
    output: str

    def changed_nothing_on(self, hosts: Iterable[str]) -> bool:
        """PLAY RECAP lists exactly these hosts, none with a change: a recap that lists no host
        (the playbook stopped before any play) proves nothing."""
        return set(self.changed) == set(hosts) and not any(self.changed.values())


def playbook_command(playbook: str, inventory: Path | str, *arguments: str) -> list[str]:
    """ansible-playbook (the one beside this interpreter) on playbooks/<playbook>."""
    return [
        str(Path(sys.executable).parent / "ansible-playbook"),
        *("-i", str(inventory)),
        str(REPO / "playbooks" / playbook),
        *arguments,
    ]


# A host's line of PLAY RECAP: `node1   : ok=372  changed=0    unreachable=0    failed=0 ...`.
RECAP_LINE = re.compile(
    r"(?P<host>\S+)\s+: ok=\d+\s+changed=(?P<changed>\d+)\s+"
    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)\b"
)
ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
# Numbers the output files run_playbook keeps in a test's tmp_path.
_PLAYBOOK_RUNS = itertools.count(1)


def recap(output: str) -> tuple[dict[str, int], set[str]] | None:
    """Changed tasks per host, and the hosts that failed or could not be reached, from the last
    PLAY RECAP of the default callback's output; None when there is none (the playbook stopped
    before its first play). A host line it cannot read fails the test rather than being left
    out, which would make a check over every host's changes pass on nothing."""
    _, found, tail = ANSI_COLOUR.sub("", output).rpartition("PLAY RECAP")
    if not found:
        return None
    changed: dict[str, int] = {}
    failed: set[str] = set()
    for text in tail.splitlines():
        if " : ok=" not in text:
            continue
        line = RECAP_LINE.match(text)
        assert line, f"a PLAY RECAP line this helper cannot read: {text!r}"
        changed[line["host"]] = int(line["changed"])
        if int(line["failed"]) or int(line["unreachable"]):
            failed.add(line["host"])
    return changed, failed


def run_playbook(
    playbook: str,
    inventory: Path | str,
    extravars: dict | None = None,
    envvars: dict | None = None,
    limit: str | None = None,
    tmp_path: Path | None = None,
) -> PlaybookRun:
    """Run playbooks/<playbook> with the ansible-playbook beside this interpreter; its exit code,
    changed tasks per host and failed hosts (from PLAY RECAP), and its output (stdout and stderr
    as one stream). With tmp_path, the whole output is also kept there
    (playbook-<n>-<name>.log): a failed assertion shows only its tail.

    Not through ansible-runner, which the kit's studies use: its event callback serialises every
    task's result and the runner writes each event to a file, which slows a playbook down on the
    cores the test hosts share (docs/testing.md).

    Extra vars go inline as JSON, as the runner passed them (from a file, ansible-core 2.19
    would treat their strings as templates). The environment is this process's with the
    repository's ansible.cfg, the default output callback without colour (PLAY RECAP is read
    from it), facts cached in memory for this run only and no retry files; output unbuffered,
    so stderr's lines come where they were written. Host keys are checked as a user's run
    checks them: the lab's inventory names its known hosts file.
    """
    command = playbook_command(playbook, inventory)
    if extravars:
        command += ["-e", json.dumps(extravars)]
    if limit:
        command += ["--limit", limit]
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_CACHE_PLUGIN": "memory",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "PYTHONUNBUFFERED": "1",
        **(envvars or {}),
    }
    done = subprocess.run(
        command,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
        check=False,
    )
    if tmp_path is not None:
        name = playbook.replace("/", "_").removesuffix(".yml")
        Path(tmp_path).mkdir(parents=True, exist_ok=True)
        (Path(tmp_path) / f"playbook-{next(_PLAYBOOK_RUNS)}-{name}.log").write_text(done.stdout)
    summary = recap(done.stdout)
    assert summary is not None or done.returncode != 0, (
        f"{playbook} passed but printed no PLAY RECAP:\n{done.stdout[-3000:]}"
    )
    changed, failed = summary or ({}, set())
    return PlaybookRun(done.returncode, changed, failed, done.stdout)


class BackgroundPlaybook:
    """run_playbook in a thread, for tests that act while a playbook runs; join() gives its run."""

    def __init__(self, playbook: str, inventory: Path | str, **options: object) -> None:
        self._outcome: list[PlaybookRun] = []
        self._thread = threading.Thread(
            target=lambda: self._outcome.append(run_playbook(playbook, inventory, **options))
        )
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout_s: float | None = None) -> PlaybookRun:
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"the playbook still runs after {timeout_s} s"
        return self._outcome[0]


def start_playbook(playbook: str, *arguments: str) -> subprocess.Popen:
    """ansible-playbook playbooks/<playbook> on the test hosts, in a session of its own (the
    test signals its process group as a terminal would) and with its output discarded."""
    return subprocess.Popen(
        playbook_command(playbook, LAB_INVENTORY, *arguments),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
        start_new_session=True,
    )


def kill_control_node(playbook: subprocess.Popen) -> None:
    """What a dead control node does to a running ansible-playbook: SIGKILL to it and every process
    below it. Its process group is not enough: ansible-core's workers call setsid, so they would
    outlive a killpg and wait for ever on a connection that is gone."""
    below = processes.descendants(playbook.pid)
    os.killpg(playbook.pid, signal.SIGKILL)
    for pid in below:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    playbook.wait(timeout=10)
    wait_until(
        lambda: [pid for pid in below if processes.alive(pid)], lambda left: not left, "killed", 10
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# Three hosts Ansible reaches with a local connection, and every group of every component on
# them: one host where a group needs exactly one.
LOCAL_HOSTS = ("a", "b", "c")
LOCAL_COMPONENT_GROUPS = {
    "zookeeper": LOCAL_HOSTS,
    "kafka": LOCAL_HOSTS,
    "flink_jobmanager": ("a",),
    "flink_taskmanager": ("b", "c"),
    "storm_nimbus": ("a",),
    "storm_supervisor": ("b", "c"),
    "spark_master": ("a",),
    "spark_worker": ("b", "c"),
}


def local_inventory(
    tmp_path: Path, hosts: dict[str, dict], groups: dict[str, Sequence[str]]
) -> Path:
    """An inventory file of hosts that Ansible reaches with a local connection (hosts: name ->
    its own variables; groups: name -> its hosts). Each host has a loopback address of its own
    as its cluster address unless its variables give one, as a real inventory gives IP
    addresses: the kit's firewall, on by default, cannot take a host name as a source."""
    local = {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
    }
    inventory = tmp_path / "hosts.yml"
    children = {name: {"hosts": {host: {} for host in members}} for name, members in groups.items()}
    addressed = {
        name: {**local, "streamlab_address": f"127.0.0.{index}", **variables}
        for index, (name, variables) in enumerate(hosts.items(), start=1)
    }
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": addressed,
                    "children": children,
                }
            }
        )
    )
    return inventory


def local_preflight(
    tmp_path: Path,
    hosts: dict[str, dict],
    groups: dict[str, Sequence[str]],
    components: list[str],
    extravars: dict | None = None,
) -> PlaybookRun:
    """preflight.yml for some components on an inventory of hosts that Ansible reaches with a
    local connection (hosts: name -> its own variables; groups: name -> its hosts)."""
    return run_playbook(
        "preflight.yml",
        local_inventory(tmp_path, hosts, groups),
        extravars={"preflight_components": components, **(extravars or {})},
        tmp_path=tmp_path,
    )


def run_module(
    module: str, args: dict, *flags: str, path: str = "/usr/bin:/bin"
) -> tuple[int, dict]:
    """Run one of the roles' modules the way a playbook does, through ansible on localhost.

    flags: more ansible options, such as --check or --diff; path: the PATH ansible and the
    module see. Returns the exit code and the result.
    """
    completed = subprocess.run(
        [str(Path(sys.executable).parent / "ansible"), "localhost", "-m", module]
        + ["-a", json.dumps(args), *flags],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={
            "ANSIBLE_LIBRARY": ":".join(str(path) for path in sorted(REPO.glob("roles/*/library"))),
            "ANSIBLE_MODULE_UTILS": ":".join(
                str(path) for path in sorted(REPO.glob("roles/*/module_utils"))
            ),
            "ANSIBLE_LOCALHOST_WARNING": "false",
            "ANSIBLE_LOAD_CALLBACK_PLUGINS": "true",
            "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
            "PATH": path,
        },
        check=False,
    )
    try:
        result = json.loads(completed.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError):
        result = {"msg": completed.stdout + completed.stderr}
    return completed.returncode, result


def set_daemon(daemon: str, state: str, host: str, tmp_path: Path) -> PlaybookRun:
    """Put one daemon on one test host in a state through playbooks/service.yml."""
    run = run_playbook(
        "service.yml",
        LAB_INVENTORY,
        limit=host,
        tmp_path=tmp_path,
        extravars={"daemon": daemon, "daemon_state": state},
    )
    assert run.rc == 0, run.output[-4000:]
    return run


@contextmanager
def daemon_down(daemon: str, how: str, host: str, tmp_path: Path) -> Iterator[PlaybookRun]:
    """Stop or kill a daemon for the with block; it is started again however the block ends.

    A failing test then leaves the test hosts as it found them for the tests after it.
    """
    try:
        yield set_daemon(daemon, how, host, tmp_path)
    finally:
        set_daemon(daemon, "started", host, tmp_path)


def wait_until(
    probe: Callable[[], object],
    done: Callable[[object], bool],
    what: str,
    timeout_s: float = 120,
    retry_on: tuple[type[Exception], ...] = (OSError,),
) -> object:
    """Call probe() every second until done(result); fail with the last result at the timeout.

    Errors in retry_on (a daemon between states refuses or drops requests) count as not done.
    """
    deadline = time.monotonic() + timeout_s
    seen: object = None
    while time.monotonic() < deadline:
        try:
            seen = probe()
        except retry_on as error:
            seen = error
        if not isinstance(seen, Exception) and done(seen):
            return seen
        time.sleep(1)
    pytest.fail(f"{what} not reached within {timeout_s}s; last saw {seen!r}")


# How the tests log in to a test host: the lab key, host keys checked against the lab's list.
LAB_SSH_OPTIONS = (
    *("-i", "/srv/lab/ssh/id_ed25519", "-o", "BatchMode=yes"),
    *("-o", "UserKnownHostsFile=/srv/lab/ssh/known_hosts"),
)


def on_lab_host(
    address: str, *command: str, timeout_s: float = 60, input_text: str | None = None
) -> subprocess.CompletedProcess:
    """Run a command as root on a test host over SSH, input_text on its standard input; the
    caller checks the exit code."""
    return subprocess.run(
        ["ssh", *LAB_SSH_OPTIONS, f"root@{address}", *command],
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


# Every path the kit keeps under its configuration and install directories, with its size and
# modification time (compiled Python left out: running the kit's programs writes it), hashed; then
# each supervisord program with its pid, so a restarted daemon changes the state too.
_LAB_HOST_STATE = (
    "find /etc/streamlab /opt/streamlab -name __pycache__ -prune -o -printf '%p %s %T@\\n' 2>&1"
    " | sort | sha256sum; /opt/streamlab/venv/bin/supervisorctl -c /etc/streamlab/supervisord.conf"
    " status | awk '{print $1, $2, $4}'"
)


def lab_hosts_state(lab: dict[str, str]) -> dict[str, str]:
    """Per test host: a digest of the kit's directories and each daemon's state and pid."""
    states = {}
    for name, address in lab.items():
        done = on_lab_host(address, _LAB_HOST_STATE)
        assert done.stdout.strip(), f"{name}: no state read: {done.stderr}"
        states[name] = done.stdout
    return states


# The test hosts' networks (tests/lab/testhosts.py: SUBNET_PREFIX, and SECOND_PREFIX of the hosts
# with a second interface).
LAB_NETWORKS = ("10.77.0.0/24", "10.78.0.0/24")
# The cut-off's nftables table, named after the test session's process.
_CUT_OFF_TABLE_PREFIX = "streamlab_test_ssh_only_"


def _remove_stale_cut_offs() -> None:
    """Remove the cut-off tables of test sessions that were killed (their process is gone, or
    its number is now this session's): left in place they would drop this session's traffic."""
    listed = subprocess.run(
        ["nft", "-j", "list", "tables", "inet"], capture_output=True, text=True, check=True
    )
    for entry in json.loads(listed.stdout)["nftables"]:
        name = entry.get("table", {}).get("name", "")
        if not name.startswith(_CUT_OFF_TABLE_PREFIX):
            continue
        pid = name.removeprefix(_CUT_OFF_TABLE_PREFIX)
        if pid == str(os.getpid()) or not Path(f"/proc/{pid}").exists():
            subprocess.run(["nft", "delete", "table", "inet", name], check=True)


def _dropped_packets(table: str) -> int:
    """New connections (and UDP flows) the cut-off has dropped so far (its counting rule)."""
    listed = subprocess.run(
        ["nft", "-j", "list", "table", "inet", table], capture_output=True, text=True, check=True
    )
    rules = [
        entry["rule"]["expr"] for entry in json.loads(listed.stdout)["nftables"] if "rule" in entry
    ]
    counting = [rule for rule in rules if any("counter" in expression for expression in rule)]
    assert len(counting) == 1, f"not the cut-off's one counting rule in {table}:\n{listed.stdout}"
    return sum(e["counter"]["packets"] for e in counting[0] if "counter" in e)


@contextmanager
def control_node_reaches_only_ssh(lab: dict[str, str]) -> Iterator[None]:
    """While it lasts, this machine (the control node) reaches the test hosts over SSH only: any
    other packet it sends to their addresses is dropped (an nftables output chain in its own
    network namespace; the hosts still reach one another). So is a control node that sees the
    cluster through a bastion or a firewall admitting SSH alone.

    It proves itself first: a connection to Kafka's port times out (a Kafka that is down would
    refuse it at once) and the rule counts it. At the end it fails if anything in the block
    opened a connection to the hosts other than over SSH, even if the work was then done another
    way. Only new connections count: the last packets of one closed just before (an ACK to a
    late FIN) are dropped too, but they were no attempt to reach the cluster."""
    _remove_stale_cut_offs()
    table = f"{_CUT_OFF_TABLE_PREFIX}{os.getpid()}"
    networks = ", ".join(LAB_NETWORKS)
    rules = f"""table inet {table} {{
  chain output {{
    type filter hook output priority 0; policy accept;
    ip daddr {{ {networks} }} tcp dport 22 accept
    ip daddr {{ {networks} }} ct state new counter drop
    ip daddr {{ {networks} }} drop
  }}
}}
"""
    subprocess.run(["nft", "-f", "-"], input=rules, text=True, check=True)
    try:
        address = lab["node1"]
        assert tcp_connects(address, 22), f"SSH to {address} refused: the cut-off is too wide"
        started = time.monotonic()
        assert not tcp_connects(address, 9092, timeout_s=2), f"Kafka at {address} answers"
        assert time.monotonic() - started >= 2, "Kafka's port was refused, not cut off"
        proof = _dropped_packets(table)
        assert proof > 0, "the cut-off's rule saw no connection to Kafka's port"
        yield
        dropped = _dropped_packets(table) - proof
        assert dropped == 0, f"{dropped} new connections to the test hosts (not SSH) were dropped"
    finally:
        subprocess.run(["nft", "delete", "table", "inet", table], check=False)


def flink_cli_run(
    lab: dict[str, str],
    jar: Path,
    remote_jar: str,
    options: Sequence[str] = (),
    program_arguments: Sequence[str] = (),
) -> str:
    """Copy a job jar to the JobManager host (node1) and submit it there with the Flink CLI,
    detached, as the kit does: `flink run --detached OPTIONS REMOTE_JAR PROGRAM_ARGUMENTS`.
    Returns the job id the CLI printed."""
    copied = subprocess.run(
        ["scp", "-q", *LAB_SSH_OPTIONS, str(jar), f"root@{lab['node1']}:{remote_jar}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert copied.returncode == 0, copied.stderr
    submitted = on_lab_host(
        lab["node1"],
        *("env", "FLINK_CONF_DIR=/etc/streamlab/flink", "/opt/streamlab/flink/bin/flink"),
        *("run", "--detached", *options, remote_jar, *program_arguments),
        timeout_s=120,
    )
    found = re.search(r"JobID ([0-9a-f]{32})", submitted.stdout)
    assert found, submitted.stdout + submitted.stderr
    return found.group(1)


def storm_probe(lab: dict[str, str], *args: str) -> dict:
    """What Nimbus reports, through the storm-probe command the storm role installs on node1."""
    done = on_lab_host(lab["node1"], "/opt/streamlab/bin/storm-probe", *args)
    return json.loads(done.stdout)


def role_default(role: str, name: str) -> object:
    """A role's default value of a setting (roles/<role>/defaults/main.yml)."""
    return yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())[name]


# The Kafka client properties file an experiment writes on the hosts its clients start on.
LAB_KAFKA_CLIENT_CONFIG = "/etc/streamlab/kafka-client.properties"


def lab_inventory_copy(directory: Path, change: Callable[[dict], object]) -> Path:
    """A copy of the lab inventory in directory, altered by change(data), with the lab's
    group_vars beside it (Kafka's SASL_SSL, Flink's TLS: without them a playbook would ask both
    with the roles' defaults and find neither answering). Its hosts.yml."""
    shutil.copytree(LAB_INVENTORY.parent / "group_vars", directory / "group_vars")
    data = yaml.safe_load(LAB_INVENTORY.read_text())
    change(data)
    path = directory / "hosts.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def lab_pki(component: str) -> Path:
    """The directory on this control node of the CA and certificates the kit made for a
    component's TLS (kafka or flink): the lab's <component>_tls_dir, else the role's default,
    ~/.streamlab/<component>-pki (the default's HOME lookup is the only template in it)."""
    setting = f"{component}_tls_dir"
    configured = lab_group_vars().get(setting)
    if configured:
        return Path(configured)
    default = str(role_default(component, setting))
    expanded = default.replace("{{ lookup('ansible.builtin.env', 'HOME') }}", str(Path.home()))
    assert "{{" not in expanded, f"{component}'s {setting} default has a template: {default}"
    return Path(expanded)


def lab_kafka_settings() -> dict[str, object]:
    """kafka-python keyword arguments that reach the test hosts' Kafka the way the kit's clients do.

    SASL_SSL with the lab's SCRAM user and the kit's CA (on this control node, kafka_tls_dir) when
    the lab turns kafka_sasl_enabled on; nothing (PLAINTEXT) otherwise.
    """
    from producer.kafka_security import client_settings

    group_vars = lab_group_vars()
    if not group_vars.get("kafka_sasl_enabled"):
        return {}
    username = group_vars.get("kafka_sasl_username", role_default("kafka", "kafka_sasl_username"))
    ca = lab_pki("kafka") / "ca.pem"
    return client_settings(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'x required username="{username}" '
            f'password="{group_vars["kafka_sasl_password"]}";',
            "ssl.truststore.location": str(ca),
        }
    )


def taskmanager_rpc_port(taskmanager_id: str) -> int:
    """The RPC port in a TaskManager's id as the JobManager lists it (<address>:<port>-<random>)."""
    return int(taskmanager_id.split(":")[1].split("-")[0])


def flink_rest(
    lab: dict[str, str],
    path: str,
    body: bytes | None = None,
    headers: dict | None = None,
    method: str | None = None,
    timeout_s: float = 30,
    tls: bool | None = None,
) -> object:
    """What the JobManager on node1 answers on its REST API (JSON), the way the kit asks it:
    over HTTPS, verifying its certificate and address with Flink's CA on this control node
    (flink_tls_dir), when the lab turns flink_tls_rest on (or tls says so); plain HTTP
    otherwise."""
    import ssl
    import urllib.request

    context, scheme = None, "http"
    use_tls = lab_group_vars().get("flink_tls_rest") if tls is None else tls
    if use_tls:
        context = ssl.create_default_context(cafile=str(lab_pki("flink") / "ca.pem"))
        scheme = "https"
    request = urllib.request.Request(
        f"{scheme}://{lab['node1']}:8081{path}", data=body, headers=headers or {}, method=method
    )
    with urllib.request.urlopen(request, timeout=timeout_s, context=context) as answer:
        return json.load(answer)


def self_signed_ca_pem(common_name: str) -> str:
    """A certificate authority's certificate (PEM) for a day, as a trust store to read."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def lab_hosts() -> dict[str, str]:
    """Host name -> address of the test hosts built by `make lab`."""
    data = yaml.safe_load(LAB_INVENTORY.read_text())
    return {name: spec["ansible_host"] for name, spec in data["all"]["hosts"].items()}


@pytest.fixture(scope="session")
def lab() -> dict[str, str]:
    """The running test hosts; fails (never skips) when they are missing."""
    if not LAB_INVENTORY.exists():
        pytest.fail("no test hosts: run `make lab` (as root) first")
    status = subprocess.run(
        ["python3", str(REPO / "tests" / "lab" / "testhosts.py"), "status"],
        capture_output=True,
        text=True,
        check=False,
    )
    if status.returncode != 0:
        pytest.fail(f"test hosts are not all up:\n{status.stdout}{status.stderr}")
    return lab_hosts()


# The session's second site.yml run, right after the first (test_lab_foundation.py checks that
# it changed nothing).
SECOND_SITE_RUN = pytest.StashKey["PlaybookRun"]()


@pytest.fixture(scope="session")
def converged(
    lab: dict[str, str], tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, str]:
    """The test hosts after site.yml (once per test session), which this machine runs reaching
    the hosts over SSH only: every health check asks from a host of the cluster. It runs twice
    in a row, and the second run is kept in the session's stash for the idempotence test, which
    therefore checks a re-run right after a converge (not after the faults of other tests), and
    the session pays for one extra converge instead of two, whichever tests are selected."""
    with control_node_reaches_only_ssh(lab):
        first = run_playbook("site.yml", LAB_INVENTORY, tmp_path=tmp_path_factory.mktemp("site"))
        assert first.rc == 0, first.output[-6000:]
        second = run_playbook("site.yml", LAB_INVENTORY, tmp_path=tmp_path_factory.mktemp("site"))
    request.config.stash[SECOND_SITE_RUN] = second
    return lab


PASSED_PHASES = pytest.StashKey[set]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Which phases of a test passed (in its stash), for fixtures that clean up only after a
    failure."""
    report = yield
    if report.passed:
        item.stash.setdefault(PASSED_PHASES, set()).add(report.when)
    return report


def setup_and_call_passed(request: pytest.FixtureRequest) -> bool:
    """In a fixture's teardown: did the test's setup and call both pass?"""
    return {"setup", "call"} <= request.node.stash.get(PASSED_PHASES, set())


# ---------------------------------------------------------------- the analysis' Spark session

# Tests that use the `spark` fixture and have not run yet; the session stops after the last
# one, so a later test (test_lab_spark.py) gets a session of its own from getOrCreate().
_SPARK_USERS: set[str] = set()
_SPARK_SESSION: list = []


# A lab test's limit covers its fixtures too: the first one converges fresh test hosts (two
# site.yml runs). tests/test_lab_study.py sets a longer one for the whole study it runs.
LAB_TEST_TIMEOUT_S = 3300


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test on the local Kafka broker (tests/local_kafka.py: a JVM that must serve within its
    start deadline) is a realtime test too, whichever module it is in. A lab test without a
    limit of its own gets LAB_TEST_TIMEOUT_S."""
    for item in items:
        if "kafka_broker" in item.fixturenames:
            item.add_marker(pytest.mark.realtime)
        if item.get_closest_marker("lab") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(LAB_TEST_TIMEOUT_S))


# make test sets this: a test skipped there (a missing tool, not root) fails the run, as a test
# that did not run proves nothing. Elsewhere a skip stays a skip.
NO_SKIPS = "STREAMLAB_NO_SKIPS"
_SKIPPED: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get(NO_SKIPS) == "1" and _SKIPPED and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if os.environ.get(NO_SKIPS) == "1" and _SKIPPED:
        terminalreporter.write_line(
            f"{NO_SKIPS}=1: {len(_SKIPPED)} test(s) skipped, which fails the run: "
            + ", ".join(_SKIPPED),
            red=True,
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    """The tests that will run (after -k/-m deselection) and use the session."""
    _SPARK_USERS.update(item.nodeid for item in session.items if "spark" in item.fixturenames)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    _SPARK_USERS.discard(item.nodeid)
    if not _SPARK_USERS and _SPARK_SESSION:
        _SPARK_SESSION.pop().stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for the analysis tests (2 cores, no UI, few shuffle partitions).

    Python workers are pointed at a missing interpreter: the analysis must run entirely in the
    JVM (no UDF, no RDD map), as its executors on the lab's cluster have no copy of the kit.
    """
    from analysis import session

    saved = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = "/nonexistent/python-workers-are-not-used"
    try:
        built = session.build("local[2]", {"spark.sql.shuffle.partitions": "4"}, driver_memory="1g")
    finally:
        if saved is None:
            del os.environ["PYSPARK_PYTHON"]
        else:
            os.environ["PYSPARK_PYTHON"] = saved
    _SPARK_SESSION.append(built)
    yield built
    if _SPARK_SESSION:
        _SPARK_SESSION.pop().stop()
