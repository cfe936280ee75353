"""Static contracts every role keeps: documented defaults, managed templates, pinned artifacts."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml

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


@pytest.mark.parametrize("role", ROLES)
def test_defaults_match_argument_specs(role):
    defaults = load(REPO / "roles" / role / "defaults" / "main.yml")
    options = load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"][
        "options"
    ]
    undocumented = set(defaults) - set(options)
    assert not undocumented, f"{role}: defaults missing from argument_specs: {undocumented}"
    without_default = {k for k, v in options.items() if k not in defaults and not v.get("required")}
    assert not without_default, (
        f"{role}: options with neither default nor required: {without_default}"
    )
    for key in options:
        assert key.startswith(f"{role}_"), f"{role}: option {key} lacks the role prefix"


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
