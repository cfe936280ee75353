"""Code that runs on the hosts keeps working on Python 3.9, the system Python of Rocky 9 and macOS.

That is the roles' modules (roles/*/library), the scripts they run (roles/*/files) and the
producer package the driver host runs. Ruff checks their syntax against 3.9
(per-file-target-version in pyproject.toml); here the calls that only 3.10+ accepts are looked
for in the syntax tree, and, where a Python 3.9 is installed (pyenv or python3.9 on PATH), the
files are loaded and the unpack module and clock probe are run with it.
"""

from __future__ import annotations

import ast
import getpass
import grp
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import REPO, run_module, wait_until

HOST_FILES = sorted(
    [
        *REPO.glob("roles/*/library/*.py"),
        *REPO.glob("roles/*/files/*.py"),
        *REPO.glob("producer/**/*.py"),
        *REPO.glob("roles/*/module_utils/*.py"),
    ]
)
MODULE_UTILS = sorted(REPO.glob("roles/*/module_utils/*.py"))
# Builtins and methods whose keyword arguments are new in 3.10 or later.
NEW_KEYWORDS = {"zip": {"strict"}, "bisect": {"key"}, "bisect_left": {"key"}, "insort": {"key"}}
# Names that do not exist in 3.9's standard library.
NEW_NAMES = {
    "pairwise",
    "aiter",
    "anext",
    "TypeAlias",
    "ParamSpec",
    "Self",
    "StrEnum",
    "tomllib",
    "ExceptionGroup",
    "TaskGroup",
    "UTC",
    "getLevelNamesMapping",
    "bit_count",
    "hardlink_to",
}


def python39() -> str | None:
    """A Python 3.9 that runs (a pyenv shim on PATH may be there without one behind it)."""
    candidates = [
        *sorted(Path.home().glob(".pyenv/versions/3.9*/bin/python3.9"), reverse=True),
        shutil.which("python3.9"),
    ]
    for candidate in filter(None, candidates):
        version = subprocess.run(
            [str(candidate), "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if version.stdout.strip() == "(3, 9)":
            return str(candidate)
    return None


PYTHON39 = python39()
needs_python39 = pytest.mark.skipif(PYTHON39 is None, reason="no Python 3.9 on this machine")


def test_the_host_side_files_are_found():
    names = {path.relative_to(REPO).as_posix() for path in HOST_FILES}
    assert {"producer/clockprobe.py", "roles/artifact/library/streamlab_unpack.py"} <= names
    assert "roles/common/library/streamlab_files.py" in names


def runtime_union(node: ast.AST) -> bool:
    """isinstance(x, A | B) and issubclass(...) evaluate the union at run time (3.10+)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("isinstance", "issubclass")
        and len(node.args) == 2
        and isinstance(node.args[1], ast.BinOp)
        and isinstance(node.args[1].op, ast.BitOr)
    )


def annotation_nodes(tree: ast.Module) -> set[int]:
    """ids of the nodes inside annotations (strings under `from __future__ import annotations`)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        annotations = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
            every += [a for a in (arguments.vararg, arguments.kwarg) if a]
            annotations = [a.annotation for a in every if a.annotation] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        for annotation in annotations:
            if annotation is not None:
                inside.update(id(n) for n in ast.walk(annotation))
    return inside


@pytest.mark.parametrize("path", HOST_FILES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_nothing_newer_than_python_39(path):
    source = path.read_text()
    tree = ast.parse(source, str(path), feature_version=(3, 9))
    postponed = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(alias.name == "annotations" for alias in node.names)
        for node in tree.body
    )
    in_annotations = annotation_nodes(tree)
    problems = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            new = {k.arg for k in node.keywords} & NEW_KEYWORDS.get(name, set())
            if new:
                problems.append(f"{where}: {name}({', '.join(sorted(new))}=) is 3.10+")
        if runtime_union(node):
            problems.append(f"{where}: a union of types evaluated at run time is 3.10+")
        if isinstance(node, (ast.Name, ast.Attribute, ast.alias)):
            name = getattr(node, "id", None) or getattr(node, "attr", None) or node.name
            if name in NEW_NAMES:
                problems.append(f"{where}: {name} is not in Python 3.9")
        if (
            not postponed
            and isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.BitOr)
            and id(node) in in_annotations
        ):
            problems.append(f"{where}: X | Y in an annotation needs `from __future__ import ...`")
    assert not problems, "\n".join(problems)


def pure_python_packages(tmp_path: Path) -> str:
    """A PYTHONPATH with the venv's pure-Python packages the host-side files import."""
    site = Path(__import__("ansible").__file__).parents[1]
    links = tmp_path / "site"
    links.mkdir()
    for package in ("ansible", "kafka", "tqdm", "yaml"):
        (links / package).symlink_to(site / package)
    return f"{links}{os.pathsep}{REPO}"


# Roles' module_utils load as ansible.module_utils.<name>, as Ansible ships them with a module.
LOADER = """
import importlib, importlib.util, os, sys
import ansible.module_utils
for util in filter(None, os.environ.get("ROLE_MODULE_UTILS", "").split(os.pathsep)):
    name = "ansible.module_utils." + os.path.basename(util)[:-3]
    spec = importlib.util.spec_from_file_location(name, util)
    sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[name])
for path in sys.argv[1:]:
    if "/producer/" in path:
        importlib.import_module("producer." + path.rsplit("/", 1)[1][:-3])
    else:
        spec = importlib.util.spec_from_file_location("host_side_file", path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(sys.version_info[:2])
"""


@needs_python39
def test_python_39_loads_every_host_side_file(tmp_path):
    """Loading runs each file's top level: its imports, constants, classes and defaults."""
    done = subprocess.run(
        [PYTHON39, "-c", LOADER, *map(str, HOST_FILES)],
        env={
            "PYTHONPATH": pure_python_packages(tmp_path),
            "PATH": os.environ["PATH"],
            "ROLE_MODULE_UTILS": os.pathsep.join(map(str, MODULE_UTILS)),
        },
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "(3, 9)"


@needs_python39
@pytest.mark.realtime  # an offset under 50 ms, on real sockets
def test_python_39_measures_a_clock_offset(tmp_path):
    """producer/clockprobe.py, as a host and the driver run it, both on Python 3.9."""
    probe = str(REPO / "producer" / "clockprobe.py")
    port_file = tmp_path / "port"
    server = subprocess.Popen(
        [PYTHON39, probe, "serve", "--bind", "127.0.0.1", "--port-file", str(port_file)]
        + ["--duration-s", "30"],
    )
    try:
        wait_until(port_file.exists, bool, "the probe server's port file", timeout_s=20)
        port = port_file.read_text().strip()
        done = subprocess.run(
            [PYTHON39, probe, "measure", "--server", f"127.0.0.1:{port}", "--samples", "5"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        server.kill()
        server.wait()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["samples"] == 5 and abs(result["offset_ms"]) < 50, result


@needs_python39
def test_python_39_runs_the_unpack_module(tmp_path):
    source = tmp_path / "pkg-1.tgz"
    with tarfile.open(source, "w:gz") as tar:
        info = tarfile.TarInfo("pkg-1/bin/run.sh")
        info.size, info.mode = 3, 0o755
        tar.addfile(info, io.BytesIO(b"hi\n"))
    dest = tmp_path / "opt"
    args = {
        "src": str(source),
        "dest": str(dest),
        "creates": str(dest / "pkg-1" / "bin"),
        "owner": getpass.getuser(),
        "group": grp.getgrgid(os.getgid()).gr_name,
    }
    rc, result = run_module(
        "streamlab_unpack", args, "-e", f"ansible_python_interpreter={PYTHON39}"
    )
    assert rc == 0 and result["changed"], result
    assert (dest / "pkg-1" / "bin" / "run.sh").read_bytes() == b"hi\n"
