"""Static contracts every role keeps: documented defaults, managed templates, pinned artifacts."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from conftest import REPO

ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir())
COMPONENTS = {
    "zookeeper": "zookeeper",
    "kafka": "kafka",
    "flink": "flink",
    "storm": "storm",
    "spark": "spark",
    "common": "supervisor",
}


def load(path):
    return yaml.safe_load(path.read_text()) or {}


def same(a, b) -> bool:
    """Equal values of equal types (True == 1 in Python, but not in an argument spec)."""
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(
        b, sort_keys=True, default=repr
    )


def as_yaml(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1000).removesuffix("...\n").strip()


def entry_points(role):
    return load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]


@pytest.mark.parametrize("role", ROLES)
def test_defaults_match_argument_specs(role):
    defaults = load(REPO / "roles" / role / "defaults" / "main.yml")
    specs = entry_points(role)
    undocumented = set(defaults) - set(specs["main"]["options"])
    assert not undocumented, f"{role}: defaults missing from argument_specs: {undocumented}"
    wrong = []
    for entry, spec in specs.items():
        for key, option in spec.get("options", {}).items():
            where = f"{role} entry point {entry}: {key}"
            if not key.startswith(f"{role}_"):
                wrong.append(f"{where} lacks the role prefix {role}_")
            elif option.get("required"):
                # Ansible refuses a default on a required option, and one in defaults/main.yml
                # would leave the variable always defined, so `required` would never fail.
                if key in defaults or "default" in option:
                    wrong.append(
                        f"{where} is required: remove its default from defaults/main.yml "
                        "and argument_specs.yml, or make it optional"
                    )
            elif key not in defaults:
                wrong.append(f"{where} has neither a value in defaults/main.yml nor required: true")
            elif "default" not in option:
                wrong.append(f"{where} has no default: add default: {as_yaml(defaults[key])}")
            elif not same(option["default"], defaults[key]):
                wrong.append(
                    f"{where} has default {as_yaml(option['default'])}; defaults/main.yml "
                    f"has {as_yaml(defaults[key])}: make them equal"
                )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("role", ROLES)
def test_entry_points_declare_an_option_alike(role):
    first: dict[str, tuple[str, dict]] = {}
    wrong = []
    for entry, spec in entry_points(role).items():
        for key, option in spec.get("options", {}).items():
            kind = {k: option.get(k) for k in ("type", "elements", "choices", "default")}
            seen, before = first.setdefault(key, (entry, kind))
            if not same(kind, before):
                wrong.append(
                    f"{role}: {key} is {kind} in entry point {entry} but {before} in {seen}"
                )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("role", ROLES)
def test_argument_specs_accept_their_defaults(role):
    # What validation at role entry does with an undefined variable: apply the default, check
    # its type and choices. Jinja defaults are templated first: the next test covers them.
    for entry, spec in entry_points(role).items():
        options = {
            key: option
            for key, option in spec.get("options", {}).items()
            if not option.get("required") and "{{" not in json.dumps(option.get("default"))
        }
        result = ArgumentSpecValidator(options).validate({})
        assert not result.error_messages, f"{role} entry point {entry}: {result.error_messages}"


# A value of each type for the required options, which have no default.
SAMPLES = {"str": "x", "path": "/x", "dict": {}, "list": [], "int": 1, "bool": True, "raw": "x"}


def test_role_entry_validation_accepts_the_defaults(tmp_path):
    """Enter every entry point of every role, running only the validation Ansible puts first.

    That validation is tagged always and no task of the kit is, so --tags with a tag nothing has
    runs the validations alone; the roles' defaults/main.yml values are templated and checked.
    """
    tasks = []
    for role in ["common", *(r for r in ROLES if r != "common")]:
        for entry, spec in entry_points(role).items():
            required = {
                key: option["choices"][0] if "choices" in option else SAMPLES[option["type"]]
                for key, option in spec.get("options", {}).items()
                if option.get("required")
            }
            task = {"ansible.builtin.import_role": {"name": role, "tasks_from": entry}}
            tasks.append({"name": f"Enter {role} {entry}", **task, "vars": required})
    playbook = tmp_path / "enter.yml"
    playbook.write_text(
        yaml.safe_dump(
            [{"name": "Enter", "hosts": "localhost", "gather_facts": False, "tasks": tasks}]
        )
    )
    run = subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", "-c", "local"]
        + [str(playbook), "--tags", "streamlab_no_such_tag"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    validated = run.stdout.count("Validating arguments against arg spec")
    assert validated == len(tasks), run.stdout
    assert re.search(
        rf"localhost\s+: ok={len(tasks)}\s+changed=0\s+unreachable=0\s+failed=0", run.stdout
    ), run.stdout


@pytest.mark.parametrize("role", ROLES)
def test_templates_are_marked_managed(role):
    for template in (REPO / "roles" / role / "templates").glob("*.j2"):
        head = template.read_text().splitlines()[:3]
        assert any("{{ ansible_managed }}" in line for line in head), template


@pytest.mark.parametrize("role,artifact", sorted(COMPONENTS.items()))
def test_default_version_is_pinned_with_checksums(role, artifact):
    defaults = load(REPO / "roles" / role / "defaults" / "main.yml")
    pins = load(REPO / "roles" / role / "vars" / "main" / "artifacts.yml")[f"_{role}_artifacts"]
    prefix = role if role != "common" else "common_supervisor"
    version, source = str(defaults[f"{prefix}_version"]), defaults[f"{prefix}_source"]
    assert source in pins[artifact][version], f"{artifact} {version} not pinned for {source}"
    for sources in pins[artifact].values():
        for spec in sources.values():
            assert spec["files"], spec
            for entry in spec["files"]:
                digest = entry.get("sha512") or entry.get("sha256")
                assert re.fullmatch(r"[0-9a-f]{64}|[0-9a-f]{128}", digest or ""), entry
            if spec.get("bundle"):
                for entry in spec["files"]:
                    assert entry.get("extract") or (
                        entry["path"].endswith(".jar") and entry.get("dest")
                    )


def test_required_collections_are_installed():
    wanted = {c["name"]: str(c["version"]) for c in load(REPO / "requirements.yml")["collections"]}
    listed = subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible-galaxy"), "collection", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    installed: dict[str, str] = {}
    for collections in json.loads(listed.stdout).values():
        for name, info in collections.items():
            installed.setdefault(name, info["version"])
    for name, version in wanted.items():
        assert installed.get(name) == version, f"{name}: want {version}, have {installed.get(name)}"


def test_every_engine_declares_the_guarantees_it_offers():
    """The experiment's and the study's guarantee checks read engine.yml as data: each engine
    offers at least at-least-once, names only guarantees the role knows, and gives a reason for
    each it refuses."""
    specs = yaml.safe_load((REPO / "roles/experiment/meta/argument_specs.yml").read_text())
    known = specs["argument_specs"]["main"]["options"]["experiment_guarantee"]["choices"]
    engines = sorted((REPO / "roles/experiment/tasks").glob("*/engine.yml"))
    assert engines
    for path in engines:
        manifest = yaml.safe_load(path.read_text())
        offered = manifest["_experiment_engine_guarantees"]
        refusals = manifest["_experiment_engine_refusals"]
        assert "at_least_once" in offered, path
        assert set(offered) <= set(known), path
        assert set(refusals) == set(known) - set(offered), path
        assert all(isinstance(why, str) and why for why in refusals.values()), path
