"""Install requirements.yml's collections from the PyPI `ansible` bundle, where Galaxy is
unreachable (`make setup`'s fallback).

The bundle's wheel ships every collection of an Ansible release under `ansible_collections/`.
`pip install ansible` unpacks all of them (about 21,000 files, 25 s on a 2-core machine); this
takes only the collections requirements.yml names, with the versions it pins, from the same wheel
(pip's cache serves it) into the collections path, as `ansible-galaxy collection install -p` would
lay them out.

    python tools/collections_from_bundle.py --bundle 12.3.0 [--requirements requirements.yml]
        [--dest .collections] [--wheel ansible-12.3.0-py3-none-any.whl]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

PROG = "collections_from_bundle"
ROOT = "ansible_collections"


class BundleError(Exception):
    """What is wrong, and what to do about it."""


@dataclass(frozen=True)
class Requirement:
    namespace: str
    name: str
    version: str

    @property
    def fqcn(self) -> str:
        return f"{self.namespace}.{self.name}"

    @property
    def prefix(self) -> str:
        return f"{ROOT}/{self.namespace}/{self.name}/"


def read_requirements(path: Path) -> list[Requirement]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise BundleError(f"{path}: cannot read it ({error})") from error
    entries = data.get("collections") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise BundleError(f"{path}: no `collections:` list")
    requirements = []
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        version = entry.get("version") if isinstance(entry, dict) else None
        if not isinstance(name, str) or name.count(".") != 1:
            raise BundleError(f"{path}: {entry!r} has no `name: namespace.collection`")
        if version is None:
            raise BundleError(f"{path}: {name} pins no `version:`; the bundle must match a pin")
        namespace, collection = name.split(".")
        requirements.append(Requirement(namespace, collection, str(version)))
    return requirements


def download_bundle(version: str, into: Path) -> Path:
    """The bundle's wheel, through pip (its cache or the package index)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
        + ["--dest", str(into), f"ansible=={version}"],
        capture_output=True,
        text=True,
        check=False,
    )
    wheels = sorted(into.glob(f"ansible-{version}-*.whl"))
    if done.returncode != 0 or not wheels:
        raise BundleError(
            f"pip could not download ansible=={version}: {done.stderr.strip()[-400:]} "
            "(reach Galaxy or a PyPI index, or give --wheel)"
        )
    return wheels[0]


def manifest_version(bundle: zipfile.ZipFile, requirement: Requirement) -> str:
    try:
        manifest = json.loads(bundle.read(requirement.prefix + "MANIFEST.json"))
        return str(manifest["collection_info"]["version"])
    except KeyError as error:
        raise BundleError(f"the bundle has no {requirement.fqcn} ({error})") from error


def install(wheel: Path, requirements: list[Requirement], dest: Path) -> list[str]:
    """Extract each required collection into dest/ansible_collections/, replacing what was there;
    checks every version first, so that a mismatch changes nothing."""
    with zipfile.ZipFile(wheel) as bundle:
        for requirement in requirements:
            shipped = manifest_version(bundle, requirement)
            if shipped != requirement.version:
                raise BundleError(
                    f"{wheel.name} ships {requirement.fqcn} {shipped}, requirements.yml pins "
                    f"{requirement.version}: choose the bundle that ships it (the Makefile's "
                    "ANSIBLE_BUNDLE) or change the pin"
                )
        names = bundle.namelist()
        installed = []
        for requirement in requirements:
            members = [name for name in names if name.startswith(requirement.prefix)]
            target = dest / ROOT / requirement.namespace / requirement.name
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=target.parent) as staging:
                bundle.extractall(staging, members)
                if target.exists():
                    shutil.rmtree(target)
                (Path(staging) / requirement.prefix).rename(target)
            installed.append(f"{requirement.fqcn} {requirement.version}")
    return installed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True, help="the `ansible` release on PyPI")
    parser.add_argument("--requirements", type=Path, default=Path("requirements.yml"))
    parser.add_argument("--dest", type=Path, default=Path(".collections"))
    parser.add_argument("--wheel", type=Path, help="the bundle's wheel (else pip downloads it)")
    args = parser.parse_args(argv)
    try:
        requirements = read_requirements(args.requirements)
        with tempfile.TemporaryDirectory() as download:
            wheel = args.wheel or download_bundle(args.bundle, Path(download))
            installed = install(wheel, requirements, args.dest)
    except (BundleError, zipfile.BadZipFile) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 1
    print(f"{PROG}: from ansible {args.bundle}: {', '.join(installed)} into {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
