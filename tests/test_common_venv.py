"""The kit's virtualenv is made from an interpreter the service account can run.

The service account runs the virtualenv (producer, collector, job submission), and a virtualenv
runs its base interpreter: one made from a Python under root's home fails every run as the
service account while every check made as root passes. Here the account is `nobody`, and an
interpreter it cannot run is /usr/bin/python3 reached through a directory closed to it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conftest import PlaybookRun, run_playbook

SYSTEM_PYTHON = Path("/usr/bin/python3")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not SYSTEM_PYTHON.exists() or not shutil.which("runuser"),
    reason="needs root, runuser and /usr/bin/python3",
)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every account can enter (pytest's tmp_path is under a 0700 directory)."""
    path = Path(tempfile.mkdtemp(prefix="streamlab-venv-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def closed_python(tmp_path: Path) -> Path:
    """/usr/bin/python3 reached through a 0700 directory: root runs it, nobody cannot."""
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    link = closed / "python3"
    link.symlink_to(SYSTEM_PYTHON)
    return link


def make_venv(
    install_dir: Path, python: Path, tmp_path: Path, preparing: bool = True
) -> PlaybookRun:
    """The virtualenv step as the host's preparation runs it (site.yml), or, with preparing
    False, as wheel_install runs it in a play that did not prepare the host (analyze.yml)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "localhost": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                        }
                    }
                }
            }
        )
    )
    return run_playbook(
        "../tests/playbooks/common_venv.yml",  # resolved against playbooks/
        inventory,
        extravars={
            "common_user": "nobody",
            "common_install_dir": str(install_dir),
            "common_venv_python": str(python),
            "_common_venv_remake": preparing,  # what tasks/prepare.yml gives the step
        },
        tmp_path=tmp_path,
    )


def nobody_runs(python: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["runuser", "-u", "nobody", "--", str(python), "-c", "import sys"],
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_base_interpreter_the_service_account_cannot_run_is_refused_before_anything_is_made(
    tmp_path, open_dir
):
    python = closed_python(tmp_path)
    refused = make_venv(open_dir, python, tmp_path)
    assert refused.rc != 0
    message = " ".join(refused.output.split())
    assert f"The service account nobody cannot run {python}" in message, refused.output[-3000:]
    assert "Set common_venv_python to" in message
    assert not (open_dir / "venv").exists()


def unrunnable_venv(open_dir: Path, tmp_path: Path, with_pip: bool = True) -> Path:
    """A virtualenv made from an interpreter nobody cannot run, as the embedded default once
    made one; without pip, as when ensurepip failed."""
    venv = open_dir / "venv"
    subprocess.run([str(closed_python(tmp_path)), "-m", "venv", str(venv)], check=True)
    if not with_pip:
        for pip in (venv / "bin").glob("pip*"):
            pip.unlink()
    assert nobody_runs(venv / "bin" / "python").returncode != 0
    return venv


@pytest.mark.parametrize("with_pip", [True, False])
def test_a_virtualenv_the_service_account_cannot_run_is_made_again(tmp_path, open_dir, with_pip):
    """While the host is prepared, such a virtualenv is replaced (also one without pip, whose
    interpreter link venv would otherwise keep); the next run leaves it as it is."""
    venv = unrunnable_venv(open_dir, tmp_path, with_pip)

    repaired = make_venv(open_dir, SYSTEM_PYTHON, tmp_path)
    assert repaired.rc == 0, repaired.output[-3000:]
    assert repaired.changed == {"localhost": 1}, repaired.output[-3000:]
    ran = nobody_runs(venv / "bin" / "python")
    assert ran.returncode == 0, ran.stderr

    again = make_venv(open_dir, SYSTEM_PYTHON, tmp_path)
    assert again.rc == 0 and again.changed == {"localhost": 0}, again.output[-3000:]


def test_outside_the_preparation_a_virtualenv_the_account_cannot_run_is_refused_as_it_is(
    tmp_path, open_dir
):
    """Emptying it there would lose the packages the calling role has just listed as present."""
    venv = unrunnable_venv(open_dir, tmp_path)
    kept = venv / "lib" / "kept-by-the-refusal"
    kept.write_text("")
    refused = make_venv(open_dir, SYSTEM_PYTHON, tmp_path, preparing=False)
    assert refused.rc != 0
    message = " ".join(refused.output.split())
    assert f"The service account nobody cannot run the kit's virtualenv {venv}" in message, (
        refused.output[-3000:]
    )
    assert "Run playbooks/site.yml" in message
    assert kept.exists() and nobody_runs(venv / "bin" / "python").returncode != 0
