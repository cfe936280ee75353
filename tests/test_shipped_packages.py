"""Each Python package is shipped to its hosts alone: the producer's files to the driver host
(roles/driver), the analysis package's to the Spark hosts (roles/analysis). So neither may import
the other, and the one module both use is one file (analysis/linefit.py links to
producer/linefit.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize(("package", "other"), [("analysis", "producer"), ("producer", "analysis")])
def test_a_shipped_package_imports_nothing_of_the_other(package, other):
    # Only the top-level modules are shipped (the roles copy <package>/*.py).
    offenders = [
        path.name
        for path in sorted((REPO / package).glob("*.py"))
        if other in imported_packages(path)
    ]
    assert not offenders, f"{package}/{offenders} import {other}, which its hosts do not have"


def test_the_shared_line_fit_is_one_file():
    link = REPO / "analysis" / "linefit.py"
    assert link.is_symlink() and link.resolve() == (REPO / "producer" / "linefit.py").resolve()
    assert imported_packages(link) <= {"__future__", "math", "collections", "dataclasses"}
