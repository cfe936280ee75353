"""tools/collections_from_bundle.py: the required collections from the bundle's wheel, at the
pinned versions, or nothing at all."""

from __future__ import annotations

import importlib.util
import json
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "collections_from_bundle", REPO / "tools" / "collections_from_bundle.py"
)
assert _spec is not None and _spec.loader is not None
bundle_tool = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bundle_tool  # its dataclasses look their module up
_spec.loader.exec_module(bundle_tool)


def fake_bundle(path: Path, shipped: dict[str, str]) -> Path:
    """A wheel laid out as the `ansible` bundle's: each collection with its MANIFEST.json."""
    with zipfile.ZipFile(path, "w") as wheel:
        for fqcn, version in shipped.items():
            namespace, name = fqcn.split(".")
            root = f"ansible_collections/{namespace}/{name}"
            manifest = {"collection_info": {"namespace": namespace, "name": name}}
            manifest["collection_info"]["version"] = version
            wheel.writestr(f"{root}/MANIFEST.json", json.dumps(manifest))
            wheel.writestr(f"{root}/plugins/modules/{name}_module.py", f"# {fqcn} {version}\n")
        wheel.writestr("ansible-12.3.0.dist-info/METADATA", "Name: ansible\n")
    return path


def requirements(path: Path, pins: dict[str, str]) -> Path:
    lines = ["collections:"] + [
        f"  - name: {fqcn}\n    version: {version}" for fqcn, version in pins.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def pins(tmp_path: Path) -> Path:
    """requirements.yml as the kit's: community.general 11.4.2 and ansible.posix 2.1.0."""
    return requirements(
        tmp_path / "requirements.yml", {"community.general": "11.4.2", "ansible.posix": "2.1.0"}
    )


def test_only_the_required_collections_are_taken_at_their_pinned_versions(tmp_path, pins):
    wheel = fake_bundle(
        tmp_path / "ansible-12.3.0-py3-none-any.whl",
        {"community.general": "11.4.2", "ansible.posix": "2.1.0", "cisco.ios": "9.0.0"},
    )
    dest = tmp_path / ".collections"
    stale = dest / "ansible_collections" / "community" / "general" / "stale.txt"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier install")
    code = bundle_tool.main(
        ["--bundle", "12.3.0", "--requirements", str(pins), "--dest", str(dest)]
        + ["--wheel", str(wheel)]
    )
    assert code == 0
    root = dest / "ansible_collections"
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == [
        "ansible/posix/MANIFEST.json",
        "ansible/posix/plugins/modules/posix_module.py",
        "community/general/MANIFEST.json",
        "community/general/plugins/modules/general_module.py",
    ]
    manifest = json.loads((root / "community" / "general" / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["version"] == "11.4.2"


def test_a_version_the_bundle_does_not_ship_changes_nothing(tmp_path, pins, capsys):
    wheel = fake_bundle(
        tmp_path / "ansible-12.3.0-py3-none-any.whl",
        {"community.general": "11.4.2", "ansible.posix": "2.0.0"},
    )
    dest = tmp_path / ".collections"
    code = bundle_tool.main(
        ["--bundle", "12.3.0", "--requirements", str(pins), "--dest", str(dest)]
        + ["--wheel", str(wheel)]
    )
    assert code == 1
    error = capsys.readouterr().err
    assert "ships ansible.posix 2.0.0, requirements.yml pins 2.1.0" in error
    assert "ANSIBLE_BUNDLE" in error
    assert not dest.exists()  # community.general, whose version matched, was not taken either


def test_a_refusal_leaves_the_installed_collections_as_they_were(tmp_path, pins, capsys):
    dest = tmp_path / ".collections"
    installed = dest / "ansible_collections" / "community" / "general" / "MANIFEST.json"
    installed.parent.mkdir(parents=True)
    installed.write_text('{"collection_info": {"version": "11.4.2"}}')
    only_general = fake_bundle(
        tmp_path / "ansible-12.3.0-py3-none-any.whl", {"community.general": "11.4.2"}
    )
    arguments = ["--bundle", "12.3.0", "--requirements", str(pins), "--dest", str(dest)]
    assert bundle_tool.main([*arguments, "--wheel", str(only_general)]) == 1
    assert "the bundle ships no ansible.posix: choose an ANSIBLE_BUNDLE" in capsys.readouterr().err
    assert bundle_tool.main([*arguments, "--wheel", str(tmp_path / "absent.whl")]) == 1
    error = capsys.readouterr().err
    assert "absent.whl: not a readable wheel" in error and "pip cache remove ansible" in error
    assert sorted(p.name for p in dest.rglob("*")) == [
        "MANIFEST.json",
        "ansible_collections",
        "community",
        "general",
    ]
    assert installed.read_text() == '{"collection_info": {"version": "11.4.2"}}'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("collections: []\n", "no `collections:` list"),
        ("collections:\n  - name: community.general\n", "pins None; the bundle is matched"),
        ("collections:\n  - name: ansible.posix\n    version: 2.1\n", "give `version: X.Y.Z`"),
        ("collections:\n  - name: ansible.posix\n    version: '>=2.0'\n", "an exact version"),
        (
            "collections:\n  - name: general\n    version: 1.0.0\n",
            "no `name: namespace.collection`",
        ),
    ],
)
def test_requirements_the_tool_cannot_match_are_refused_by_name(tmp_path, capsys, text, message):
    pins = tmp_path / "requirements.yml"
    pins.write_text(text)
    code = bundle_tool.main(
        ["--bundle", "12.3.0", "--requirements", str(pins), "--dest", str(tmp_path / "c")]
        + ["--wheel", str(tmp_path / "unused.whl")]
    )
    assert code == 1
    assert message in capsys.readouterr().err
