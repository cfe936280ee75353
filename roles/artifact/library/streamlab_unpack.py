#!/usr/bin/python
"""Ansible module: unpack a tar archive on a host with Python's tarfile, safely and once."""

from __future__ import annotations

DOCUMENTATION = r"""
module: streamlab_unpack
short_description: Unpack a tar archive (gzip, bzip2, xz or none) with Python alone
description:
  - Unpacks O(src) into O(dest) with Python's tarfile, so a host needs neither GNU tar (macOS has
    bsdtar, which ansible.builtin.unarchive refuses) nor tar and gzip at all (Rocky minimal).
    It runs on the host's Python 3.9 or later.
  - Does nothing when O(creates) exists. Otherwise the archive is unpacked into a staging
    directory inside O(dest) and each of its top-level entries is then renamed into O(dest), so
    an interrupted run never leaves a half-unpacked tree where O(creates) would find it. A
    top-level entry already in O(dest) (left by an older, interrupted unpacking) is replaced.
  - Refuses unsafe archives before anything reaches O(dest) - absolute names, names with C(..),
    links that resolve outside the archive's tree, members written through a link, device files
    and FIFOs.
  - Every path unpacked is owned by O(owner) and O(group). Modes come from the archive without
    the setuid, setgid and sticky bits and without write access for group and others;
    directories stay searchable and files readable by their owner. Modification times are kept.
  - Supports check mode.
options:
  src: {description: The archive on the host., type: path, required: true}
  dest: {description: Directory to unpack into (created when missing)., type: path, required: true}
  creates:
    description: A path inside O(dest) that exists once the archive is unpacked.
    type: path
    required: true
  owner: {description: Owner of what is unpacked (name or number)., type: str}
  group: {description: Group of what is unpacked (name or number)., type: str}
"""

RETURN = r"""
entries: {description: The archive's top-level entries now in O(dest)., type: list}
replaced:
  description: Entries of O(dest) that an interrupted unpacking had left, now replaced.
  type: list
members: {description: Number of archive members unpacked., type: int}
"""

import grp
import os
import pwd
import shutil
import stat
import tarfile
import tempfile

from ansible.module_utils.basic import AnsibleModule

STAGING_PREFIX = ".streamlab-unpack-"


class UnsafeArchive(Exception):
    """A member would land outside the tree or is of a kind the kit never unpacks."""


def member_path(name: str) -> str:
    """The member's name as a relative path inside the tree; '' for the tree's root itself."""
    if name.startswith("/") or os.path.isabs(name):
        raise UnsafeArchive(f"absolute name {name!r}")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(f"name with '..' {name!r}")
    return "/".join(parts)


def file_mode(mode: int) -> int:
    """No setuid/setgid/sticky, no group/other write; the owner reads and writes."""
    return (mode & 0o755) | 0o600


def directory_mode(mode: int) -> int:
    return (mode & 0o755) | 0o700


class Unpacker:
    """Unpacks one archive into root (a fresh, empty directory), never following a link."""

    def __init__(self, root: str, uid: int, gid: int) -> None:
        self.root = root
        self.uid, self.gid = uid, gid
        self.directories: set[str] = {""}  # relative paths known to be real directories
        self.directory_members: list[tarfile.TarInfo] = []
        self.links: list[str] = []
        self.count = 0

    def own(self, path: str) -> None:
        if (self.uid, self.gid) != (-1, -1):
            os.lchown(path, self.uid, self.gid)

    def make_directory(self, relative: str) -> str:
        """Create relative and its parents as real directories (0755); refuse a link on the way."""
        if relative in self.directories:
            return os.path.join(self.root, relative)
        parent = os.path.dirname(relative)
        self.make_directory(parent)
        path = os.path.join(self.root, relative)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            os.mkdir(path, 0o700)
            os.chmod(path, 0o755)
            self.own(path)
        else:
            if not stat.S_ISDIR(info.st_mode):
                raise UnsafeArchive(f"{relative!r} is needed as a directory but is a file or link")
        self.directories.add(relative)
        return path

    def clear(self, relative: str) -> str:
        """Make way for a file or link at relative (a later member replaces an earlier one)."""
        path = os.path.join(
            self.make_directory(os.path.dirname(relative)), os.path.basename(relative)
        )
        if relative in self.directories:
            raise UnsafeArchive(f"{relative!r} is a directory and also a file or link")
        if os.path.lexists(path):
            os.unlink(path)
        return path

    def unpack(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        relative = member_path(member.name)
        if member.isdir():
            self.make_directory(relative)
            self.directory_members.append(member)
        elif member.isreg():
            path = self.clear(relative)
            source = tar.extractfile(member)
            if source is None:
                raise UnsafeArchive(f"cannot read {member.name!r}")
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with source, os.fdopen(descriptor, "wb") as target:
                shutil.copyfileobj(source, target, 1 << 20)
            os.chmod(path, file_mode(member.mode))
            self.own(path)
            os.utime(path, (member.mtime, member.mtime))
        elif member.issym():
            target = member.linkname
            if os.path.isabs(target):
                raise UnsafeArchive(f"link {member.name!r} to the absolute path {target!r}")
            inside = os.path.normpath(os.path.join(os.path.dirname(relative), target))
            if inside == ".." or inside.startswith("../"):
                raise UnsafeArchive(f"link {member.name!r} to {target!r} leaves the tree")
            path = self.clear(relative)
            os.symlink(target, path)
            self.own(path)
            self.links.append(relative)
        elif member.islnk():
            source = member_path(member.linkname)
            source_path = os.path.join(self.root, source)
            # Only through directories unpacked here: a hard link never reaches beyond the tree.
            if os.path.dirname(source) not in self.directories or not (
                os.path.lexists(source_path) and stat.S_ISREG(os.lstat(source_path).st_mode)
            ):
                raise UnsafeArchive(f"hard link {member.name!r} to {member.linkname!r}, not a file")
            os.link(source_path, self.clear(relative))
        else:
            raise UnsafeArchive(f"{member.name!r} is a device, FIFO or other special file")
        self.count += 1

    def finish(self) -> None:
        """Check where the links lead, then give directories their modes and times."""
        real_root = os.path.realpath(self.root)
        for relative in self.links:
            resolved = os.path.realpath(os.path.join(self.root, relative))
            if resolved != real_root and not resolved.startswith(real_root + os.sep):
                raise UnsafeArchive(f"link {relative!r} resolves outside the tree, to {resolved}")
        for member in self.directory_members:
            path = os.path.join(self.root, member_path(member.name))
            os.chmod(path, directory_mode(member.mode))
            self.own(path)
            os.utime(path, (member.mtime, member.mtime))


def account_id(name: str | None, lookup: str) -> int:
    """A user or group name (or number) as its id; -1 (unchanged) when not given."""
    if not name:
        return -1
    if name.isdigit():
        return int(name)
    entry = pwd.getpwnam(name).pw_uid if lookup == "user" else grp.getgrnam(name).gr_gid
    return int(entry)


def move_into(staged: str, dest: str, trash: str) -> tuple[list[str], list[str]]:
    """Rename the staged top-level entries into dest; move entries they replace to trash."""
    entries, replaced = sorted(os.listdir(staged)), []
    for entry in entries:
        target = os.path.join(dest, entry)
        if os.path.lexists(target):
            os.rename(target, os.path.join(trash, entry))
            replaced.append(entry)
        os.rename(os.path.join(staged, entry), target)
    return entries, replaced


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "path", "required": True},
            "dest": {"type": "path", "required": True},
            "creates": {"type": "path", "required": True},
            "owner": {"type": "str"},
            "group": {"type": "str"},
        },
        supports_check_mode=True,
    )
    p = module.params
    dest, creates = os.path.normpath(p["dest"]), os.path.normpath(p["creates"])
    if not creates.startswith(dest.rstrip(os.sep) + os.sep):
        module.fail_json(msg=f"creates={creates} must be a path inside dest={dest}")
    if os.path.lexists(creates):
        module.exit_json(changed=False, entries=[], replaced=[], members=0)
    if module.check_mode:
        module.exit_json(changed=True, entries=[], replaced=[], members=0)
    try:
        uid, gid = account_id(p["owner"], "user"), account_id(p["group"], "group")
    except KeyError as error:
        module.fail_json(msg=f"unknown owner or group: {error}")
    if not os.path.isdir(dest):
        os.makedirs(dest, 0o755)
        os.chown(dest, uid, gid)
    staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=dest)
    try:
        tree, trash = os.path.join(staging, "tree"), os.path.join(staging, "old")
        os.mkdir(tree)
        os.mkdir(trash)
        unpacker = Unpacker(tree, uid, gid)
        with tarfile.open(p["src"], mode="r:*") as tar:
            for member in tar:
                unpacker.unpack(tar, member)
        unpacker.finish()
        entries, replaced = move_into(tree, dest, trash)
    except UnsafeArchive as error:
        module.fail_json(msg=f"{p['src']} is not safe to unpack, nothing was unpacked: {error}")
    except (tarfile.TarError, OSError, EOFError) as error:
        module.fail_json(msg=f"cannot unpack {p['src']} into {dest}: {error}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not os.path.lexists(creates):
        module.fail_json(
            msg=f"{p['src']} was unpacked into {dest} but has no {os.path.relpath(creates, dest)}; "
            f"its top-level entries: {', '.join(entries) or '(none)'}. Check the pin's 'home'.",
            entries=entries,
        )
    module.exit_json(changed=True, entries=entries, replaced=replaced, members=unpacker.count)


if __name__ == "__main__":
    main()
