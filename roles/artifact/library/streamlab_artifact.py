#!/usr/bin/python
"""Ansible module: fetch a pinned artifact into the control-node cache and verify it."""

from __future__ import annotations

DOCUMENTATION = r"""
module: streamlab_artifact
short_description: Download pinned files into a cache, verify their checksums, bundle them
description:
  - Downloads each file of an artifact from O(base_url) into O(cache_dir) unless a copy with the
    pinned checksum is already there, verifies SHA-256 or SHA-512, and retries network errors.
  - With O(bundle=true) the files (for example the jars of a Maven dependency set) are packed
    into one reproducible tar.gz, so hosts receive a single archive.
  - Runs on the control node.
options:
  name: {description: Artifact name, for messages and bundle names., type: str, required: true}
  version: {description: Artifact version., type: str, required: true}
  source: {description: "Source kind: apache, maven or pypi.", type: str, required: true}
  base_url: {description: "Mirror base URL (https, http or file).", type: str, required: true}
  files:
    description: "Files as dicts with C(path) (relative to O(base_url)), one of C(sha256) or
      C(sha512), and for bundles C(dest) (directory inside the bundle) or, for an archive
      (a wheel or another zip, or a tar.gz such as an sdist), C(extract) (member prefixes to
      take) and C(strip) (prefix removed from their names)."
    type: list
    elements: dict
    required: true
  cache_dir: {description: Cache root on the control node., type: path, required: true}
  bundle: {description: Pack the files into one tar.gz., type: bool, default: false}
  timeout: {description: Seconds per request., type: int, default: 60}
  retries: {description: Attempts per file on network errors., type: int, default: 4}
"""

RETURN = r"""
archive: {description: Path of the file hosts receive (the download or the bundle)., type: str}
downloaded: {description: Paths relative to the mirror that were downloaded this run., type: list}
"""

import gzip
import hashlib
import os
import tarfile
import time
import urllib.error
import urllib.request
import zipfile

from ansible.module_utils.basic import AnsibleModule


class ChecksumError(Exception):
    """A file's digest differs from the pinned one."""


def pinned_digest(entry: dict) -> tuple[str, str]:
    for algorithm in ("sha512", "sha256"):
        if entry.get(algorithm):
            return algorithm, str(entry[algorithm]).lower()
    raise ValueError(f"no sha256/sha512 pinned for {entry.get('path')}")


def file_digest(path: str, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(
    url: str, target: str, algorithm: str, expected: str, timeout: int, retries: int
) -> None:
    """Download url to target through a .part file; the target only ever holds verified bytes."""
    part = target + ".part"
    os.makedirs(os.path.dirname(target), exist_ok=True)
    for attempt in range(1, retries + 1):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response, open(part, "wb") as out:
                while block := response.read(1 << 20):
                    out.write(block)
            break
        except (urllib.error.URLError, OSError) as error:
            if isinstance(error, urllib.error.HTTPError) and error.code == 404:
                raise
            if attempt == retries:
                raise
            time.sleep(2 * attempt)
    actual = file_digest(part, algorithm)
    if actual != expected:
        os.unlink(part)
        raise ChecksumError(f"{url}: expected {algorithm} {expected}, got {actual}")
    os.replace(part, target)


def add_zip_members(
    tar: tarfile.TarFile, top: str, archive: str, prefixes: list[str], strip: str
) -> None:
    """Copy the files of a zip (a wheel) under the given prefixes into the bundle."""
    with zipfile.ZipFile(archive) as source:
        for member in sorted(source.infolist(), key=lambda m: m.filename):
            name = member.filename
            if member.is_dir() or not any(name.startswith(prefix) for prefix in prefixes):
                continue
            info = tarfile.TarInfo(os.path.normpath(f"{top}/{name[len(strip) :]}"))
            info.size, info.mtime = member.file_size, 0
            info.mode = (member.external_attr >> 16) & 0o777 or 0o644
            with source.open(member) as handle:
                tar.addfile(info, handle)


def add_tar_members(
    tar: tarfile.TarFile, top: str, archive: str, prefixes: list[str], strip: str
) -> None:
    """Copy the regular files of a tar.gz (an sdist) under the given prefixes into the bundle."""
    with tarfile.open(archive, mode="r:*") as source:
        members = [
            member
            for member in source.getmembers()
            if member.isfile() and any(member.name.startswith(prefix) for prefix in prefixes)
        ]
        for member in sorted(members, key=lambda m: m.name):
            info = tarfile.TarInfo(os.path.normpath(f"{top}/{member.name[len(strip) :]}"))
            info.size, info.mtime = member.size, 0
            info.mode = member.mode & 0o777 or 0o644
            handle = source.extractfile(member)
            if handle is None:
                raise ValueError(f"{archive}: cannot read {member.name}")
            with handle:
                tar.addfile(info, handle)


def add_archive_members(
    tar: tarfile.TarFile, top: str, archive: str, prefixes: list[str], strip: str
) -> None:
    """Copy members of a zip (wheel) or of a tar archive (sdist) into the bundle."""
    if zipfile.is_zipfile(archive):
        add_zip_members(tar, top, archive, prefixes, strip)
    else:
        add_tar_members(tar, top, archive, prefixes, strip)


def build_bundle(name: str, version: str, entries: list[tuple[str, dict]], target: str) -> None:
    """Write a tar.gz with fixed owners and times so equal inputs give equal bytes."""
    top = f"{name}-{version}"
    part = target + ".part"
    with (
        open(part, "wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=1, mtime=0) as packed,
        tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        directories = sorted({os.path.dirname(f"{top}/{e.get('dest', '')}/x") for _, e in entries})
        for directory in [top, *[d for d in directories if d != top]]:
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for local, entry in sorted(entries, key=lambda pair: pair[1]["path"]):
            if entry.get("extract"):
                add_archive_members(tar, top, local, entry["extract"], entry.get("strip", ""))
                continue
            arcname = os.path.normpath(
                f"{top}/{entry.get('dest', '')}/{os.path.basename(entry['path'])}"
            )
            info = tarfile.TarInfo(arcname)
            info.size, info.mode, info.mtime = os.path.getsize(local), 0o644, 0
            with open(local, "rb") as handle:
                tar.addfile(info, handle)
    os.replace(part, target)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "version": {"type": "str", "required": True},
            "source": {"type": "str", "required": True},
            "base_url": {"type": "str", "required": True},
            "files": {"type": "list", "elements": "dict", "required": True},
            "cache_dir": {"type": "path", "required": True},
            "bundle": {"type": "bool", "default": False},
            "timeout": {"type": "int", "default": 60},
            "retries": {"type": "int", "default": 4},
        },
        supports_check_mode=True,
    )
    p = module.params
    if not p["files"]:
        module.fail_json(msg=f"{p['name']} {p['version']} ({p['source']}): no files pinned")
    if not p["bundle"] and len(p["files"]) != 1:
        module.fail_json(msg=f"{p['name']}: several files need bundle=true")
    source_dir = os.path.join(p["cache_dir"], p["source"])
    base = p["base_url"].rstrip("/")
    downloaded: list[str] = []
    local_files: list[tuple[str, dict]] = []
    try:
        for entry in p["files"]:
            algorithm, expected = pinned_digest(entry)
            local = os.path.join(source_dir, entry["path"])
            local_files.append((local, entry))
            if os.path.exists(local) and file_digest(local, algorithm) == expected:
                continue
            if module.check_mode:
                downloaded.append(entry["path"])
                continue
            download(
                f"{base}/{entry['path']}", local, algorithm, expected, p["timeout"], p["retries"]
            )
            downloaded.append(entry["path"])
    except ChecksumError as error:
        module.fail_json(
            msg=f"Checksum mismatch for {p['name']} {p['version']} from {p['source']}: {error}. "
            "The file was discarded. Fix the mirror (or the file in a local mirror directory); "
            f"if the mirror is right, re-pin with `make lock COMPONENT={p['name']} "
            f"VERSION={p['version']}`."
        )
    except (urllib.error.URLError, OSError, ValueError) as error:
        module.fail_json(
            msg=f"Cannot fetch {p['name']} {p['version']} from {p['source']} at {base}: {error}. "
            f"Check the mirror URL for '{p['source']}' (artifact_mirrors) or pick another "
            "source for this component, or set artifact_local_dir to a directory holding the "
            "same files."
        )

    archive = local_files[0][0]
    changed = bool(downloaded)
    if p["bundle"]:
        archive = os.path.join(
            p["cache_dir"], "bundles", f"{p['name']}-{p['version']}-{p['source']}.tar.gz"
        )
        manifest = "\n".join(sorted(f"{e['path']} {pinned_digest(e)[1]}" for e in p["files"]))
        manifest_path = archive + ".manifest"
        current = ""
        if os.path.exists(archive) and os.path.exists(manifest_path):
            with open(manifest_path) as handle:
                current = handle.read()
        if current != manifest:
            changed = True
            if not module.check_mode:
                os.makedirs(os.path.dirname(archive), exist_ok=True)
                build_bundle(p["name"], p["version"], local_files, archive)
                with open(manifest_path, "w") as handle:
                    handle.write(manifest)
    module.exit_json(changed=changed, archive=archive, downloaded=downloaded)


if __name__ == "__main__":
    main()
