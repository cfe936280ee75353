"""tools/check_docs.py, the documentation check of `make lint`: each way it fails, on a small
repository in a temporary directory, and that the real repository passes its link and README
rules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
_spec = importlib.util.spec_from_file_location("check_docs", REPO / "tools" / "check_docs.py")
assert _spec is not None and _spec.loader is not None
check_docs = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = check_docs
_spec.loader.exec_module(check_docs)

SPECS = """\
argument_specs:
  main:
    short_description: A role
    options:
      demo_port: {type: int, default: 1234, description: The port.}
  extra:
    options:
      demo_port: {type: int, default: 1234, description: The port.}
      demo_flag: {type: bool, default: false, description: A flag.}
"""


def small_repo(tmp_path: Path, readme: str = "# kit\n\nSee [the docs](docs/README.md).\n") -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(readme)
    (tmp_path / "docs" / "README.md").write_text(
        "# Docs\n\n## Using the kit\n\n- [Configuration](configuration.md#demo)\n"
        "- [Back](../README.md#kit)\n- [Here](#using-the-kit)\n"
    )
    meta = tmp_path / "roles" / "demo" / "meta"
    meta.mkdir(parents=True)
    (meta / "argument_specs.yml").write_text(SPECS)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    # The pages the generated ones link to.
    (tmp_path / "docs" / "experiments.md").write_text("# Experiments\n\n## Settings\n")
    (tmp_path / "docs" / "bench-results.md").write_text("# Benchmark result files\n")
    render(tmp_path)
    return tmp_path


def render(repo: Path) -> None:
    (repo / "docs" / "configuration.md").write_text(check_docs.render_config_reference.render(repo))
    (repo / "docs" / "figures.md").write_text(check_docs.render_figures.render(repo))


def test_a_small_repository_passes(tmp_path):
    assert check_docs.check(small_repo(tmp_path)) == []
    assert check_docs.main(["--repo", str(tmp_path)]) == 0


def test_a_readme_over_300_lines_fails(tmp_path):
    repo = small_repo(tmp_path, "# kit\n" + "line\n" * 300)
    assert check_docs.check(repo) == ["README.md: 301 lines, more than 300"]
    assert check_docs.main(["--repo", str(repo)]) == 1


def test_a_readme_of_300_lines_passes(tmp_path):
    assert check_docs.check(small_repo(tmp_path, "# kit\n" + "line\n" * 299)) == []


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("Measured on 2026-11-30 on the test hosts.", "a date (2026-11-30)"),
        ("Since `b75c847` the teardown is faster.", "looks like a commit id (b75c847)"),
        ("Fixed in 54cf884e90548b31b1d5a.", "looks like a commit id (54cf884e90548b31b1d5a)"),
    ],
)
def test_a_date_or_a_commit_id_in_the_readme_fails(tmp_path, line, found):
    problems = check_docs.check(small_repo(tmp_path, f"# kit\n\n{line}\n"))
    assert len(problems) == 1
    assert problems[0].startswith("README.md:3: ") and found in problems[0]


@pytest.mark.parametrize(
    "line",
    [
        "1000000 messages at 2000/s, 65536 bytes",  # numbers: no letter a-f
        "a deadbeef facade: decade accede",  # words of a-f only: no digit
        "SHA-256 and sha512 digests, version 4.1.1, port 6130-6139",
        "the kafka cluster qFQZ3-PnTKaXCrYPKyQt1g",
    ],
)
def test_ordinary_words_and_numbers_are_not_commit_ids(tmp_path, line):
    assert check_docs.check(small_repo(tmp_path, f"# kit\n\n{line}\n")) == []


def test_a_link_to_a_missing_file_fails(tmp_path):
    repo = small_repo(tmp_path)
    (repo / "docs" / "extra.md").write_text("# Extra\n\nSee [gone](gone.md) and [up](../nope/).\n")
    assert check_docs.check(repo) == [
        "docs/extra.md:3: link to gone.md: no such file",
        "docs/extra.md:3: link to ../nope/: no such file",
    ]


def test_a_link_to_a_missing_anchor_fails(tmp_path):
    repo = small_repo(tmp_path, "# kit\n\n[x](docs/README.md#using-the-lab)\n[y](#kit)\n")
    assert check_docs.check(repo) == [
        "README.md:3: link to docs/README.md#using-the-lab: no such anchor"
    ]


def test_anchors_follow_githubs_slugs(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# The experiment's programs run as the service account\n"
        "## `make bench-engines` (Flink, Storm)\n"
        "## Repeated\n## Repeated\n"
        "```\n# not a heading\n```\n"
        "### A [linked](other.md) heading\n"
    )
    assert check_docs.anchors(page) == {
        "the-experiments-programs-run-as-the-service-account",
        "make-bench-engines-flink-storm",
        "repeated",
        "repeated-1",
        "a-linked-heading",
    }


def test_links_in_code_and_urls_are_not_checked(tmp_path):
    repo = small_repo(
        tmp_path,
        "# kit\n\n`[a](missing.md)` [site](https://example.org/x.md)\n"
        "```\n[b](missing.md)\n```\n[mail](mailto:a@b.c)\n",
    )
    assert check_docs.check(repo) == []


def test_a_setting_missing_from_the_configuration_reference_fails(tmp_path):
    repo = small_repo(tmp_path)
    page = repo / "docs" / "configuration.md"
    page.write_text(page.read_text().replace("`demo_flag`", "`demo_other`"))
    problems = check_docs.check(repo)
    assert "docs/configuration.md: lacks demo's setting demo_flag" in problems
    assert any("not what tools/render_config_reference.py renders" in p for p in problems)


def test_a_new_setting_in_the_specs_fails_until_the_reference_is_rendered(tmp_path):
    repo = small_repo(tmp_path)
    specs = repo / "roles" / "demo" / "meta" / "argument_specs.yml"
    specs.write_text(SPECS.replace("  extra:", "      demo_new: {type: str, default: x}\n  extra:"))
    assert "docs/configuration.md: lacks demo's setting demo_new" in check_docs.check(repo)
    render(repo)
    assert check_docs.check(repo) == []


def test_a_stale_figures_page_fails(tmp_path):
    repo = small_repo(tmp_path)
    (repo / "docs" / "figures.md").write_text("# Figures\n")
    assert check_docs.check(repo) == [
        "docs/figures.md: not what tools/render_figures.py renders; run it"
    ]


def test_the_repositorys_readme_and_links_pass():
    assert check_docs.check_readme(REPO) + check_docs.check_links(REPO) == []


def test_a_stale_engines_table_fails(tmp_path):
    """An engine's manifest changed without the table of docs/engines.md: check_docs says so."""
    repo = small_repo(tmp_path)
    render(repo)
    manifest = repo / "roles" / "experiment" / "tasks" / "demo" / "engine.yml"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("_experiment_engine_guarantees: [at_least_once]\n")
    page = repo / "docs" / "engines.md"
    engines = check_docs.render_engines
    page.write_text(f"# Engines\n\n{engines.BEGIN}\n{engines.END}\n")
    assert any("engines' table is stale" in p for p in check_docs.check(repo))
    page.write_text(engines.render(repo) or "")
    assert not [p for p in check_docs.check(repo) if "engines" in p]
    page.write_text("# Engines\n")
    assert any("lacks the engines' table markers" in p for p in check_docs.check(repo))
