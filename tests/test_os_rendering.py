"""What the roles write on Debian, RedHat (CentOS/Rocky) and macOS hosts, checked for syntax.

Only Debian hosts can be exercised here, so tests/render/os_render.yml renders, with real Ansible
against localhost and made-up facts of each OS family, the service layer (supervisord.conf and
the systemd unit or launchd plist), every component's configuration templates and the
supervisord program of every component daemon (from the service task of each role's own
tasks/main.yml). Each file is then read back with the parser its consumer uses.

What is expected is written out here, as facts about each OS (with where they come from) and
the kit's documented defaults, never read from the roles' vars/ or defaults/: a test that copies
the kit's values only checks the kit against itself.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import plistlib
import re
import shlex
import signal
import subprocess
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_playbook, self_signed_ca_pem

ROLES = REPO / "roles"
COMPONENTS = ["zookeeper", "kafka", "flink", "storm", "spark"]


def defaults(role: str) -> dict:
    return yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())


# The kit's documented defaults (docs/configuration.md, from roles/common/meta/argument_specs.yml).
SERVICE_USER = "streamlab"
MINFDS = 16384
INSTALL = "/opt/streamlab"
DATA = "/var/lib/streamlab"
LOGS = "/var/log/streamlab"
CONF = "/etc/streamlab"
ADDRESS = "127.0.0.1"

# Facts as each family's hosts report them (Ansible's setup module on such a host), and what
# the roles must make of them, from the OS's own packages and documentation.
FAMILIES = {
    "Debian": {
        "facts": {
            "os_family": "Debian",
            "distribution": "Debian",
            "distribution_major_version": "12",
            "architecture": "x86_64",
            "service_mgr": "systemd",
        },
        # packages.debian.org, bookworm: openjdk-17-jre-headless installs the JDK under
        # /usr/lib/jvm/java-17-openjdk-<Debian architecture>; python3-venv carries the venv
        # module's ensurepip (python3 alone cannot make a virtualenv); ps and pgrep are in
        # procps, ip and tc in iproute2, nft (the fault agent's partition) in nftables, iptables
        # (its delay where the kernel has no netem: an NFQUEUE rule) in iptables.
        "packages": [
            "openjdk-17-jdk-headless",
            "python3",
            "python3-venv",
            "procps",
            "iproute2",
            "nftables",
            "iptables",
        ],
        "java_home": "/usr/lib/jvm/java-17-openjdk-amd64",
        "root_group": "root",
        "user_shell": "/usr/sbin/nologin",  # base-passwd: /usr/sbin/nologin
        "init": "systemd",
    },
    "Debian13": {
        "facts": {
            "os_family": "Debian",
            "distribution": "Debian",
            "distribution_major_version": "13",
            "architecture": "x86_64",
            "service_mgr": "systemd",
        },
        # packages.debian.org, trixie: no openjdk-17 any more; openjdk-21-jdk-headless installs
        # under /usr/lib/jvm/java-21-openjdk-<Debian architecture>; python3 is 3.13. The rest
        # as in bookworm.
        "packages": [
            "openjdk-21-jdk-headless",
            "python3",
            "python3-venv",
            "procps",
            "iproute2",
            "nftables",
            "iptables",
        ],
        "java_home": "/usr/lib/jvm/java-21-openjdk-amd64",
        "root_group": "root",
        "user_shell": "/usr/sbin/nologin",
        "init": "systemd",
    },
    "RedHat": {
        "facts": {
            "os_family": "RedHat",
            "distribution": "Rocky",
            "distribution_major_version": "9",
            "architecture": "x86_64",
            "service_mgr": "systemd",
        },
        # Rocky Linux 9 AppStream/BaseOS: java-17-openjdk-devel owns the java_sdk_17
        # alternative /usr/lib/jvm/java-17 (the -headless package only jre-17); python3 is
        # Python 3.9 and brings venv and ensurepip (python3-pip-wheel); ps and pgrep are in
        # procps-ng, ip in iproute and tc in iproute-tc (split out in EL9). The minimal install
        # has no tar and no gzip, and the kit needs neither (it unpacks with Python's tarfile);
        # nft (the fault agent's partition) is in nftables, installed with firewalld by default.
        "packages": [
            "java-17-openjdk-devel",
            "python3",
            "procps-ng",
            "iproute",
            "iproute-tc",
            "nftables",
        ],
        "java_home": "/usr/lib/jvm/java-17",
        "root_group": "root",
        "user_shell": "/sbin/nologin",  # util-linux on EL: /sbin/nologin
        "init": "systemd",
    },
    "Darwin": {
        "facts": {
            "os_family": "Darwin",
            "distribution": "MacOSX",
            "distribution_major_version": "14",
            "architecture": "arm64",
            "service_mgr": "launchd",
        },
        # Homebrew (docs.brew.sh/Installation) lives in /opt/homebrew on Apple silicon. The
        # openjdk@17 formula is keg-only and installs a macOS JDK bundle, libexec/openjdk.jdk
        # (its caveats link that bundle into /Library/Java/JavaVirtualMachines); a JDK bundle's
        # home is Contents/Home. Python comes with macOS (3.9 from the Command Line Tools).
        "packages": ["openjdk@17"],
        "java_home": "/opt/homebrew/opt/openjdk@17/libexec/openjdk.jdk/Contents/Home",
        "root_group": "wheel",  # macOS /etc/group: wheel is gid 0
        "user_shell": "/usr/bin/false",
        "init": "launchd",
    },
}
INIT_FILES = {
    "systemd": "streamlab-supervisor.service",
    "launchd": "org.streamlab.supervisor.plist",
}
JAVA = "{java_home}/bin/java"
SPARK_CLASS = f"{INSTALL}/spark/bin/spark-class"
# Program -> (role, executable, an argument the daemon cannot start without).
PROGRAMS = {
    "zookeeper": ("zookeeper", JAVA, "org.apache.zookeeper.server.quorum.QuorumPeerMain"),
    "kafka": ("kafka", JAVA, "kafka.Kafka"),
    "flink-jobmanager": ("flink", f"{INSTALL}/flink/bin/jobmanager.sh", "start-foreground"),
    # The kit's start script: Flink's home, the RPC port range (it takes the next port), state.
    "flink-taskmanager": ("flink", f"{INSTALL}/bin/streamlab-flink-taskmanager", "6130-6139"),
    "storm-nimbus": ("storm", JAVA, "org.apache.storm.daemon.nimbus.Nimbus"),
    "storm-supervisor": ("storm", JAVA, "org.apache.storm.daemon.supervisor.Supervisor"),
    "spark-master": ("spark", SPARK_CLASS, "org.apache.spark.deploy.master.Master"),
    "spark-worker": ("spark", SPARK_CLASS, "org.apache.spark.deploy.worker.Worker"),
}
INVENTORY_GROUPS = [
    "zookeeper",
    "kafka",
    "flink_jobmanager",
    "flink_taskmanager",
    "storm_nimbus",
    "storm_supervisor",
    "spark_master",
    "spark_worker",
    "driver",
]


def component_templates() -> list[dict]:
    """Each component template, with the variables its task gives it (vars): Kafka's command
    wrapper is rendered once per command of _kafka_tools, here as its first."""
    kafka_vars = yaml.safe_load((ROLES / "kafka" / "vars" / "main" / "main.yml").read_text())
    given = {"kafka/kafka-tool.sh": {"tool": kafka_vars["_kafka_tools"][0]}}
    found = []
    for role in COMPONENTS:
        for template in sorted((ROLES / role / "templates").glob("*.j2")):
            name = template.name.removesuffix(".j2")
            found.append({"role": role, "file": name, "vars": given.get(f"{role}/{name}", {})})
    return found


def walk_tasks(tasks: list[dict]) -> list[dict]:
    found = []
    for task in tasks or []:
        found.append(task)
        for key in ("block", "rescue", "always"):
            found.extend(walk_tasks(task.get(key, [])))
    return found


INCLUDE_TASKS = ("ansible.builtin.include_tasks", "include_tasks", "ansible.builtin.import_tasks")


def as_conditions(when) -> list:
    return [] if when is None else list(when) if isinstance(when, list) else [when]


def carried(inherited: dict, include: dict) -> dict:
    """An include's vars and when, with what the include_tasks around it passed on: its when
    after theirs, its vars over theirs. Both include_tasks and include_role are includes, whose
    vars Ansible gathers from the outermost in (Task.get_include_params, ansible-core 2.19), so
    the innermost include's win."""
    return {
        "vars": {**inherited.get("vars", {}), **include.get("vars", {})},
        "when": inherited.get("when", []) + as_conditions(include.get("when")),
    }


def service_includes(role: str, file: str, inherited: dict) -> list[dict]:
    """The service role's include_role tasks in roles/<role>/tasks/<file>, through include_tasks.

    An include_role reached through include_tasks gets the include_tasks' vars under its own (the
    innermost include's win: carried) and its when before its own. Vars and conditions of a
    block are not carried (no role's service include sits in one)."""
    found = []
    for task in walk_tasks(yaml.safe_load((ROLES / role / "tasks" / file).read_text())):
        nested = next((task[key] for key in INCLUDE_TASKS if key in task), None)
        if nested is not None:
            assert isinstance(nested, str) and "{{" not in nested, task
            assert "loop" not in task, f"a looped include_tasks is not followed: {task}"
            found += service_includes(role, nested, carried(inherited, task))
            continue
        include = task.get("ansible.builtin.include_role") or task.get("include_role")
        # Only the main entry point runs a daemon (fail_with_log, operate and the rest do not).
        if (
            isinstance(include, dict)
            and include.get("name") == "service"
            and include.get("tasks_from", "main") == "main"
        ):
            found.append(
                {
                    **{k: task[k] for k in ("name", "loop", "loop_control") if k in task},
                    **carried(inherited, task),
                }
            )
    return found


def program_tasks(role: str) -> list[dict]:
    """The tasks that run role's daemons under the service role, rendering program.conf.j2 instead.

    They keep the role's own vars, loop and conditions (through include_tasks too), so the
    programs get the roles' real command lines.
    """
    template = ROLES / "service" / "templates" / "program.conf.j2"
    render = (
        "{{ render_files | combine({'programs/' ~ service_name ~ '.conf':"
        f" lookup('ansible.builtin.template', {str(template)!r})}}) }}}}"
    )
    converted = [
        {
            **{k: v for k, v in task.items() if v or k == "vars"},
            "name": f"{role}: {task['name']}",
            "ansible.builtin.set_fact": {"render_files": render},
        }
        for task in service_includes(role, "main.yml", {})
    ]
    assert converted, f"roles/{role}/tasks/main.yml runs no daemon under the service role"
    return converted


def render(family: str, work: Path, settings: dict | None = None) -> tuple[Path, str]:
    """Render everything for one OS family into work/out; return it and any failure output.

    settings: inventory settings to render with (extra vars), beyond the roles' defaults."""
    inventory = work / "hosts.yml"
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "streamlab_address": ADDRESS,
    }
    groups = {group: {"hosts": {"localhost": {}}} for group in INVENTORY_GROUPS}
    inventory.write_text(
        yaml.safe_dump({"all": {"hosts": {"localhost": host}, "children": groups}})
    )
    programs = work / "programs.yml"
    tasks = [task for role in COMPONENTS for task in program_tasks(role)]
    programs.write_text(yaml.safe_dump(tasks, sort_keys=False))
    output = work / "rendered.json"
    run = run_playbook(
        "../tests/render/os_render.yml",  # run_playbook resolves playbooks against playbooks/
        inventory,
        extravars={
            "render_output": str(output),
            "render_facts": FAMILIES[family]["facts"],
            "render_templates": component_templates(),
            "render_programs": str(programs),
            **(settings or {}),
        },
        # Facts stay in memory: a persistent cache would keep this made-up "localhost".
        envvars={"ANSIBLE_CACHE_PLUGIN": "memory"},
        tmp_path=work,
    )
    if run.rc != 0 or run.failed_hosts or not output.exists():
        return work, run.output[-6000:] or f"ansible-playbook exited {run.rc}"
    rendered = json.loads(output.read_text())
    out = work / "out"
    for name, content in rendered["files"].items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(content)
    (out / "facts.json").write_text(json.dumps(rendered["facts"]))
    return out, ""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """OS family -> (directory of its rendered files, failure output); the families in parallel."""
    with ThreadPoolExecutor(len(FAMILIES)) as pool:
        jobs = {f: pool.submit(render, f, tmp_path_factory.mktemp(f)) for f in FAMILIES}
        return {family: job.result() for family, job in jobs.items()}


@pytest.fixture(params=sorted(FAMILIES))
def family(request, rendered):
    out, failure = rendered[request.param]
    assert not failure, f"rendering for {request.param} failed:\n{failure}"
    return request.param, out, json.loads((out / "facts.json").read_text())


# Parsers, as the consumers of the files read them.


def supervisor_config(path: Path, program: str = "") -> configparser.RawConfigParser:
    """supervisord's reading: ';'/'#' inline comments, then %-expansion of the values."""
    parser = configparser.RawConfigParser(inline_comment_prefixes=(";", "#"), strict=True)
    parser.read_string(path.read_text(), str(path))
    expansions = {
        "here": str(path.parent),
        "host_node_name": "node1",
        "program_name": program,
        "group_name": program,
        "process_num": 0,
        "numprocs": 1,
    }
    for section in parser.sections():
        for key, value in parser.items(section):
            try:
                parser.set(section, key, value % expansions)
            except (KeyError, ValueError) as error:
                pytest.fail(
                    f"{path} [{section}] {key}: supervisord cannot expand {value!r}, {error}"
                )
    return parser


def supervisor_environment(value: str) -> dict[str, str]:
    """supervisor.datatypes.dict_of_key_value_pairs: KEY="value",KEY2="value2"."""
    lexer = shlex.shlex(value)
    lexer.wordchars += "/.+-():"
    tokens = list(lexer)
    pairs = {}
    for i in range(0, len(tokens), 4):
        key, equals, val = (tokens[i : i + 3] + ["", "", ""])[:3]
        assert equals == "=" and key, f"malformed environment near {tokens[i:]}: {value!r}"
        assert i + 3 == len(tokens) or tokens[i + 3] == ",", f"missing comma in {value!r}"
        pairs[key] = val.strip("'\"")
    return pairs


def supervisor_bool(value: str) -> bool:
    assert value.lower() in ("true", "false", "yes", "no", "on", "off", "1", "0"), value
    return value.lower() in ("true", "yes", "on", "1")


def systemd_unit(path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(
        comment_prefixes=("#", ";"), strict=True, interpolation=None, delimiters=("=",)
    )
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(path.read_text(), str(path))
    return parser


def java_properties(path: Path, separator: str = "=") -> dict[str, str]:
    """Every line that is not blank or a comment is one key<separator>value (no continuations)."""
    pattern = re.compile(r"([^\s=:]+)\s*=\s*(.*)" if separator == "=" else r"(\S+)\s+(\S.*)")
    properties: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        match = pattern.fullmatch(line)
        assert match, f"{path.name}:{number}: not key{separator}value: {raw!r}"
        assert not line.endswith("\\"), f"{path.name}:{number}: continuation line {raw!r}"
        key, value = match.groups()
        assert key not in properties, f"{path.name}:{number}: {key} set twice"
        properties[key] = value.strip()
    assert properties, f"{path.name} sets nothing"
    return properties


# The service layer.


def test_platform_facts_come_from_the_os_vars(family):
    name, _, facts = family
    want = FAMILIES[name]
    assert facts["common_java_home"] == want["java_home"]
    assert facts["common_root_group"] == want["root_group"]
    assert facts["user_shell"] == want["user_shell"]
    assert facts["service_manager"] == want["init"]
    assert facts["common_address"] == ADDRESS
    assert facts["packages"] == want["packages"]


def test_supervisord_conf(family):
    _, out, facts = family
    conf = supervisor_config(out / "common" / "supervisord.conf")
    assert set(conf.sections()) == {
        "unix_http_server",
        "supervisord",
        "rpcinterface:supervisor",
        "supervisorctl",
        "include",
    }
    socket = conf.get("unix_http_server", "file")
    assert socket.startswith("/") and socket.endswith(".sock")
    assert int(conf.get("unix_http_server", "chmod"), 8) == 0o700
    assert conf.get("supervisorctl", "serverurl") == f"unix://{socket}"
    assert conf.getint("supervisord", "minfds") == MINFDS
    assert conf.getint("supervisord", "minprocs") > 0
    assert Path(conf.get("supervisord", "pidfile")).parent == Path(socket).parent
    assert conf.get("supervisord", "logfile") == f"{LOGS}/supervisord.log"
    assert conf.get("include", "files") == f"{CONF}/supervisor.d/*.conf"
    assert facts["common_supervisor_programs"] == f"{CONF}/supervisor.d"
    assert facts["common_supervisor_conf"] == f"{CONF}/supervisord.conf"


def test_init_system_runs_the_kits_supervisord(family):
    name, out, facts = family
    init = FAMILIES[name]["init"]
    rendered = {p.name for p in (out / "common").iterdir()} & set(INIT_FILES.values())
    assert rendered == {INIT_FILES[init]}, f"{name} should get only its {init} definition"
    supervisord = str(Path(facts["common_python"]).parent / "supervisord")  # the kit's venv
    assert Path(supervisord).is_absolute() and supervisord == f"{INSTALL}/venv/bin/supervisord"
    conf = ["-c", f"{CONF}/supervisord.conf"]
    # supervisord stops its programs one after the other: the init system must wait that long.
    programs = sorted((out / "programs").glob("*.conf"))
    assert len(programs) == len(PROGRAMS), "one host runs every daemon of the kit here"
    stop_waits = sum(
        int(supervisor_config(path).get(f"program:{path.stem}", "stopwaitsecs"))
        for path in programs
    )
    if init == "systemd":
        unit = systemd_unit(out / "common" / INIT_FILES[init])
        assert unit.sections() == ["Unit", "Service", "Install"]
        assert shlex.split(unit.get("Service", "ExecStart")) == [supervisord, "--nodaemon", *conf]
        reload = shlex.split(unit.get("Service", "ExecReload"))
        assert reload == [f"{INSTALL}/venv/bin/supervisorctl", *conf, "reload"]
        # systemd.service(5): Restart= defaults to no, which leaves a crashed supervisord down.
        assert unit.get("Service", "Restart", fallback="no") in ("on-failure", "always")
        # systemd.kill(5): the default KillMode=control-group sends SIGTERM to every process of
        # the unit at once (every JVM), bypassing supervisord's ordered stop; mixed signals
        # supervisord alone and SIGKILLs only what is left after TimeoutStopSec.
        assert unit.get("Service", "KillMode", fallback="control-group") == "mixed"
        assert int(unit.get("Service", "TimeoutStopSec", fallback="90")) >= stop_waits
        assert int(unit.get("Service", "LimitNOFILE")) == MINFDS
        assert unit.get("Install", "WantedBy") == "multi-user.target"
        assert "network-online.target" in unit.get("Unit", "After").split()
        assert "network-online.target" in unit.get("Unit", "Wants").split()
    else:
        job = plistlib.loads((out / "common" / INIT_FILES[init]).read_bytes(), fmt=plistlib.FMT_XML)
        assert job["Label"] == "org.streamlab.supervisor"
        # silent: supervisord's log goes to its own rotated logfile, not to launchd's file too.
        assert job["ProgramArguments"] == [supervisord, "--nodaemon", "--silent", *conf]
        assert job["RunAtLoad"] is True and job["KeepAlive"] is True
        # launchd.plist(5): without StandardOutPath/StandardErrorPath a job's output is lost,
        # and a supervisord that fails at start says nothing while launchd restarts it.
        launchd_log = f"{LOGS}/supervisord-launchd.log"
        assert job.get("StandardOutPath") == launchd_log
        assert job.get("StandardErrorPath") == launchd_log
        # launchd.plist(5): ExitTimeOut is the time between SIGTERM and SIGKILL at stop.
        assert job.get("ExitTimeOut", 20) >= stop_waits
        assert job["SoftResourceLimits"] == {"NumberOfFiles": MINFDS}


# The kit's own firewall where none runs, on by default (firewall_enabled: auto): nftables on
# Linux, nothing on macOS (pf is not built; preflight refuses firewall_enabled: true there).
# nft(8) lives in /usr/sbin on Debian 12/13 and Rocky 9 (package nftables).
NFT = "/usr/sbin/nft"


def test_the_kits_firewall_is_a_valid_nftables_ruleset_loaded_at_boot(family, tmp_path):
    name, out, _ = family
    firewall = out / "firewall"
    if FAMILIES[name]["init"] == "launchd":
        assert not firewall.exists(), "macOS gets no nftables files by default"
        return
    ports = (firewall / "ports.nft").read_text()
    refuse = "add rule inet streamlab refuse"
    assert f"{refuse} tcp dport {{ 9092, 6700-6703 }} counter reject with tcp reset" in ports
    assert f"{refuse} udp dport {{ 6190 }} counter reject" in ports
    table = (firewall / "firewall.nft").read_text()
    assert f'include "{CONF}/firewall.d/*.nft"' in table
    # nft(8) checks the whole ruleset, with this daemon's ports, without applying it (-c).
    (tmp_path / "firewall.d").mkdir()
    (tmp_path / "firewall.d" / "kafka.nft").write_text(ports)
    # Another daemon of the same host with a port and a range that overlap (Flink's JobManager
    # and TaskManager share the metric query range on a one-host lab).
    overlapping = "add rule inet streamlab refuse tcp dport { 9092, 6701-6710 } reject\n"
    (tmp_path / "firewall.d" / "other.nft").write_text(overlapping)
    checked = tmp_path / "firewall.nft"
    checked.write_text(table.replace(f"{CONF}/firewall.d", str(tmp_path / "firewall.d")))
    done = subprocess.run([NFT, "-c", "-f", str(checked)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # Sources: the host's cluster address and the control node, nothing else.
    assert re.search(r"elements = \{ 10\.0\.0\.1, 127\.0\.0\.1 \}", table), table
    unit = systemd_unit(firewall / "streamlab-firewall.service")
    assert shlex.split(unit.get("Service", "ExecStart")) == [NFT, "-f", f"{CONF}/firewall.nft"]
    assert (
        unit.get("Service", "Type") == "oneshot" and unit.get("Service", "RemainAfterExit") == "yes"
    )
    # In force before the network is up and before supervisord starts any daemon.
    assert {"network-pre.target", "streamlab-supervisor.service"} <= set(
        unit.get("Unit", "Before").split()
    )
    assert unit.get("Unit", "DefaultDependencies") == "no"
    assert unit.get("Install", "WantedBy") == "sysinit.target"


# The supervisord programs of the component daemons.


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_program_definition(family, program):
    name, out, _ = family
    role, executable, argument = PROGRAMS[program]
    java_home = FAMILIES[name]["java_home"]
    path = out / "programs" / f"{program}.conf"
    assert path.exists(), f"roles/{role} defines no supervisord program {program}"
    conf = supervisor_config(path, program)
    assert conf.sections() == [f"program:{program}"]
    section = dict(conf.items(f"program:{program}"))

    argv = shlex.split(section["command"])
    assert argv[0] == executable.format(java_home=java_home)
    assert argument in argv[1:]
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag == "-cp":
            assert all(entry.startswith("/") for entry in value.split(":")), value
    assert section["user"] == SERVICE_USER
    assert section["directory"].startswith(f"{DATA}/")
    assert section["stdout_logfile"] == f"{LOGS}/{program}.out"
    assert supervisor_bool(section["autostart"]) is True
    assert supervisor_bool(section["autorestart"]) is False
    assert supervisor_bool(section["stopasgroup"]) and supervisor_bool(section["killasgroup"])
    assert hasattr(signal, f"SIG{section['stopsignal']}"), section["stopsignal"]
    assert int(section["stopwaitsecs"]) > 0 and int(section["startsecs"]) >= 0
    # After a reboot supervisord can start before the host's address exists: a start that fails
    # is retried, 1, 2, 3 ... s apart, for at least half a minute before the daemon counts as
    # FATAL (supervisord's startretries; the default 3 gives 6 s, 0 none).
    retries = int(section.get("startretries", "3"))
    assert retries * (retries + 1) // 2 >= 30, f"startretries={retries}"

    environment = supervisor_environment(section.get("environment", ""))
    if role in ("zookeeper", "kafka"):
        assert "environment" not in section  # the JDK comes from the command line alone
    else:
        assert environment["JAVA_HOME"] == java_home
        paths = {k: v for k, v in environment.items() if k.endswith(("_HOME", "_DIR"))}
        assert all(path.startswith("/") for path in paths.values()), paths
    if role == "spark":
        assert environment["SPARK_LOCAL_IP"] == ADDRESS
        assert environment["SPARK_NO_DAEMONIZE"] == "true"
    if role == "flink":
        assert environment["FLINK_CONF_DIR"] == f"{CONF}/flink"


def test_every_daemon_has_a_program(family):
    _, out, _ = family
    assert sorted(p.stem for p in (out / "programs").glob("*.conf")) == sorted(PROGRAMS)


# The components' configuration files.


def check_zoo_cfg(path: Path, java_home: str) -> None:
    cfg = java_properties(path)
    assert cfg["dataDir"] == f"{DATA}/zookeeper"
    assert cfg["clientPortAddress"] == ADDRESS
    assert int(cfg["clientPort"]) == 2181 and int(cfg["tickTime"]) > 0
    assert cfg["4lw.commands.whitelist"] == "ruok,mntr"  # only what health needs
    assert not [key for key in cfg if key.startswith("server.")], "one host is standalone"


def check_zookeeper_logback(path: Path, java_home: str) -> None:
    root = ET.parse(path).getroot()
    assert root.tag == "configuration"
    assert root.findtext("appender/file") == f"{LOGS}/zookeeper/zookeeper.log"


def check_server_properties(path: Path, java_home: str) -> None:
    props = java_properties(path)
    assert props["node.id"] == "1"
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == f"1@{ADDRESS}:9093"
    assert props["listeners"] == f"PLAINTEXT://{ADDRESS}:9092,CONTROLLER://{ADDRESS}:9093"
    assert props["log.dirs"] == f"{DATA}/kafka"
    assert props["default.replication.factor"] == "1" and props["min.insync.replicas"] == "1"
    assert props["auto.create.topics.enable"] in ("true", "false")


def check_kafka_client_properties(path: Path, java_home: str) -> None:
    """The kit's clients connect in PLAINTEXT unless kafka_sasl_enabled (off by default); the
    Python clients read the file as the Java ones do."""
    from producer.kafka_security import client_settings, parse_properties

    props = parse_properties(path.read_text())
    assert props == java_properties(path) == {"security.protocol": "PLAINTEXT"}
    assert client_settings(props) == {}


def test_kafka_sasl_ssl_configuration(tmp_path):
    """kafka_sasl_enabled: the brokers' SASL_SSL listener and the clients' file, which the Python
    clients read into a working TLS context (the Java ones: the lab's experiments)."""
    from producer.kafka_security import client_settings, parse_properties

    pki = tmp_path / "pki"
    pki.mkdir()
    (pki / "ca.pem").write_text(self_signed_ca_pem("kit CA"))
    password = "a-test-password-0123456789"
    (tmp_path / "render").mkdir()
    out, failure = render(
        "Debian",
        tmp_path / "render",
        {
            "kafka_sasl_enabled": True,
            "kafka_sasl_password": password,
            "kafka_tls_dir": str(pki),
            "_kafka_keystore_password": "the-key-store-password",
        },
    )
    assert not failure, failure
    server = java_properties(out / "kafka" / "server.properties")
    assert server["listeners"] == f"SASL_SSL://{ADDRESS}:9092,CONTROLLER://{ADDRESS}:9093"
    assert server["advertised.listeners"] == f"SASL_SSL://{ADDRESS}:9092"
    assert server["inter.broker.listener.name"] == "SASL_SSL"
    assert server["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
    assert server["sasl.enabled.mechanisms"] == server["sasl.mechanism.inter.broker.protocol"]
    assert server["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert server["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="streamlab" password="{password}";'
    )
    assert server["ssl.keystore.type"] == "PKCS12"
    assert server["ssl.keystore.location"] == "/etc/streamlab/kafka/tls/broker.p12"
    assert server["ssl.keystore.password"] == "the-key-store-password"
    assert server["ssl.truststore.location"] == "/etc/streamlab/kafka/tls/ca.pem"
    client = parse_properties((out / "kafka" / "kafka-client.properties").read_text())
    assert client["ssl.truststore.certificates"] == (pki / "ca.pem").read_text().strip()
    settings = client_settings(client)
    assert settings["sasl_plain_username"] == "streamlab"
    assert settings["sasl_plain_password"] == password
    assert [c["subject"] for c in settings["ssl_context"].get_ca_certs()] == [
        ((("commonName", "kit CA"),),)
    ]


def check_log4j2_properties(path: Path, java_home: str) -> None:
    props = java_properties(path)
    names = {v for k, v in props.items() if re.fullmatch(r"appender\.[^.]+\.name", k)}
    refs = {v for k, v in props.items() if k.endswith(".ref")}
    assert refs and refs <= names, f"appender references {refs - names} are not defined"
    assert props["rootLogger.level"].lower() in ("trace", "debug", "info", "warn", "error")


def check_flink_config(path: Path, java_home: str) -> None:
    config = yaml.safe_load(path.read_text())
    assert isinstance(config, dict)
    assert all(isinstance(value, str) for value in config.values()), config
    assert config["jobmanager.rpc.address"] == ADDRESS
    assert config["rest.address"] == ADDRESS and config["taskmanager.host"] == ADDRESS
    # Flink's default, a new id for each TaskManager process (not one a restarted process shares).
    assert "taskmanager.resource-id" not in config
    assert config["taskmanager.numberOfTaskSlots"] == "2"
    assert config["taskmanager.rpc.port"] == "6130-6139"  # each start takes one (-D)
    assert config["io.tmp.dirs"] == f"{DATA}/flink/tmp"
    assert config["web.submit.enable"] == "false"  # no jar upload through the REST port
    assert "--add-opens=java.base/java.lang=ALL-UNNAMED" in config["env.java.opts.all"].split()


def check_storm_yaml(path: Path, java_home: str) -> None:
    config = yaml.safe_load(path.read_text())
    assert config["storm.zookeeper.servers"] == [ADDRESS]
    assert config["nimbus.seeds"] == [ADDRESS]
    assert config["storm.local.hostname"] == ADDRESS
    assert config["storm.local.dir"] == f"{DATA}/storm"
    # Storm's config validation rejects numbers written as strings.
    for key in ("storm.zookeeper.port", "nimbus.thrift.port", "supervisor.thrift.port", "ui.port"):
        assert type(config[key]) is int, f"{key}: {config[key]!r}"
    assert config["supervisor.slots.ports"] == [6700, 6701]
    assert None not in config.values()
    assert "%HEAP-MEM%" in config["worker.childopts"]


def java_shell_script(path: Path, java_home: str) -> str:
    """A /bin/sh script that sh parses and that execs the OS family's java; its text."""
    text = path.read_text()
    assert text.startswith("#!/bin/sh\n")
    syntax = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True, check=False)
    assert syntax.returncode == 0, syntax.stderr
    assert f"exec {java_home}/bin/java " in text
    return text


def check_storm_probe(path: Path, java_home: str) -> None:
    text = java_shell_script(path, java_home)
    # The probe's directory is named after a hash of the role's StormProbe.java (as the file
    # lookup reads it: without trailing white space).
    version = defaults("storm")["storm_version"]
    source = (ROLES / "storm" / "files" / "StormProbe.java").read_text().rstrip()
    digest = hashlib.sha256(source.encode())
    assert f"/storm-probe/{version}-{digest.hexdigest()[:12]}:" in text


def check_kafka_tool(path: Path, java_home: str) -> None:
    """kafka-topics.sh: the release's class on the tools' own classpath, with the cluster's
    brokers and the kit's client configuration unless the caller gives them."""
    text = java_shell_script(path, java_home)
    assert f"-cp '{INSTALL}/kafka/tools-libs/*' org.apache.kafka.tools.TopicCommand" in text
    assert f"--bootstrap-server {ADDRESS}:9092 " in text
    assert "--command-config /etc/streamlab/kafka-client.properties " in text


def check_kafka_tools_log4j2(path: Path, java_home: str) -> None:
    text = path.read_text()
    assert "appender.stderr.target = SYSTEM_ERR" in text and "rootLogger.level = WARN" in text


def check_spark_defaults(path: Path, java_home: str) -> None:
    props = java_properties(path, separator=" ")
    assert props["spark.master"] == f"spark://{ADDRESS}:7077"
    assert props["spark.local.dir"] == f"{DATA}/spark/local"
    # Authentication is on by default, with a secret generated on the control node beside the
    # inventory (out/spark/spark-defaults.conf is rendered in the directory of hosts.yml).
    secret = path.parents[2] / ".secrets" / "spark-authenticate-secret"
    assert props["spark.authenticate"] == "true"
    assert props["spark.authenticate.secret"] == secret.read_text().strip()
    assert len(props["spark.authenticate.secret"]) == 32
    assert oct(secret.stat().st_mode & 0o777) == "0o600"
    assert oct(secret.parent.stat().st_mode & 0o777) == "0o700"


CONFIG_CHECKS = {
    "zookeeper/zoo.cfg": check_zoo_cfg,
    "zookeeper/logback.xml": check_zookeeper_logback,
    "kafka/server.properties": check_server_properties,
    "kafka/log4j2.properties": check_log4j2_properties,
    "kafka/kafka-client.properties": check_kafka_client_properties,
    "kafka/kafka-tool.sh": check_kafka_tool,
    "kafka/tools-log4j2.properties": check_kafka_tools_log4j2,
    "flink/config.yaml": check_flink_config,
    "storm/storm.yaml": check_storm_yaml,
    "storm/storm-probe.sh": check_storm_probe,
    "spark/spark-defaults.conf": check_spark_defaults,
    "spark/log4j2.properties": check_log4j2_properties,
}


def test_every_component_template_is_checked():
    templates = {f"{t['role']}/{t['file']}" for t in component_templates()}
    assert templates == set(CONFIG_CHECKS), "add a check for each new template (or drop old ones)"


@pytest.mark.parametrize("name", sorted(CONFIG_CHECKS))
def test_component_config(family, name):
    family_name, out, _ = family
    CONFIG_CHECKS[name](out / name, FAMILIES[family_name]["java_home"])


# Across the families.


def test_the_families_differ_where_the_os_does(rendered):
    java = {}
    for name, (out, failure) in rendered.items():
        assert not failure, f"rendering for {name} failed:\n{failure}"
        kafka = supervisor_config(out / "programs" / "kafka.conf").get("program:kafka", "command")
        java[name] = shlex.split(kafka)[0]
    assert len(set(java.values())) == len(FAMILIES), java
    # Between the Linux families only the JDK differs.
    debian, redhat = (rendered[f][0] / "programs" / "zookeeper.conf" for f in ("Debian", "RedHat"))
    debian_jdk, redhat_jdk = FAMILIES["Debian"]["java_home"], FAMILIES["RedHat"]["java_home"]
    assert debian.read_text() != redhat.read_text()
    assert debian.read_text().replace(debian_jdk, redhat_jdk) == redhat.read_text()
