"""Lookup plugin: a role's settings given with -e by their short names (without the role prefix)."""

from __future__ import annotations

import difflib
import glob
import os
import typing as t
from collections.abc import Mapping

from ansible import constants as C
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible.utils.vars import load_extra_vars

DOCUMENTATION = r"""
name: streamlab_short_names
author: streamlab
short_description: A role's settings given as extra vars by their short names
description:
  - For each role named, reads the role's C(defaults/main.yml); every setting C(<role>_<name>)
    there has the short name C(<name>). Returns a dict of C(<role>_<name>) to the value of each
    short name given as an extra var (C(-e name=value), C(-e @file), as ansible-runner passes them).
  - Only extra vars count. A variable of the same name from the inventory, a play, a role or a
    fact is not taken, so a group variable called C(count) cannot change a run.
  - The names come from the role's defaults, so a setting added there has its short name at once,
    and from the C(_<role>_engine_settings) mapping of each C(tasks/<engine>/engine.yml) of the
    role (an engine's own settings, declared in its folder).
  - Fails when a setting is given both ways with different values
    (C(-e count=1 -e experiment_count=2)).
options:
  _terms:
    description:
      - Role names, found under the playbook's C(roles/), then C(roles_path). None, with
        O(strict), checks the extra vars against every role's settings and O(allow) only.
    required: false
    type: list
    elements: str
  only:
    description:
      - Take only these short names (each must be a setting of the role); empty for all of them.
    type: list
    elements: str
    default: []
  strict:
    description:
      - Refuse an extra var whose name is none of these short names, no setting of any role of
        the kit (C(roles/*/defaults/main.yml)), not in O(allow) and no C(ansible_) variable,
        naming the closest known setting, so that a typo or a setting the playbook does not have
        stops the run instead of being ignored.
    type: bool
    default: false
  allow:
    description: With O(strict), further extra vars the playbook takes itself (C(analyze_on)).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Take the experiment settings given with -e by their short names (-e count=20000)
  ansible.builtin.set_fact:
    "{{ item.key }}": "{{ item.value }}"
  loop: "{{ lookup('streamlab_short_names', 'experiment') | dict2items }}"

- name: Refuse an extra var that is no role's setting and not one the playbook takes itself
  ansible.builtin.assert:
    that: lookup('streamlab_short_names', strict=true, allow=['confirm', 'purge']) is mapping
    quiet: true

- name: Take -e runs=... for analysis_runs, and no other short name
  ansible.builtin.set_fact:
    "{{ item.key }}": "{{ item.value }}"
  loop: "{{ lookup('streamlab_short_names', 'analysis', only=['runs']) | dict2items }}"
"""

RETURN = r"""
_raw:
  description: One dict of full setting name to the extra var's value, for all the roles named.
  type: list
  elements: dict
"""

DEFAULTS_FILES = ("main.yml", "main.yaml")
# An engine folder's manifest, which may declare further settings of its role.
ENGINE_FILE = "engine.yml"
# Parts of a name whose value is not echoed when the name is refused.
SECRET_WORDS = ("pass", "secret", "token", "key", "credential")
# difflib's similarity a setting needs to be named as the one meant: difflib's own 0.6 offers
# `rate` for `guarantee`.
CLOSE_ENOUGH = 0.7


class LookupModule(LookupBase):
    def run(
        self, terms: list[str], variables: dict[str, t.Any] | None = None, **kwargs: t.Any
    ) -> list[dict[str, t.Any]]:
        self.set_options(var_options=variables, direct=kwargs)
        only: list[str] = self.get_option("only")
        extra_vars = load_extra_vars(self._loader)
        taken: dict[str, t.Any] = {}
        known: set[str] = set(self.get_option("allow"))
        for role in terms:
            prefix = f"{role}_"
            defaults = self._role_defaults(role, variables or {})
            short_names = {k.removeprefix(prefix): k for k in defaults if k.startswith(prefix)}
            known.update(only or short_names)
            unknown = sorted(set(only) - set(short_names))
            if unknown:
                raise AnsibleLookupError(
                    f"{', '.join(unknown)}: no such setting of the {role} role "
                    f"(its defaults/main.yml has no {', '.join(prefix + n for n in unknown)})"
                )
            for short, setting in short_names.items():
                if short not in extra_vars or (only and short not in only):
                    continue
                if setting in extra_vars and extra_vars[setting] != extra_vars[short]:
                    raise AnsibleLookupError(
                        f"{setting} is given twice, -e {short}={extra_vars[short]} and "
                        f"-e {setting}={extra_vars[setting]}: give one of them"
                    )
                taken[setting] = extra_vars[short]
        if self.get_option("strict"):
            self._refuse_unknown(extra_vars, known, variables or {})
        return [taken]

    def _refuse_unknown(
        self, extra_vars: Mapping[str, t.Any], known: set[str], variables: Mapping[str, t.Any]
    ) -> None:
        """Fail on the first extra var the playbook has no setting for, naming the nearest."""
        settings = known | self._all_role_settings(variables)
        unknown = sorted(
            name for name in extra_vars if name not in settings and not name.startswith("ansible_")
        )
        if not unknown:
            return
        problems = []
        secrets = self._secret_settings(variables)
        for name in unknown:
            near = difflib.get_close_matches(name, sorted(settings), n=1, cutoff=CLOSE_ENOUGH)
            hint = f" (did you mean {near[0]}?)" if near else ""
            # A misspelt secret's value must not reach the output: a name that looks like one,
            # or whose closest setting is one (no_log in its role's argument specs).
            secret = any(word in name.lower() for word in SECRET_WORDS) or bool(set(near) & secrets)
            shown = "(hidden)" if secret else extra_vars[name]
            problems.append(f"-e {name}={shown}{hint}")
        raise AnsibleLookupError(
            f"{'; '.join(problems)}: no setting of this playbook has that name, so it would "
            "change nothing. Give a setting the playbook takes (docs/configuration.md lists "
            "them, short names without their role prefix) or leave it out."
        )

    def _all_role_settings(self, variables: Mapping[str, t.Any]) -> set[str]:
        """Every setting of every role's defaults/main.yml: each may be given by its full name."""
        found: set[str] = set()
        for base in self._search_paths(variables):
            for path in glob.glob(os.path.join(base, "*", "defaults", "main.y*ml")):
                settings = self._loader.load_from_file(path) or {}
                if isinstance(settings, Mapping):
                    found.update(str(key) for key in settings)
                role_dir = os.path.dirname(os.path.dirname(path))
                found.update(self._engine_settings(role_dir, os.path.basename(role_dir)))
        return found

    def _engine_settings(self, role_dir: str, role: str) -> dict[str, t.Any]:
        """The settings a role's engine folders declare (tasks/<engine>/engine.yml, mapping
        _<role>_engine_settings of short name -> spec with its default), by full name."""
        found: dict[str, t.Any] = {}
        for path in sorted(glob.glob(os.path.join(role_dir, "tasks", "*", ENGINE_FILE))):
            manifest = self._loader.load_from_file(path) or {}
            if not isinstance(manifest, Mapping):
                continue
            declared = manifest.get(f"_{role}_engine_settings")
            if not isinstance(declared, Mapping):
                continue
            for name, spec in declared.items():
                found[f"{role}_{name}"] = spec.get("default") if isinstance(spec, Mapping) else None
        return found

    def _secret_settings(self, variables: Mapping[str, t.Any]) -> set[str]:
        """The settings that some role's meta/argument_specs.yml marks no_log."""
        found: set[str] = set()
        for base in self._search_paths(variables):
            for path in glob.glob(os.path.join(base, "*", "meta", "argument_specs.y*ml")):
                specs = (self._loader.load_from_file(path) or {}).get("argument_specs") or {}
                for entry in specs.values():
                    for option, spec in ((entry or {}).get("options") or {}).items():
                        if isinstance(spec, Mapping) and spec.get("no_log"):
                            found.add(str(option))
        return found

    def _search_paths(self, variables: Mapping[str, t.Any]) -> list[str]:
        playbook_dir = str(variables.get("playbook_dir", self._loader.get_basedir()))
        return [os.path.join(playbook_dir, "roles"), *C.DEFAULT_ROLES_PATH, playbook_dir]

    def _role_defaults(self, role: str, variables: Mapping[str, t.Any]) -> Mapping[str, t.Any]:
        """The settings of defaults/main.yml of the role, found as Ansible finds roles."""
        searched = self._search_paths(variables)
        for base in searched:
            for name in DEFAULTS_FILES:
                path = os.path.join(base, role, "defaults", name)
                if os.path.isfile(path):
                    settings = self._loader.load_from_file(path) or {}
                    if not isinstance(settings, Mapping):
                        raise AnsibleLookupError(f"{path} is not a mapping of settings")
                    return {**settings, **self._engine_settings(os.path.join(base, role), role)}
        raise AnsibleLookupError(
            f"no role {role} with defaults/main.yml in {', '.join(searched)}: "
            "name a role of the kit, or add its directory to roles_path in ansible.cfg"
        )
