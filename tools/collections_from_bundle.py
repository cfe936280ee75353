"""Install requirements.yml's collections from the PyPI `ansible` bundle, where Galaxy is
unreachable (`make setup`'s fallback).

The bundle's wheel ships every collection of an Ansible release under `ansible_collections/`.
`pip install ansible` unpacks all of them (about 21,000 files, 25 s on a 2-core machine); this
takes only the collections requirements.yml names, with the versions it pins, from the same wheel
(`pip download`: the index resolves the version, pip's cache may serve the file) into
`<dest>/ansible_collections/<namespace>/<name>/`, where Ansible's collections path finds them.
Galaxy's install metadata (`<name>-<version>.info/`) is not written; `ansible-galaxy collection
list` reads each collection's MANIFEST.json.

    python tools/collections_from_bundle.py --bundle 12.3.0 [--requirements requirements.yml]
        [--dest .collections] [--wheel ansible-12.3.0-py3-none-any.whl]
"""

from __future__ import annotations

import argparse
import json
import re
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


EXACT_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def read_requirements(path: Path) -> list[Requirement]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise BundleError(f"{path}: cannot read it ({error}); give --requirements") from error
    entries = data.get("collections") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise BundleError(f"{path}: no `collections:` list")
    requirements = []
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        version = entry.get("version") if isinstance(entry, dict) else None
        if not isinstance(name, str) or name.count(".") != 1:
            raise BundleError(f"{path}: {entry!r} has no `name: namespace.collection`")
        if not isinstance(version, str) or not EXACT_VERSION.match(version):
            raise BundleError(
                f"{path}: {name} pins {version!r}; the bundle is matched against an exact "
                "version: give `version: X.Y.Z` (quoted if YAML would read it as a number)"
            )
        namespace, collection = name.split(".")
        requirements.append(Requirement(namespace, collection, version))
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
    path = requirement.prefix + "MANIFEST.json"
    try:
        manifest = json.loads(bundle.read(path))
    except KeyError:
        raise BundleError(
            f"the bundle ships no {requirement.fqcn}: choose an ANSIBLE_BUNDLE that does, or "
            "let ansible-galaxy install it"
        ) from None
    except ValueError as error:
        raise BundleError(f"the bundle's {path} is not JSON ({error})") from error
    version = (manifest.get("collection_info") or {}).get("version")
    if not isinstance(version, str):
        raise BundleError(f"the bundle's {path} gives no collection_info.version")
    return version


def install(wheel: Path, requirements: list[Requirement], dest: Path) -> list[str]:
    """Each required collection into dest/ansible_collections/, replacing what was there. Every
    version is checked and every collection extracted (into a hidden staging directory under
    dest) before any installed one is replaced, so that a refusal changes nothing."""
    with zipfile.ZipFile(wheel) as bundle:
        for requirement in requirements:
            shipped = manifest_version(bundle, requirement)
            if shipped != requirement.version:
                raise BundleError(
                    f"{wheel.name} ships {requirement.fqcn} {shipped}, requirements.yml pins "
                    f"{requirement.version}: choose the bundle that ships it (the Makefile's "
                    "ANSIBLE_BUNDLE) or change the pin"
                )
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest, prefix=".staging-") as staging_dir:
            staging = Path(staging_dir)
            names = bundle.namelist()
            for requirement in requirements:
                members = [name for name in names if name.startswith(requirement.prefix)]
                bundle.extractall(staging / "new", members)
            for requirement in requirements:
                target = dest / requirement.prefix
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.exists():  # set aside, removed with the staging directory
                    target.rename(staging / f"old-{requirement.namespace}-{requirement.name}")
                (staging / "new" / requirement.prefix).rename(target)
    return [f"{requirement.fqcn} {requirement.version}" for requirement in requirements]


def bundle_version(wheel: Path) -> str:
    """The release in a wheel's name: ansible-12.3.0-py3-none-any.whl -> 12.3.0."""
    parts = wheel.name.split("-")
    return parts[1] if len(parts) > 2 else wheel.name


def unreadable(wheel: Path, reason: str) -> BundleError:
    return BundleError(
        f"{wheel}: not a readable wheel ({reason}): give the bundle's .whl, or remove pip's "
        "cached copy (`pip cache remove ansible`) and run it again"
    )


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
            if not wheel.is_file():
                raise unreadable(wheel, "no such file")
            try:
                installed = install(wheel, requirements, args.dest)
            except zipfile.BadZipFile as error:
                raise unreadable(wheel, str(error)) from error
            release = bundle_version(wheel)
    except BundleError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"{PROG}: error: cannot write {args.dest}: {error}", file=sys.stderr)
        return 1
    print(f"{PROG}: from ansible {release}: {', '.join(installed)} into {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
