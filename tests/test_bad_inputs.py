"""The bad-input battery: each bad -e given to a playbook a user runs (site, experiment, fault,
teardown, redeploy, health, service) and each bad study spec is refused before any change, with a
message that names the setting and says what to give instead.

"No change" is the hosts' state as well as the recap: the playbooks run on hosts Ansible
reaches with a local connection, with the kit's directories (common_install_dir and the others)
given with -e under the test's own directory, so anything the kit installed, wrote or started in
them would be there: the tree must still be absent afterwards, and no process may name it. (What
the kit changes outside its directories, packages, the service account, firewall rules, is
covered by the recap only.)
The study refusals go through `streamlab-study` itself: no run is started and no results
directory created. The playbooks whose refusals need a cluster's view (a topic, a job) are
tried on the test hosts (tests/test_lab_experiment.py, tests/test_lab_faults.py)."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from analysis.study import __main__ as study_cli
from conftest import LOCAL_COMPONENT_GROUPS, LOCAL_HOSTS, local_inventory, run_playbook

GROUPS = {"driver": ("a",), **LOCAL_COMPONENT_GROUPS}
KIT_DIRECTORIES = ("install", "data", "log", "conf")

# playbook, the bad -e, what the refusal says (each piece, whitespace folded)
PLAYBOOK_CASES = [
    # site.yml: its preflight, before the first component play (each preflight rule's own
    # refusal is in tests/test_preflight_rules.py, run through preflight.yml)
    ("site.yml", {"spark_worker_cores": "abc"}, ["'spark_worker_cores' is of type str", "int"]),
    ("site.yml", {"common_user": "root"}, ["common_user=root", "Leave common_user out"]),
    (
        "site.yml",
        {"kafka_heep_mb": 512},
        ["-e kafka_heep_mb=512 (did you mean kafka_heap_mb?)", "leave it out"],
    ),
    # experiment.yml: its checks, before the producer is installed on the driver host
    ("experiment.yml", {"engine": "samza"}, ["engine=samza is not an engine", "give -e engine="]),
    ("experiment.yml", {"engine": "flink", "rate": 0}, ["rate=0 must be", "e.g. -e rate=2000"]),
    ("experiment.yml", {"engine": "storm", "count": -5}, ["count=-5 must be a whole number"]),
    ("experiment.yml", {"engine": "flink", "fault": "meteor"}, ["fault=meteor", "give -e fault="]),
    (
        "experiment.yml",
        {"engine": "flink", "warmup_s": 60, "count": 1000},
        ["warmup_s=60 covers the whole run", "lower -e warmup_s or raise -e count"],
    ),
    (
        "experiment.yml",
        {"engine": "flink", "fault": "kill_taskmanager", "fault_at_s": 200},
        ["fault_at_s=200", "end"],
    ),
    (
        "experiment.yml",
        {"engine": "flink", "drain_timeout_s": 5, "quiet_s": 10},
        ["drain_timeout_s=5 must be longer than quiet_s=10", "raise -e drain_timeout_s"],
    ),
    (
        "experiment.yml",
        {"engine": "flink", "lost_wait_s": 400},
        ["lost_wait_s=400 must be shorter than", "lower -e lost_wait_s"],
    ),
    (
        "experiment.yml",
        {"engine": "flink", "sink_max_in_flight": 9},
        ["sink_max_in_flight=9", "lower -e sink_max_in_flight"],
    ),
    ("experiment.yml", {"engine": "storm", "run_id": "a/b"}, ["run_id=a/b may only hold"]),
    ("experiment.yml", {"engine": "flink", "analyze_on": "moon"}, ["analyze_on=moon", "give -e"]),
    (
        "experiment.yml",
        {"engine": "flink", "checkpoint_interval_s": 0},
        ["checkpoint_interval_s=0 must be a whole number from 1 to 86400"],
    ),
    (
        "experiment.yml",
        {"engine": "storm", "storm_message_timeout_s": 0},
        ["storm_message_timeout_s=0 must be a whole number from 1 to 86400"],
    ),
    # Another engine's setting is checked too, against its manifest's maximum and choices.
    (
        "experiment.yml",
        {"engine": "flink", "storm_max_spout_pending": 2000000},
        ["storm_max_spout_pending=2000000 must be a whole number from 1 to 1000000"],
    ),
    (
        "experiment.yml",
        {"engine": "storm", "storm_wait_strategy": "spin"},
        ["storm_wait_strategy=spin must be one of park, progressive"],
    ),
    (
        "experiment.yml",
        {"engine": "flink", "guarantee": "twice"},
        [
            "guarantee=twice is not a delivery guarantee",
            "at_most_once, at_least_once, exactly_once",
        ],
    ),
    (
        "experiment.yml",
        {"engine": "spark", "guarantee": "exactly_once"},
        [
            "guarantee=exactly_once is not offered by spark",
            "Spark's Kafka sink is at-least-once only",
            "give -e guarantee=NAME with NAME one of at_least_once",
        ],
    ),
    (
        "experiment.yml",
        {"engine": "flink", "guarantee": "exactly_once", "sink_idempotence": False},
        ["guarantee=exactly_once needs sink_idempotence=true"],
    ),
    (
        "experiment.yml",
        {"engine": "flink", "delivery": "exactly_once"},
        ["-e delivery=exactly_once", "no setting of this playbook has that name"],
    ),
    (
        "experiment.yml",
        {"engine": "flink", "checkpiont_interval_s": 60},
        ["-e checkpiont_interval_s=60 (did you mean"],
    ),
    # fault.yml: its checks, before the agent is installed on the target
    ("fault.yml", {"fault": "meteor"}, ["fault=meteor is not a fault", "give -e fault=NAME"]),
    (
        "fault.yml",
        {"fault": "kill_taskmanager", "duration_s": -1},
        ["duration_s=-1 must be a whole number of 0 or more", "give -e duration_s=N"],
    ),
    (
        "fault.yml",
        {"fault": "kill_taskmanager", "duration_s": 0},
        ["duration_s=0 must be at least 1 second", "e.g. -e duration_s=20"],
    ),
    (
        "fault.yml",
        {"fault": "network_partition", "duration_s": 3600},
        ["duration_s=3600 is longer than fault_max_duration_s=900", "shorten it"],
    ),
    (
        "fault.yml",
        {"fault": "kill_taskmanager", "target": "nowhere"},
        ["target=nowhere is not a host of the inventory", "give one of a, b, c"],
    ),
    (
        "fault.yml",
        {"fault": "network_delay", "delay_ms": -5},
        ["delay_ms=-5 must be a whole number of 0 or more"],
    ),
    (
        "fault.yml",
        {"fault": "kill_taskmanager", "fault_every_s": "abc"},
        ["fault_every_s=abc must be a whole number", "give -e fault_every_s=N"],
    ),
    (
        "fault.yml",
        {"fault": "kill_taskmanager", "duration_s": 10, "fault_every_s": 5, "fault_count": 3},
        ["fault_every_s=5 must be longer than duration_s=10", "raise -e fault_every_s"],
    ),
    ("fault.yml", {"fault": "pause_process"}, ["pause_process needs", "give -e daemon=NAME"]),
    (
        "fault.yml",
        {"fault": "kill_taskmanager", "engine": "samza"},
        ["engine=samza is not an engine the kit runs experiments on", "or leave engine out"],
    ),
    (
        "fault.yml",
        {"fault": "kill_taskmanager", "fault_count": 0},
        ["fault_count=0 must be at least 1", "e.g. -e fault_count=1"],
    ),
    (
        "fault.yml",
        {"fault": "kill_storm_worker", "engine": "flink"},
        ["fault=kill_storm_worker does not fit engine=flink", "pick one that fits flink"],
    ),
    ("fault.yml", {"fault": "kill_taskmanager", "duraton_s": 5}, ["(did you mean duration_s?)"]),
    # teardown.yml, redeploy.yml: before any host is changed
    ("teardown.yml", {"confirm": "maybe"}, ["confirm=maybe is neither", "give -e confirm=yes"]),
    ("teardown.yml", {"purg": "true"}, ["-e purg=true (did you mean purge?)"]),
    ("redeploy.yml", {}, ["redeploy removes every topic", "give -e confirm=yes"]),
    (
        "redeploy.yml",
        {"confirm": "yes", "purge": "true"},
        ["redeploy resets the runtime state only", "to purge, run playbooks/teardown.yml"],
    ),
    ("redeploy.yml", {"confirm": "yes", "purgee": "no"}, ["-e purgee=no (did you mean purge?)"]),
    # health.yml, service.yml
    ("health.yml", {"zookeeper_client_prot": 2181}, ["(did you mean zookeeper_client_port?)"]),
    (
        "service.yml",
        {"daemon": "nosuch", "daemon_state": "started"},
        ["daemon=nosuch is not a daemon the kit runs", "give one of zookeeper"],
    ),
    (
        "service.yml",
        {"daemon": "kafka", "daemon_state": "sleeping"},
        ["service_daemon_state must be one of: started", "got: sleeping"],
    ),
]

STUDY_BASE = """\
description: a bad spec
engines: [flink, storm]
parameters:
  count: 20000
  rate: 1000
"""
# spec text, the key the refusal names, what it says
STUDY_CASES = [
    (STUDY_BASE.replace("[flink, storm]", "[flink, samza]"), "engines[1]", ["samza"]),
    (STUDY_BASE + "repetitions: 0\n", "repetitions", ["at least 1"]),
    (STUDY_BASE + "  checkpiont_interval_s: 5\n", "parameters.checkpiont_interval_s", ["mean"]),
    (STUDY_BASE + "faults:\n  - {fault: meteor}\n", "faults[0].fault", ["meteor"]),
    (STUDY_BASE + "  warmup_s: 30\n", "parameters.warmup_s", ["covers the whole"]),
    (STUDY_BASE + "name: Big Study\n", "name", ["lower-case"]),
    (STUDY_BASE.replace("rate: 1000", "rate: -3"), "parameters.rate", ["-3", "above 0"]),
]


def kit_directories(root: Path) -> dict[str, str]:
    """The kit's directories for the local hosts, all under root."""
    return {f"common_{name}_dir": str(root / name) for name in KIT_DIRECTORIES}


def state(root: Path) -> tuple[list[str], list[str]]:
    """What the kit keeps under root (every path with its size and modification time) and the
    command lines of the processes that name root."""
    paths = sorted(
        f"{path.relative_to(root)} {path.lstat().st_size} {path.lstat().st_mtime_ns}"
        for path in root.rglob("*")
    )
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    return paths, [line for line in ps.stdout.splitlines() if str(root) in line]


def unreachable_inventory(tmp_path: Path) -> Path:
    """Hosts no connection reaches: a refusal that failed would fail on them, not change them."""
    hosts = {host: {"ansible_host": "192.0.2.1", "ansible_connection": "ssh"} for host in "abc"}
    inventory = tmp_path / "unreachable.yml"
    inventory.write_text(f"all:\n  hosts: {hosts}\n")
    return inventory


def case_id(playbook: str, extravars: dict) -> str:
    return f"{playbook}-{','.join(f'{k}={v}' for k, v in extravars.items()) or 'none'}"


@pytest.mark.parametrize(
    ("playbook", "extravars", "said"),
    PLAYBOOK_CASES,
    ids=[case_id(playbook, extravars) for playbook, extravars, _ in PLAYBOOK_CASES],
)
def test_a_bad_input_to_a_playbook_is_refused_before_any_change(
    tmp_path, playbook, extravars, said
):
    root = tmp_path / "kit"
    before = state(root)
    # redeploy.yml with confirm=yes would tear the hosts down if its refusal failed.
    inventory = (
        unreachable_inventory(tmp_path)
        if playbook == "redeploy.yml"
        else local_inventory(tmp_path, {host: {} for host in LOCAL_HOSTS}, GROUPS)
    )
    given = {**extravars, **kit_directories(root)}
    if playbook == "experiment.yml":
        given["experiment_results_dir"] = str(root / "results")
    run = run_playbook(playbook, inventory, extravars=given, tmp_path=tmp_path)
    output = " ".join(run.output.split())
    assert run.rc != 0, run.output[-3000:]
    for piece in said:
        assert piece in output, run.output[-3000:]
    # PLAY RECAP was read and lists no change on any host the playbook reached.
    assert run.changed and not any(run.changed.values()), run.changed
    assert state(root) == before == ([], [])


@pytest.mark.parametrize(("text", "key", "said"), STUDY_CASES, ids=[k for _, k, _ in STUDY_CASES])
def test_a_bad_study_spec_is_refused_before_any_run(tmp_path, capsys, text, key, said):
    spec = tmp_path / "study.yml"
    spec.write_text(textwrap.dedent(text))
    results = tmp_path / "results"

    def no_run(*args, **kwargs):
        raise AssertionError("a run was started for a refused spec")

    code = study_cli.main([str(spec), "--results", str(results)], run_experiment=no_run)
    message = capsys.readouterr().err
    assert code == study_cli.EXIT_USAGE, message
    assert f"{spec}: {key}: " in message
    for piece in said:
        assert piece in message, message
    assert not results.exists()


def test_the_battery_has_forty_bad_inputs_across_the_playbooks_and_specs():
    playbooks = {playbook for playbook, _, _ in PLAYBOOK_CASES}
    assert {"site.yml", "experiment.yml", "fault.yml", "teardown.yml", "redeploy.yml"} <= playbooks
    assert len(PLAYBOOK_CASES) + len(STUDY_CASES) >= 40
