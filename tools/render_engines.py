"""Render the engines-at-a-glance table of docs/engines.md from each engine's manifest
(roles/experiment/tasks/<engine>/engine.yml, read as data).

    python tools/render_engines.py [--repo DIR] [--check]

The table sits between the BEGIN and END markers of the page; the rest of the page is written by
hand. Without --check it rewrites the table; with --check it exits 1 when the committed table
differs from what it would write (tools/check_docs.py runs that check in `make lint`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
PAGE = Path("docs/engines.md")
ENGINES = Path("roles/experiment/tasks")
BEGIN = "<!-- BEGIN engines: rendered by tools/render_engines.py from each engine.yml -->"
END = "<!-- END engines -->"


def manifests(repo: Path) -> dict[str, dict[str, Any]]:
    """engine -> its engine.yml as data, by engine."""
    return {
        path.parent.name: yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for path in sorted((repo / ENGINES).glob("*/engine.yml"))
    }


def _setting(name: str, spec: dict[str, Any]) -> str:
    if "choices" in spec:
        allowed = " or ".join(f"`{c}`" for c in spec["choices"])
    else:
        allowed = f"{spec.get('min', 0):,} to {spec.get('max', 0):,}"
    return f"`{name}` {spec.get('default')} ({allowed})"


def _flagged(manifest: dict[str, Any], flag: str) -> str:
    settings = manifest.get("_experiment_engine_settings") or {}
    names = [f"`{name}`" for name, spec in settings.items() if spec.get(flag)]
    return ", ".join(names) or "none"


def table(repo: Path) -> str:
    """The markdown table, one column per engine; empty without engines."""
    found = manifests(repo)
    if not found:
        return ""
    rows: list[tuple[str, list[str]]] = []
    rows.append(
        (
            "delivery guarantees",
            [
                ", ".join(m.get("_experiment_engine_guarantees") or [])
                + "".join(
                    f"; not {g}: {why}"
                    for g, why in (m.get("_experiment_engine_refusals") or {}).items()
                )
                for m in found.values()
            ],
        )
    )
    rows.append(
        (
            "daemons (role, inventory group)",
            [
                ", ".join(
                    f"{daemon} ({spec.get('role')}, `{spec.get('group')}`)"
                    for daemon, spec in (m.get("_experiment_engine_daemons") or {}).items()
                )
                for m in found.values()
            ],
        )
    )
    for what, flag in (
        ("bounds a failure's replay", "replay_bound"),
        ("paces the offset commits", "commits_offsets"),
    ):
        rows.append((what, [_flagged(m, flag) for m in found.values()]))
    rows.append(
        (
            "settings: default (range)",
            [
                "; ".join(
                    _setting(name, spec)
                    for name, spec in (m.get("_experiment_engine_settings") or {}).items()
                )
                for m in found.values()
            ],
        )
    )
    lines = [
        "| | " + " | ".join(found) + " |",
        "|---|" + "---|" * len(found),
        *(f"| {what} | " + " | ".join(cells) + " |" for what, cells in rows),
    ]
    return "\n".join(lines) + "\n"


def render(repo: Path) -> str | None:
    """The page with its table rendered; None when the page lacks the markers."""
    page = (repo / PAGE).read_text(encoding="utf-8")
    if BEGIN not in page or END not in page:
        return None
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table(repo)}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is not current")
    args = parser.parse_args(argv)
    text = render(args.repo)
    if text is None:
        print(f"{PAGE}: no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    page = args.repo / PAGE
    if args.check:
        if page.read_text(encoding="utf-8") != text:
            print(f"{PAGE}: the engines table is not what {Path(__file__).name} renders: run it")
            return 1
        return 0
    page.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
