"""A docs page rendered by a script: write it, or with --check say whether it is current."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(page: Path, text: str, check: bool, script: str) -> int:
    """0 when page was written (or, with check, already holds text); 1 when it is stale."""
    if check:
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            print(f"{page.name} is not what {script} renders: run it", file=sys.stderr)
            return 1
        return 0
    page.write_text(text, encoding="utf-8")
    return 0
