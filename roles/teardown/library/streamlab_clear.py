#!/usr/bin/python
"""Ansible module: empty directories of the kit (teardown), listing exactly what goes."""

from __future__ import annotations

DOCUMENTATION = r"""
module: streamlab_clear
short_description: Remove what a directory holds, and the directory itself when asked
description:
  - For each directory, removes every entry in it except those named in C(keep); with
    C(whole), then removes the directory itself unless it is a mount point (then it stays, empty).
  - A directory that does not exist is skipped. Symbolic links are removed, never followed.
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


def is_mount_point(path: str) -> bool:
    return os.path.ismount(path) or path in mount_points()


def planned(path: str, keep: list, whole: bool) -> list:
    """What clearing `path` removes: its entries but `keep`, then the directory when `whole`."""
    if not os.path.lexists(path):
        return []
    if os.path.islink(path) or not os.path.isdir(path):
        return [path]
    entries = [os.path.join(path, name) for name in sorted(os.listdir(path)) if name not in keep]
    if whole and not keep and not is_mount_point(path):
        return entries + [path]
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
    for item in module.params["directories"]:
        path = item.get("path")
        if not isinstance(path, str) or not os.path.isabs(path) or os.path.normpath(path) == "/":
            module.fail_json(msg=f"streamlab_clear: {path!r} is not an absolute path other than /")
        keep = [str(name) for name in item.get("keep") or []]
        for entry in planned(os.path.normpath(path), keep, bool(item.get("whole"))):
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
