#!/usr/bin/python
"""Ansible module: lay out a role's directories and small files on a host in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
module: streamlab_files
short_description: Make directories and write small files, with owner, group and mode, in one run
description:
  - Creates each directory that is missing and writes each file whose content differs (through a
    temporary file and an atomic rename), then sets owner, group and mode wherever they differ.
  - The builtin file, copy and template modules take one or two module runs per path. A role
    lays out ten or more paths per host, and on an idempotent re-run those runs are most of the
    time spent, so each role hands its whole layout to this module at once.
  - Templates are rendered on the control node with the template lookup and passed as content.
  - Supports check mode and diff mode.
options:
  directories:
    description: Directories, created in order (parents first) when missing.
    type: list
    elements: dict
    default: []
    suboptions:
      path: {description: Absolute path., type: path, required: true}
      owner: {description: Owner (default the module-level owner)., type: str}
      group: {description: Group (default the module-level group)., type: str}
      mode: {description: Octal mode such as "0755" (default the module-level mode)., type: raw}
  files:
    description: Files, each with its content given (content) or read from a file on the host (src).
    type: list
    elements: dict
    default: []
    suboptions:
      dest: {description: Absolute path; its directory must exist., type: path, required: true}
      content: {description: The text to write., type: str}
      src: {description: A file on the host whose bytes to write (copy's remote_src)., type: path}
      owner: {description: Owner (default the module-level owner)., type: str}
      group: {description: Group (default the module-level group)., type: str}
      mode: {description: Octal mode such as "0644" (default the module-level mode)., type: raw}
  owner: {description: Default owner of every path., type: str}
  group: {description: Default group of every path., type: str}
  mode: {description: Default mode of every path., type: raw}
"""

RETURN = r"""
changed_paths: {description: The paths created or changed (content or attributes)., type: list}
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

ATTRIBUTES = ("owner", "group", "mode")


def file_args(module: AnsibleModule, path: str, spec: dict) -> dict:
    """What set_fs_attributes_if_different wants; SELinux context and chattr flags left alone."""
    wanted = {key: spec.get(key) or module.params[key] for key in ATTRIBUTES}
    return module.load_file_common_arguments(wanted, path=path)


def ensure_directory(module: AnsibleModule, spec: dict) -> bool:
    path = spec["path"]
    created = False
    if not os.path.isdir(path):
        if os.path.lexists(path):
            module.fail_json(msg=f"{path} exists and is not a directory: move it away, then re-run")
        created = True
        if module.check_mode:
            return True
        os.makedirs(path)
    return module.set_fs_attributes_if_different(file_args(module, path, spec), created)


def wanted_bytes(module: AnsibleModule, spec: dict) -> bytes:
    if (spec.get("content") is None) == (spec.get("src") is None):
        module.fail_json(msg=f"{spec['dest']}: give exactly one of content and src")
    if spec.get("src") is None:
        return spec["content"].encode()
    try:
        with open(spec["src"], "rb") as source:
            return source.read()
    except OSError as error:
        module.fail_json(msg=f"{spec['dest']}: cannot read its source {spec['src']}: {error}")


def ensure_file(module: AnsibleModule, spec: dict, diffs: list[dict]) -> bool:
    dest = spec["dest"]
    wanted = wanted_bytes(module, spec)
    if os.path.isdir(dest):
        module.fail_json(msg=f"{dest} is a directory, not a file: move it away, then re-run")
    try:
        with open(dest, "rb") as current_file:
            current: bytes | None = current_file.read()
    except FileNotFoundError:
        current = None
    rewritten = current != wanted
    if rewritten:
        if module._diff:
            diffs.append(
                {
                    "before_header": dest,
                    "after_header": dest,
                    "before": (current or b"").decode(errors="replace"),
                    "after": wanted.decode(errors="replace"),
                }
            )
        if module.check_mode:
            return True
        directory = os.path.dirname(dest)
        if not os.path.isdir(directory):
            module.fail_json(msg=f"{dest}: its directory {directory} does not exist")
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".streamlab-")
        with os.fdopen(handle, "wb") as out:
            out.write(wanted)
        # The new content is never readable beyond its wanted owner, group and mode, not even for
        # an instant (a file may hold a secret): a new file gets them on the temporary file (mode
        # 0600 until then) before it takes the name; an existing one gets them before its
        # content is replaced, which keeps them.
        if current is None:
            module.set_fs_attributes_if_different(file_args(module, temporary, spec), False)
            os.replace(temporary, dest)
        else:
            module.set_fs_attributes_if_different(file_args(module, dest, spec), False)
            module.atomic_move(temporary, dest)
    return module.set_fs_attributes_if_different(file_args(module, dest, spec), rewritten)


def main() -> None:
    path_spec = {
        "owner": {"type": "str"},
        "group": {"type": "str"},
        "mode": {"type": "raw"},
    }
    module = AnsibleModule(
        argument_spec={
            "directories": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {"path": {"type": "path", "required": True}, **path_spec},
            },
            "files": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "dest": {"type": "path", "required": True},
                    "content": {"type": "str"},
                    "src": {"type": "path"},
                    **path_spec,
                },
            },
            **path_spec,
        },
        supports_check_mode=True,
    )
    changed_paths = [
        spec["path"] for spec in module.params["directories"] if ensure_directory(module, spec)
    ]
    diffs: list[dict] = []
    changed_paths += [
        spec["dest"] for spec in module.params["files"] if ensure_file(module, spec, diffs)
    ]
    module.exit_json(changed=bool(changed_paths), changed_paths=changed_paths, diff=diffs)


if __name__ == "__main__":
    main()
