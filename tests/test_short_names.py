"""Short names (-e count=...) reach a playbook only as extra vars (plugins/lookup).

Each test runs the playbook's own "Take the short names given with -e" task on localhost, in a
tiny playbook whose inventory and facts define every short name too; nothing else of the
experiment or the analysis runs.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from conftest import REPO

TASK = "Take the short names given with -e"


def settings(role):
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
    return sorted(defaults)


def ansible_playbook(*arguments: str, cwd, home) -> subprocess.CompletedProcess:
    """The virtualenv's ansible-playbook with the repository's ansible.cfg and a HOME of its own."""
    return subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible-playbook"), *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PATH": f"{REPO / '.venv' / 'bin'}:/usr/bin:/bin", "HOME": str(home)}
        | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
        timeout=300,
    )


def short_names_task(playbook):
    plays = yaml.safe_load((REPO / "playbooks" / playbook).read_text())
    tasks = [t for play in plays for t in play.get("pre_tasks", []) if t.get("name") == TASK]
    assert len(tasks) == 1, f"{playbook}: one task named {TASK!r}"
    return tasks[0]


def run(tmp_path, playbook, role, *extra):
    """Run the task with every short name of the role also an inventory variable and a fact.

    Returns the exit code, the output and {setting: value or None when not set}.
    """
    shorts = [s.removeprefix(f"{role}_") for s in settings(role)]
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "localhost": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                        }
                    }
                }
            }
        )
    )
    (inventory / "group_vars" / "all.yml").write_text(
        yaml.safe_dump({short: f"inventory-{short}" for short in shorts} | {"count": 7})
    )
    result = tmp_path / "taken.json"
    report = ", ".join(f"'{s}': {s} | default(None)" for s in settings(role))
    play = {
        "name": "Short names",
        "hosts": "localhost",
        "gather_facts": False,
        "pre_tasks": [
            {
                "name": "Define every short name as a fact",
                "ansible.builtin.set_fact": {short: f"fact-{short}" for short in shorts},
            },
            short_names_task(playbook),
            {
                "name": "Report the settings",
                "ansible.builtin.copy": {
                    "content": "{{ {" + report + "} | to_json }}",
                    "dest": str(result),
                    "mode": "0644",
                },
            },
        ],
    }
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play]))
    completed = ansible_playbook(
        "-i", str(inventory), str(tmp_path / "play.yml"), *extra, cwd=tmp_path, home=tmp_path
    )
    output = completed.stdout + completed.stderr
    taken = json.loads(result.read_text()) if completed.returncode == 0 else {}
    return completed.returncode, output, taken


def test_experiment_takes_only_extra_vars(tmp_path):
    rc, output, taken = run(tmp_path, "experiment.yml", "experiment", "-e", "rate=5")
    assert rc == 0, output
    assert taken.pop("experiment_rate") == "5", output
    assert taken == dict.fromkeys(taken), f"taken from the inventory or a fact: {taken}"


def test_experiment_takes_every_setting_of_the_role_defaults(tmp_path):
    # A setting added to roles/experiment/defaults/main.yml has its short name at once; -e
    # @file is how ansible-runner passes extra vars.
    given = {s.removeprefix("experiment_"): f"given-{s}" for s in settings("experiment")}
    extra = tmp_path / "extra.yml"
    extra.write_text(yaml.safe_dump(given))
    rc, output, taken = run(tmp_path, "experiment.yml", "experiment", "-e", f"@{extra}")
    assert rc == 0, output
    assert taken == {s: f"given-{s}" for s in settings("experiment")}


def test_a_setting_given_twice_differently_fails(tmp_path):
    rc, output, _ = run(
        tmp_path, "experiment.yml", "experiment", "-e", "count=1", "-e", "experiment_count=2"
    )
    assert rc != 0
    assert "experiment_count is given twice, -e count=1 and -e experiment_count=2" in output


@pytest.mark.parametrize("given", [[], ["-e", "runs=a,b", "-e", "dir=/elsewhere"]])
def test_analyze_takes_only_runs_and_only_from_extra_vars(tmp_path, given):
    rc, output, taken = run(tmp_path, "analyze.yml", "analysis", *given)
    assert rc == 0, output
    assert taken.pop("analysis_runs") == ("a,b" if given else None), output
    assert taken == dict.fromkeys(taken), f"taken besides analysis_runs: {taken}"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (["-e", "checkpiont_interval_s=60"], "-e checkpiont_interval_s=60 (did you mean"),
        (["-e", "delivery=exactly_once"], "-e delivery=exactly_once"),
        (["-e", "count=10", "-e", "rat=5"], "-e rat=5 (did you mean rate?)"),
    ],
)
def test_experiment_refuses_an_extra_var_it_has_no_setting_for(tmp_path, given, expected):
    rc, output, _ = run(tmp_path, "experiment.yml", "experiment", *given)
    assert rc != 0
    assert expected in output and "no setting of this playbook has that name" in output


def test_experiment_accepts_full_role_settings_its_own_vars_and_ansible_ones(tmp_path):
    rc, output, taken = run(
        tmp_path,
        "experiment.yml",
        "experiment",
        *("-e", "experiment_results_dir=/r", "-e", "flink_rest_port=8081"),
        *("-e", "analyze_on=none", "-e", "ansible_ssh_pipelining=true"),
    )
    assert rc == 0, output


CHECK = "Check every -e against the settings this playbook takes"
CHECK_PLAYBOOK = "check_extra_vars.yml"


def check_play(playbook: str) -> dict:
    """The playbook's first play: check_extra_vars.yml's check of its extra vars, imported with
    the names the playbook takes itself, before any host is reached (site.yml's and spark.yml's
    come with the preflight.yml they import first)."""
    playbook = "preflight.yml" if playbook in ("site.yml", "spark.yml") else playbook
    first = yaml.safe_load((REPO / "playbooks" / playbook).read_text())[0]
    assert first.get("ansible.builtin.import_playbook") == CHECK_PLAYBOOK, (
        f"{playbook}: checks first"
    )
    (play,) = yaml.safe_load((REPO / "playbooks" / CHECK_PLAYBOOK).read_text())
    assert [task["name"] for task in play["tasks"]] == [CHECK]
    assert play["gather_facts"] is False, "the check gathers no facts"
    return {**play, "vars": first.get("vars", {})}


def run_check(tmp_path, playbook, *extra, play_vars=None):
    play = check_play(playbook)
    play = {**play, "hosts": "localhost", "vars": {**play.get("vars", {}), **(play_vars or {})}}
    (tmp_path / "check.yml").write_text(yaml.safe_dump([play]))
    completed = ansible_playbook(
        *("-i", "localhost,", "-c", "local", str(tmp_path / "check.yml"), *extra),
        cwd=tmp_path,
        home=tmp_path,
    )
    return completed.returncode, completed.stdout + completed.stderr


# playbook -> (what it takes: its own names and a role setting, a misspelt one, what is said)
CHECKED = {
    "fault.yml": (
        ["fault=kill_taskmanager", "target=node2", "duration_s=5", "schedule_id=a", "wait=false"]
        + ["fault_every_s=0", "fault_count=1", "daemon=kafka", "engine=flink", "delay_ms=5"]
        + ["jitter_ms=1", "fault_max_duration_s=60"],
        "duraton_s=5",
        "-e duraton_s=5 (did you mean duration_s?)",
    ),
    "teardown.yml": (
        ["confirm=yes", "purge=true"],
        "purg=true",
        "-e purg=true (did you mean purge?)",
    ),
    "health.yml": (
        ["zookeeper_client_port=2181"],
        "zookeeper_client_prot=2181",
        "-e zookeeper_client_prot=2181 (did you mean zookeeper_client_port?)",
    ),
    "service.yml": (
        ["daemon=kafka", "daemon_state=stopped"],
        "deamon=kafka",
        "-e deamon=kafka (did you mean daemon?)",
    ),
    "analyze.yml": (
        ["runs=a,b", "analysis_results_dir=/r"],
        "run=a",
        "-e run=a (did you mean runs?)",
    ),
    "preflight.yml": (
        ['{"preflight_components": ["common"]}', "kafka_heap_mb=512"],
        "kafka_heep_mb=512",
        "-e kafka_heep_mb=512 (did you mean kafka_heap_mb?)",
    ),
    # A misspelt secret: its value is not printed, whether its name has a secret's word ...
    "site.yml": (
        ["kafka_sasl_password=right-one"],
        "kafka_sasl_pasword=wrong-one",
        "-e kafka_sasl_pasword=(hidden) (did you mean kafka_sasl_password?)",
    ),
    # ... or its closest setting is marked no_log in its role's argument specs.
    "spark.yml": (
        ["spark_authenticate_secret=right-one"],
        "spark_authenticate_secrt=wrong-one",
        "-e spark_authenticate_secrt=(hidden) (did you mean spark_authenticate_secret?)",
    ),
}


# Where the check is not the first play: experiment.yml's is its first task after the hosts'
# facts are read, strict in taking its own short names (tested above); redeploy.yml first only
# asserts its confirmation, on the control node, then imports teardown.yml.
CHECKED_LATER = {"experiment.yml", "redeploy.yml"}


def test_every_playbook_checks_its_extra_vars_before_it_changes_anything():
    for path in sorted((REPO / "playbooks").glob("*.yml")):
        if path.name in CHECKED_LATER or path.name == CHECK_PLAYBOOK:
            continue
        first = yaml.safe_load(path.read_text())[0]
        imported = first.get("ansible.builtin.import_playbook")
        assert imported in (CHECK_PLAYBOOK, "preflight.yml"), f"{path.name} starts with {first}"
        # preflight.yml's case stands for the component playbooks that import it.
        if imported == CHECK_PLAYBOOK:
            assert path.name in CHECKED, f"{path.name}: no case in CHECKED"


@pytest.mark.parametrize("playbook", sorted(CHECKED))
def test_a_playbook_refuses_an_extra_var_it_has_no_setting_for(tmp_path, playbook):
    takes, misspelt, said = CHECKED[playbook]
    given = [arg for value in takes for arg in ("-e", value)]
    rc, output = run_check(tmp_path, playbook, *given)
    assert rc == 0, output
    rc, output = run_check(tmp_path, playbook, *given, "-e", misspelt)
    assert rc != 0
    assert said in output and "no setting of this playbook has that name" in output, output
    assert "wrong-one" not in output, output


def test_site_takes_redeploys_confirmation_only_through_redeploy(tmp_path):
    """site.yml (its preflight) refuses -e confirm=yes, which changes nothing there; redeploy.yml
    imports it with confirm and purge allowed, as it takes them itself."""
    rc, output = run_check(tmp_path, "preflight.yml", "-e", "confirm=yes")
    assert rc != 0 and "-e confirm=yes" in output, output
    (imported,) = [
        play
        for play in yaml.safe_load((REPO / "playbooks" / "redeploy.yml").read_text())
        if play.get("ansible.builtin.import_playbook") == "site.yml"
    ]
    rc, output = run_check(
        tmp_path,
        "preflight.yml",
        "-e",
        "confirm=yes",
        "-e",
        "purge=false",
        play_vars=imported["vars"],
    )
    assert rc == 0, output


def test_the_check_comes_before_any_host_is_reached(tmp_path):
    """fault.yml with a misspelt -e, on an inventory whose host cannot be reached: the refusal
    comes first, and no connection is tried."""
    inventory = tmp_path / "hosts.yml"
    unreachable = {"ansible_host": "192.0.2.1", "ansible_connection": "ssh"}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"node1": unreachable}}}))
    completed = ansible_playbook(
        *("-i", str(inventory), str(REPO / "playbooks" / "fault.yml")),
        *("-e", "fault=kill_kafka_broker", "-e", "targte=x"),
        cwd=REPO,
        home=tmp_path,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode != 0
    assert "-e targte=x (did you mean target?)" in output, output
    assert "UNREACHABLE" not in output and "Learn every host" not in output, output
