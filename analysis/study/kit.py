"""What this checkout's experiment accepts, read from the roles themselves (no second list).

- Engines: roles/experiment/tasks/<engine>/engine.yml exists (as the experiment role decides).
- Each engine's own settings: `_experiment_engine_settings` in that file (short name -> default,
  min and max or choices, and which setting bounds replay or paces offset commits), and the keys
  of `_experiment_engine_parameters` (what run.json records); the delivery guarantees it offers,
  `_experiment_engine_guarantees`, and why it refuses the others, `_experiment_engine_refusals`.
- Fault types: `none` and the task files of roles/fault/tasks/types/.
- Parameters: the keys of roles/experiment/defaults/main.yml without their `experiment_`
  prefix (the short names playbooks/experiment.yml takes with -e), and the fault role's schedule
  settings below.
- Choices: a setting's `choices` in roles/experiment/meta/argument_specs.yml (Ansible refuses
  any other value before the role runs), or in the engine's `_experiment_engine_settings`.
- Whole-number rules: the keys of `_experiment_positive_numbers` (at least 1) and
  `_experiment_whole_numbers` (at least 0) in roles/experiment/vars/main.yml, which the
  experiment's checks loop over; an engine's own settings' `min` and `max`.
"""

from __future__ import annotations

import configparser
import functools
import json
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = Path("playbooks/experiment.yml")
EXPERIMENT_DEFAULTS = Path("roles/experiment/defaults/main.yml")
EXPERIMENT_VARS = Path("roles/experiment/vars/main.yml")
EXPERIMENT_SPECS = Path("roles/experiment/meta/argument_specs.yml")
# The experiment's lists of whole-number settings (roles/experiment/tasks/validate.yml asserts
# each) and the smallest value each allows.
WHOLE_NUMBER_RULES = {"_experiment_positive_numbers": 1, "_experiment_whole_numbers": 0}
ENGINE_TASKS = Path("roles/experiment/tasks")
FAULT_TYPES = Path("roles/fault/tasks/types")
PREFIX = "experiment_"
NO_FAULT = "none"
# The experiment settings that schedule and aim a fault (a spec gives them in its faults:
# entries, not its parameters:); Kit.load checks each is an experiment setting. "number" ones
# must be numbers, "text" ones strings.
FAULT_SCHEDULE_PARAMETERS: dict[str, str] = {
    "fault_at_s": "number",
    "duration_s": "number",
    "fault_every_s": "number",
    "fault_count": "number",
    "target": "text",
    "delay_ms": "number",
    "jitter_ms": "number",
}
# Settings a study gives each run itself: the engine and fault (spec keys `engines` and
# `faults`), the run's name and where its results go.
STUDY_SET_PARAMETERS = frozenset({"engine", "fault", "run_id", "results_dir"})


class KitError(Exception):
    """The checkout is not a streamlab kit the study can drive."""


def _yaml_mapping(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise KitError(f"{path}: cannot read it ({error})") from error
    if not isinstance(data, dict):
        raise KitError(f"{path}: not a YAML mapping")
    return data


def _engine_settings(path: Path, manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """An engine's declared settings, each a whole number from min to max or one of choices."""
    declared = manifest.get("_experiment_engine_settings") or {}
    if not isinstance(declared, dict):
        raise KitError(f"{path}: _experiment_engine_settings must map names to their specs")
    for name, spec in declared.items():
        ranged = isinstance(spec, dict) and {"min", "max"} <= set(spec) and "default" in spec
        listed = isinstance(spec, dict) and isinstance(spec.get("choices"), list)
        if not (ranged or listed) or "description" not in spec:
            raise KitError(
                f"{path}: setting {name} needs a default, a description and min and max (a "
                "whole number) or choices (docs/extending.md)"
            )
    return declared


def _check_daemons(path: Path, manifest: dict[str, Any]) -> None:
    """One coordinator daemon and at least one worker daemon, each with its inventory group."""
    daemons = manifest.get("_experiment_engine_daemons") or {}
    roles = [spec.get("role") for spec in daemons.values() if isinstance(spec, dict)]
    grouped = all(isinstance(spec, dict) and spec.get("group") for spec in daemons.values())
    if roles.count("coordinator") != 1 or "worker" not in roles or not grouped:
        raise KitError(
            f"{path}: _experiment_engine_daemons must name one coordinator daemon and at least "
            "one worker daemon, each with its inventory group (docs/extending.md)"
        )


def _flagged(settings: dict[str, dict[str, dict[str, Any]]], flag: str) -> dict[str, str]:
    """Engine -> its one setting marked with the flag (a KitError when it marks several)."""
    found = {}
    for engine, specs in settings.items():
        marked = [name for name, spec in specs.items() if spec.get(flag)]
        if len(marked) > 1:
            raise KitError(f"{engine}: settings {', '.join(marked)} are all marked {flag}")
        if marked:
            found[engine] = marked[0]
    return found


def checkout_state(root: Path) -> tuple[str, bool] | None:
    """The checkout's commit and whether its tracked files have uncommitted changes, as the
    experiment records them in run.json (kit_commit, kit_dirty); None outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return head, bool(status.strip())


NOT_RECORDED = "not recorded"
COMMIT = re.compile(r"[0-9a-f]{7,40}")


def _record(run_dir: Path) -> dict[str, Any]:
    try:
        record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return record if isinstance(record, dict) else {}


def recorded_commit(record: dict[str, Any]) -> str:
    """A run.json's kit_commit in 7 digits; NOT_RECORDED where it has none, or a value that is
    not one (the `unknown` of a run made outside a git checkout)."""
    recorded = str(record.get("kit_commit") or "")
    return recorded[:7] if COMMIT.fullmatch(recorded) else NOT_RECORDED


def run_commits(run_dirs: Iterable[Path]) -> tuple[dict[str, int], list[str]]:
    """The kit commits (recorded_commit) the runs ran with, with how many ran with each, and the
    runs (directory names) made with uncommitted changes (run.json kit_dirty)."""
    commits: dict[str, int] = {}
    dirty = []
    for run_dir in run_dirs:
        record = _record(run_dir)
        commit = recorded_commit(record)
        commits[commit] = commits.get(commit, 0) + 1
        if record.get("kit_dirty"):
            dirty.append(run_dir.name)
    return commits, dirty


def one_commit(run_dirs: Iterable[Path]) -> tuple[str, bool] | None:
    """The one kit commit every run recorded, and whether any ran with uncommitted changes;
    None when they recorded several, or none."""
    commits, dirty = run_commits(run_dirs)
    if len(commits) != 1 or NOT_RECORDED in commits:
        return None
    (commit,) = commits
    return commit, bool(dirty)


@dataclass(frozen=True)
class Kit:
    root: Path
    engines: tuple[str, ...]
    faults: tuple[str, ...]
    # Short name -> default value, for every experiment setting.
    defaults: dict[str, Any]
    # Engine -> the parameters that only that engine's runs use.
    engine_parameters: dict[str, frozenset[str]]
    # Short name -> the smallest (and largest) whole number the experiment accepts for it.
    minimums: dict[str, int]
    maximums: dict[str, int]
    # Short name -> the only values the experiment accepts (its argument spec's choices).
    choices: dict[str, tuple[str, ...]]
    # Engine -> the delivery guarantees it offers, and why it refuses a guarantee it does not.
    guarantees: dict[str, tuple[str, ...]]
    refusals: dict[str, dict[str, str]]
    # Engine -> its setting that bounds what a failure replays (replay_bound), and the one that
    # paces its offset commits (commits_offsets), where its manifest names one.
    replay_bound: dict[str, str]
    commits_offsets: dict[str, str]

    @classmethod
    def load(cls, root: Path = REPO) -> Kit:
        if not (root / PLAYBOOK).is_file():
            raise KitError(
                f"{root} has no {PLAYBOOK}: run the study from a streamlab checkout "
                "(`make setup` installs streamlab-study from it)"
            )
        defaults = {
            key.removeprefix(PREFIX): value
            for key, value in _yaml_mapping(root / EXPERIMENT_DEFAULTS).items()
            if key.startswith(PREFIX)
        }
        engine_files = sorted((root / ENGINE_TASKS).glob("*/engine.yml"))
        manifests = {path.parent.name: _yaml_mapping(path) for path in engine_files}
        settings = {
            engine: _engine_settings(path, manifests[path.parent.name])
            for path in engine_files
            for engine in [path.parent.name]
        }
        engine_parameters = {
            engine: frozenset(manifest.get("_experiment_engine_parameters") or {})
            | frozenset(settings[engine])
            for engine, manifest in manifests.items()
        }
        declared: dict[str, dict[str, Any]] = {}
        for engine, specs in settings.items():
            for name, spec in specs.items():
                if name in declared or name in defaults:
                    raise KitError(
                        f"{root / ENGINE_TASKS / engine / 'engine.yml'}: setting {name} is "
                        "declared twice (by another engine, or in the experiment's defaults): "
                        "give each engine's settings names of their own"
                    )
                declared[name] = spec
        for engine, manifest in manifests.items():
            _check_daemons(root / ENGINE_TASKS / engine / "engine.yml", manifest)
        defaults.update({name: spec.get("default") for name, spec in declared.items()})
        guarantees = {
            engine: tuple(manifest.get("_experiment_engine_guarantees") or ())
            for engine, manifest in manifests.items()
        }
        refusals = {
            engine: dict(manifest.get("_experiment_engine_refusals") or {})
            for engine, manifest in manifests.items()
        }
        options = (
            (_yaml_mapping(root / EXPERIMENT_SPECS).get("argument_specs") or {}).get("main") or {}
        ).get("options") or {}
        choices = {
            key.removeprefix(PREFIX): tuple(option["choices"])
            for key, option in options.items()
            if isinstance(option, dict) and option.get("choices")
        }
        choices.update(
            {name: tuple(spec["choices"]) for name, spec in declared.items() if "choices" in spec}
        )
        unknown = sorted(set(FAULT_SCHEDULE_PARAMETERS) - set(defaults))
        if unknown:
            raise KitError(
                f"{root / EXPERIMENT_DEFAULTS} has no setting {', '.join(unknown)}: the study's "
                "fault schedule settings (analysis/study/kit.py) must be experiment settings"
            )
        faults = {NO_FAULT, *(path.stem for path in (root / FAULT_TYPES).glob("*.yml"))}
        rules = _yaml_mapping(root / EXPERIMENT_VARS)
        minimums = {
            name: minimum
            for key, minimum in WHOLE_NUMBER_RULES.items()
            for name in rules.get(key) or {}
        }
        minimums.update({name: spec["min"] for name, spec in declared.items() if "min" in spec})
        maximums = {name: spec["max"] for name, spec in declared.items() if "max" in spec}
        return cls(
            root=root,
            engines=tuple(engine_parameters),
            faults=tuple(sorted(faults)),
            defaults=defaults,
            engine_parameters=engine_parameters,
            minimums=minimums,
            maximums=maximums,
            choices=choices,
            guarantees=guarantees,
            refusals=refusals,
            replay_bound=_flagged(settings, "replay_bound"),
            commits_offsets=_flagged(settings, "commits_offsets"),
        )

    @property
    def playbook(self) -> Path:
        return self.root / PLAYBOOK

    @property
    def study_parameters(self) -> tuple[str, ...]:
        """The experiment settings a spec's `parameters` may give."""
        return tuple(name for name in self.defaults if name not in STUDY_SET_PARAMETERS)

    def owner(self, parameter: str) -> str | None:
        """The engine whose runs alone use the parameter, None when every run uses it."""
        for engine, names in self.engine_parameters.items():
            if parameter in names:
                return engine
        return None

    def offers(self, engine: str, guarantee: object) -> bool:
        """Whether the engine's job keeps this delivery guarantee."""
        return guarantee in self.guarantees.get(engine, ())

    def refusal(self, engine: str, guarantee: str) -> str:
        """Why the engine does not offer the guarantee, and what it offers."""
        why = self.refusals.get(engine, {}).get(guarantee, "its job does not implement it")
        return f"{engine} does not offer {guarantee} ({why}); it offers " + ", ".join(
            self.guarantees.get(engine, ())
        )

    def default_inventory(self) -> str | None:
        """ansible.cfg's inventory, as ansible-playbook would take it without -i."""
        config = configparser.ConfigParser(interpolation=None)
        config.read(self.root / "ansible.cfg")
        return config.get("defaults", "inventory", fallback=None)


@functools.cache
def current(root: Path = REPO) -> Kit:
    """This checkout's kit, read once per process (the analysis asks it for each run)."""
    return Kit.load(root)
