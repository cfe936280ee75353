"""The engine manifest's promise: adding an engine touches its own folders and the list in
docs/extending.md, not the kit's generic files. Those that still name an engine are allowed
below, each with its reason; a generic file that starts naming one fails, and so does an entry
here whose file no longer does (the list only shrinks)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from analysis import engines
from analysis.study.kit import Kit

REPO = Path(__file__).resolve().parents[1]
KIT = Kit.load(REPO)
# The experiment's machinery: what runs, checks, faults, records and analyses any engine's run.
GENERIC = (
    "analysis",
    "producer",
    "plugins",
    "roles/experiment",
    "roles/fault",
    "roles/teardown",
    "playbooks/experiment.yml",
    "playbooks/fault.yml",
    "playbooks/teardown.yml",
    "playbooks/redeploy.yml",
    "playbooks/analyze.yml",
    "playbooks/health.yml",
)
# An engine's own folders (docs/extending.md) and a fault's own file, inside the generic ones.
OWN = (
    *(f"roles/experiment/tasks/{engine}/" for engine in KIT.engines),
    *(f"analysis/engines/{engine}.py" for engine in KIT.engines),
    "roles/fault/tasks/types/",
)
# Generic files that still name an engine, and why. Moving one into the engine's own folder
# (the manifest, or an analysis module beside it) removes it from here.
ALLOWED = {
    "analysis/__main__.py": "advise is Flink's checkpoint-interval advice by its subject",
    "analysis/advise.py": "Flink's checkpoint-interval advice, from Flink's checkpoint files",
    "analysis/study/report.py": "the study report's checkpoint advice runs on Flink groups",
    "playbooks/experiment.yml": "usage examples, and the components whose versions run.json keeps",
    "playbooks/health.yml": "each component's health checks",
    "plugins/lookup/streamlab_setting_ranges.py": "ranges of the component roles' settings",
    "roles/experiment/library/streamlab_flink_rest.py": (
        "Flink's REST module (a role's modules are in library/)"
    ),
}
# Spark is also the platform the analysis runs on (PySpark, the kit's Spark cluster): these files
# name Spark as that platform only. They may name no other engine, and an entry whose file no
# longer names Spark fails like a stale one above.
PLATFORM = "spark"
ANALYSIS_PLATFORM = {
    "analysis/faults.py",
    "analysis/histogram.py",
    "analysis/io.py",
    "analysis/linefit.py",
    "analysis/metrics.py",
    "analysis/session.py",
    "analysis/study/plan.py",
    "analysis/summarize.py",
    "analysis/verdict.py",
    "playbooks/analyze.yml",
    "producer/linefit.py",
}


def names(engines: list[str]) -> re.Pattern[str]:
    """Each engine's name in lower case, capitalised (FlinkJob, StormProbe) or in capitals, not
    as part of a longer word."""
    return re.compile(
        "|".join(
            rf"(?<![a-zA-Z]){form}(?![a-z])"
            for engine in engines
            for form in (engine, engine.capitalize(), engine.upper())
        )
    )


NAMES = names(list(KIT.engines))
NOT_PLATFORM = names([engine for engine in KIT.engines if engine != PLATFORM])


def generic_files() -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", *GENERIC], capture_output=True, text=True, check=True
    ).stdout.split()
    return [path for path in listed if not path.startswith(OWN)]


def naming_an_engine() -> set[str]:
    found = set()
    for path in generic_files():
        try:
            text = (REPO / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        if (NOT_PLATFORM if path in ANALYSIS_PLATFORM else NAMES).search(text):
            found.add(path)
    return found


def naming_the_platform() -> set[str]:
    return {
        path
        for path in ANALYSIS_PLATFORM
        if names([PLATFORM]).search((REPO / path).read_text(encoding="utf-8"))
    }


def test_the_engines_are_the_folders_and_each_has_its_analysis_module():
    assert set(KIT.engines) >= {"flink", "storm"}
    found = {module.NAME for module in engines.modules()}
    assert found == set(KIT.engines), "analysis/engines/<engine>.py for every engine folder"


def test_no_generic_file_names_an_engine_outside_the_allow_list():
    unexpected = sorted(naming_an_engine() - set(ALLOWED))
    assert not unexpected, (
        f"{unexpected} name an engine ({', '.join(KIT.engines)}): put what is the engine's "
        "into its own folder (its engine.yml, docs/extending.md) instead"
    )


def test_the_allow_list_keeps_no_file_that_names_no_engine():
    stale = sorted(set(ALLOWED) - naming_an_engine())
    assert not stale, f"{stale} no longer name an engine: remove them from ALLOWED"
    gone = sorted(ANALYSIS_PLATFORM - naming_the_platform())
    assert not gone, f"{gone} no longer name Spark: remove them from ANALYSIS_PLATFORM"


def test_each_analysis_module_names_the_replay_bound_its_manifest_marks():
    for module in engines.modules():
        assert getattr(module, "REPLAY_BOUND", None) == KIT.replay_bound.get(module.NAME), (
            f"analysis/engines/{module.NAME}.py REPLAY_BOUND against its engine.yml"
        )


def test_each_daemon_of_a_manifest_has_the_group_the_service_role_gives_it():
    """The fault role's default target reads the manifests' groups, the service role operates
    daemons through its own map: the two must agree."""
    service = yaml.safe_load((REPO / "roles/service/vars/main.yml").read_text())
    groups = service["_service_daemon_groups"]
    for engine in KIT.engines:
        path = REPO / f"roles/experiment/tasks/{engine}/engine.yml"
        for daemon, spec in yaml.safe_load(path.read_text())["_experiment_engine_daemons"].items():
            assert groups.get(daemon) == spec["group"], (engine, daemon)


def test_the_extending_page_lists_every_engine_and_no_other():
    page = (REPO / "docs/extending.md").read_text(encoding="utf-8")
    listed = re.search(r"this page's list of engines: ([a-z, ]+)\.", page)
    assert listed, "docs/extending.md lost its list of engines"
    assert sorted(listed.group(1).split(", ")) == sorted(KIT.engines)
