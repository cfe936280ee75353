"""The documentation check `make lint` runs.

    python tools/check_docs.py [--repo DIR]

Fails (exit 1, one line per problem) when:
- README.md is longer than MAX_README_LINES lines, or holds a date (20YY-MM-DD) or a word that
  looks like a commit id (7 to 40 hex digits with at least one digit and one letter a-f);
- a relative link in README.md or docs/**/*.md does not resolve: its file or directory is
  missing, or its #anchor is no heading of the target page (GitHub's slugs);
- docs/configuration.md lacks a setting of a role's meta/argument_specs.yml, or is not what
  tools/render_config_reference.py renders;
- docs/figures.md is not what tools/render_figures.py renders from bench/results/;
- docs/engines.md's engines table is not what tools/render_engines.py renders from the engines'
  manifests.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import render_config_reference  # noqa: E402  (tools/, beside this file)
import render_engines  # noqa: E402
import render_figures  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MAX_README_LINES = 300

DATE = re.compile(r"(?<![\w-])20\d{2}-[01]\d-[0-3]\d(?![\w-])")
HEX_WORD = re.compile(r"(?<![\w-])[0-9a-f]{7,40}(?![\w-])")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def looks_like_commit(word: str) -> bool:
    return any(c.isdigit() for c in word) and any(c in "abcdef" for c in word)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a Markdown page: its headings' slugs (repeats get -1, -2, ...)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        found.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def check_readme(repo: Path) -> list[str]:
    path = repo / "README.md"
    if not path.is_file():
        return ["README.md: missing"]
    text = path.read_text(encoding="utf-8")
    problems = []
    count = len(text.splitlines())
    if count > MAX_README_LINES:
        problems.append(f"README.md: {count} lines, more than {MAX_README_LINES}")
    for number, line in enumerate(text.splitlines(), 1):
        for date in DATE.findall(line):
            problems.append(f"README.md:{number}: a date ({date}); history goes to CHANGELOG.md")
        for word in HEX_WORD.findall(line):
            if looks_like_commit(word):
                problems.append(f"README.md:{number}: looks like a commit id ({word})")
    return problems


def check_links(repo: Path) -> list[str]:
    pages = [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
    problems = []
    cache: dict[Path, set[str]] = {}
    for page in pages:
        if not page.is_file():
            continue
        where = page.relative_to(repo).as_posix()
        for number, line in prose_lines(page.read_text(encoding="utf-8")):
            for target in LINK.findall(INLINE_CODE.sub("", line)):
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
                    continue  # a URL, not a relative link
                file_part, _, anchor = target.partition("#")
                resolved = (page.parent / file_part).resolve() if file_part else page
                if not resolved.exists():
                    problems.append(f"{where}:{number}: link to {target}: no such file")
                    continue
                if not anchor or resolved.suffix != ".md" or not resolved.is_file():
                    continue
                if resolved not in cache:
                    cache[resolved] = anchors(resolved)
                if anchor not in cache[resolved]:
                    problems.append(f"{where}:{number}: link to {target}: no such anchor")
    return problems


def check_configuration(repo: Path) -> list[str]:
    path = repo / render_config_reference.PAGE
    if not path.is_file():
        return [f"{render_config_reference.PAGE}: missing; run tools/render_config_reference.py"]
    text = path.read_text(encoding="utf-8")
    problems = [
        f"{render_config_reference.PAGE}: lacks {role}'s setting {name}"
        for role, names in render_config_reference.setting_names(repo).items()
        for name in sorted(names)
        if f"`{name}`" not in text
    ]
    if text != render_config_reference.render(repo):
        problems.append(
            f"{render_config_reference.PAGE}: not what tools/render_config_reference.py renders "
            "from the argument specs; run it"
        )
    return problems


def check_figures(repo: Path) -> list[str]:
    path = repo / render_figures.PAGE
    try:
        rendered = render_figures.render(repo)
    except render_figures.ResultError as error:
        return [f"bench/results: {error}"]
    if not path.is_file() or path.read_text(encoding="utf-8") != rendered:
        return [f"{render_figures.PAGE}: not what tools/render_figures.py renders; run it"]
    return []


def check_engines(repo: Path) -> list[str]:
    """docs/engines.md's table of the engines' manifests, where the repository has engines."""
    if not render_engines.table(repo):
        return []
    if not (repo / render_engines.PAGE).is_file():
        return [f"{render_engines.PAGE}: missing; it holds the engines' table"]
    rendered = render_engines.render(repo)
    if rendered is None:
        return [f"{render_engines.PAGE}: lacks the engines' table markers ({render_engines.BEGIN})"]
    if (repo / render_engines.PAGE).read_text(encoding="utf-8") != rendered:
        return [f"{render_engines.PAGE}: the engines' table is stale; run tools/render_engines.py"]
    return []


def check(repo: Path) -> list[str]:
    return (
        check_readme(repo)
        + check_links(repo)
        + check_configuration(repo)
        + check_figures(repo)
        + check_engines(repo)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The documentation check of make lint.")
    parser.add_argument("--repo", type=Path, default=REPO)
    args = parser.parse_args(argv)
    problems = check(args.repo.resolve())
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
