"""Lookup plugin: the whole-number settings of roles outside the range their kind allows."""

from __future__ import annotations

import os
import re
import typing as t
from collections.abc import Mapping

from ansible import constants as C
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

DOCUMENTATION = r"""
name: streamlab_setting_ranges
author: streamlab
short_description: Whole-number settings outside the range their kind allows
description:
  - For each role named, reads the C(main) entry point of its C(meta/argument_specs.yml) and,
    for every option of type C(int), the setting's value as the play sees it (templated).
  - The range comes from the setting's name, so a new setting is checked from the day it is
    added; the kinds are listed in RANGES below (ports, durations, sizes, counts).
  - Returns one problem per setting out of range, each naming the setting, its value, the range
    and the fix; an empty list when every setting is in range. An unset or null setting is left
    to the role (some are optional).
options:
  _terms:
    description: Role names, found under the playbook's C(roles/), then C(roles_path).
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Check that every whole-number setting of Spark is in range
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems | join('; ') }}"
  vars:
    _problems: "{{ query('streamlab_setting_ranges', 'spark') | first }}"
"""

RETURN = r"""
_raw:
  description: One problem (a sentence) per setting out of range.
  type: list
  elements: str
"""

DAY_S = 86_400
# (name pattern, least, most, what it is): the first pattern that matches the name applies.
RANGES: tuple[tuple[str, int, int | None, str], ...] = (
    (r"_port$", 1, 65_535, "a TCP or UDP port"),
    # Settings whose component gives 0 or -1 a meaning of its own.
    (r"^zookeeper_max_client_connections$", 0, None, "a connection limit (0 for none)"),
    (r"^flink_heartbeat_rpc_failure_threshold$", -1, None, "a threshold (-1 turns it off)"),
    (r"^storm_acker_executors$", 0, None, "a number of ackers (0: no acking)"),
    (r"_delay_(s|ms)$", 0, None, "a delay (0 for none)"),
    (r"_ms$", 1, DAY_S * 1000, "a duration in milliseconds, up to a day"),
    (r"_s$", 1, DAY_S, "a duration in seconds, up to a day"),
    (r"_mb$", 16, 1_048_576, "a size in MiB, 16 MiB to 1 TiB"),
    (r"_days$", 1, 36_500, "a number of days"),
    (r"_(attempts|retries)$", 0, None, "a number of retries (0 for none)"),
    (r"", 1, None, "a count"),
)


def allowed_range(name: str) -> tuple[int, int | None, str]:
    """The least and most value (None: no most) of a whole-number setting, from its name."""
    for pattern, least, most, kind in RANGES:
        if re.search(pattern, name):
            return least, most, kind
    raise AssertionError("the last pattern matches every name")


def problem(name: str, value: t.Any) -> str | None:
    """Why the setting's value is out of its range, or None when it is in range."""
    try:
        number = int(str(value).strip())
    except ValueError:
        return f"{name}={value} is not a whole number: give one, e.g. -e {name}=<number>"
    least, most, kind = allowed_range(name)
    if number >= least and (most is None or number <= most):
        return None
    bounds = f"{least} to {most}" if most is not None else f"at least {least}"
    return f"{name}={number} is out of range for {kind}: give {bounds}"


class LookupModule(LookupBase):
    def run(
        self, terms: list[str], variables: dict[str, t.Any] | None = None, **kwargs: t.Any
    ) -> list[list[str]]:
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}
        problems: list[str] = []
        for role in terms:
            for name in self._int_options(role, variables):
                if name not in variables:
                    continue
                value = self._templar.template(variables[name])
                if value is None or value == "":
                    continue
                found = problem(name, value)
                if found:
                    problems.append(found)
        return [problems]

    def _int_options(self, role: str, variables: Mapping[str, t.Any]) -> dict[str, t.Any]:
        playbook_dir = str(variables.get("playbook_dir", self._loader.get_basedir()))
        searched = [os.path.join(playbook_dir, "roles"), *C.DEFAULT_ROLES_PATH, playbook_dir]
        for base in searched:
            path = os.path.join(base, role, "meta", "argument_specs.yml")
            if os.path.isfile(path):
                specs = self._loader.load_from_file(path) or {}
                options = specs.get("argument_specs", {}).get("main", {}).get("options", {})
                return {k: v for k, v in options.items() if (v or {}).get("type") == "int"}
        raise AnsibleLookupError(
            f"no role {role} with meta/argument_specs.yml in {', '.join(searched)}"
        )
