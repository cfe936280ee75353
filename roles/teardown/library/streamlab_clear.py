#!/usr/bin/python
"""Ansible module: empty directories of the kit (teardown), listing exactly what goes."""

from __future__ import annotations

DOCUMENTATION = r"""
module: streamlab_clear
short_description: Remove what a directory holds, and the directory itself when asked
description:
  - For each directory, removes every entry in it except those named in C(keep); with
    C(whole), then removes the directory itself unless it is a mount point (then it stays, empty).
  - A directory that does not exist is skipped. Symbolic links inside are removed, never
    followed; a directory given as a link is emptied through it, and the link stays.
  - A mount point (also a bind mount) is emptied and stays, at the top or inside.
  - System directories (/, /etc, /opt, /var/log, ...) are refused.
  - In check mode nothing is removed and C(removed) lists what would be.
options:
  directories:
    description: "Items {path, keep (names to leave), whole (also remove the directory)}."
    type: list
    elements: dict
    required: true
"""

RETURN = r"""
removed: {description: "Paths removed (in check mode: that would be), in order.", type: list}
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule

# Directories the kit must never empty, whatever common_*_dir says (Linux and macOS).
SYSTEM_DIRECTORIES = frozenset(
    [
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/home",
        "/lib",
        "/lib64",
        "/opt",
        "/private",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/srv",
        "/sys",
        "/tmp",
        "/usr",
        "/usr/lib",
        "/usr/local",
        "/usr/local/lib",
        "/usr/share",
        "/var",
        "/var/lib",
        "/var/log",
        "/var/opt",
        "/var/tmp",
        "/Applications",
        "/Library",
        "/System",
        "/Users",
        "/Volumes",
        "/opt/homebrew",
    ]
)


def mount_points() -> set:
    """Every mount point of this host. os.path.ismount misses a bind mount from the same file
    system (the test hosts' /etc/streamlab); Linux lists those in /proc/self/mountinfo."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
            fields = [line.split() for line in mountinfo]
    except OSError:  # not Linux (macOS has no bind mounts)
        return set()
    decode = {"\\040": " ", "\\011": "\t", "\\012": "\n", "\\134": "\\"}
    points = set()
    for field in fields:
        point = field[4]
        for escaped, plain in decode.items():
            point = point.replace(escaped, plain)
        points.add(point)
    return points


def is_mount_point(path: str, mounts: set) -> bool:
    return os.path.ismount(path) or path in mounts


def planned(path: str, keep: list, whole: bool, mounts: set) -> list:
    """What clearing directory `path` removes: its entries but `keep` (a mounted entry is
    emptied, never removed), then the directory itself when `whole`, unless it is a mount point
    or a symbolic link (then its target is emptied and both stay)."""
    if not os.path.isdir(path):
        return [path] if os.path.lexists(path) and not os.path.islink(path) else []
    real = os.path.realpath(path)
    entries = []
    for name in sorted(os.listdir(real)):
        entry = os.path.join(real, name)
        if name in keep:
            continue
        if os.path.isdir(entry) and not os.path.islink(entry) and is_mount_point(entry, mounts):
            entries += planned(entry, [], False, mounts)
        else:
            entries.append(entry)
    if whole and not keep and not os.path.islink(path) and not is_mount_point(path, mounts):
        entries.append(path)
    return entries


def remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def main() -> None:
    module = AnsibleModule(
        argument_spec={"directories": {"type": "list", "elements": "dict", "required": True}},
        supports_check_mode=True,
    )
    removed = []
    mounts = mount_points()
    for item in module.params["directories"]:
        path = item.get("path")
        if not isinstance(path, str) or not os.path.isabs(path):
            module.fail_json(msg=f"streamlab_clear: {path!r} is not an absolute path")
        path = os.path.normpath(path)
        if path in SYSTEM_DIRECTORIES:
            module.fail_json(
                msg=f"streamlab_clear: {path} is a system directory, not one of the kit's: give "
                "the kit its own directory (e.g. /var/lib/streamlab) in common_*_dir"
            )
        keep = [str(name) for name in item.get("keep") or []]
        for entry in planned(path, keep, bool(item.get("whole")), mounts):
            if entry in removed:
                continue
            if not module.check_mode:
                try:
                    remove(entry)
                except OSError as error:
                    module.fail_json(msg=f"could not remove {entry}: {error}", removed=removed)
            removed.append(entry)
    module.exit_json(changed=bool(removed), removed=removed)


if __name__ == "__main__":
    main()
