"""streamlab_unpack: archives unpacked with Python alone, once, safely, with the role's owners."""

from __future__ import annotations

import getpass
import grp
import io
import os
import shutil
import stat
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from conftest import ARCHIVERS, run_module, run_playbook

USER = getpass.getuser()
GROUP = grp.getgrgid(os.getgid()).gr_name
MTIME = 1_700_000_000


@pytest.fixture(scope="module")
def path_without_tar(tmp_path_factory) -> str:
    """A PATH with every program of /usr/bin and /bin except the archivers."""
    tools = tmp_path_factory.mktemp("bin-without-tar")
    for directory in ("/usr/bin", "/bin"):
        for program in sorted(Path(directory).iterdir()):
            if program.name not in ARCHIVERS and not (tools / program.name).exists():
                (tools / program.name).symlink_to(program)
    assert shutil.which("tar", path=str(tools)) is None
    assert shutil.which("gzip", path=str(tools)) is None
    return str(tools)


def add(tar: tarfile.TarFile, name: str, kind: bytes = tarfile.REGTYPE, **fields: object) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mtime = kind, MTIME
    info.mode = int(fields.pop("mode", 0o755 if kind == tarfile.DIRTYPE else 0o644))
    data = fields.pop("data", b"")
    assert isinstance(data, bytes)
    for key, value in fields.items():
        setattr(info, key, value)
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        tar.addfile(info)


def archive(path: Path, *members: tuple) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, fields in members:
            add(tar, name, kind, **fields)
    return path


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def distribution(tmp_path) -> Path:
    """A distribution-like tar.gz: modes to keep and to tame, links, implied directories."""
    return archive(
        tmp_path / "pkg-1.tgz",
        ("pkg-1/", tarfile.DIRTYPE, {"mode": 0o775}),
        ("pkg-1/bin/", tarfile.DIRTYPE, {}),
        ("pkg-1/bin/run.sh", tarfile.REGTYPE, {"mode": 0o4755, "data": b"#!/bin/sh\n"}),
        ("pkg-1/conf/app.properties", tarfile.REGTYPE, {"mode": 0o666, "data": b"a=1\n"}),
        ("pkg-1/libs/x-1.jar", tarfile.REGTYPE, {"data": b"jar"}),
        ("pkg-1/libs/x.jar", tarfile.SYMTYPE, {"linkname": "x-1.jar"}),
        ("pkg-1/bin/conf", tarfile.SYMTYPE, {"linkname": "../conf"}),
        ("pkg-1/libs/copy.jar", tarfile.LNKTYPE, {"linkname": "pkg-1/libs/x-1.jar"}),
        ("./pkg-1/deep/er/file", tarfile.REGTYPE, {"mode": 0o600, "data": b"deep"}),
    )


def unpack_args(src: Path, dest: Path, creates: str = "pkg-1") -> dict:
    return {
        "src": str(src),
        "dest": str(dest),
        "creates": str(dest / creates),
        "owner": USER,
        "group": GROUP,
    }


def test_unpacks_without_tar_on_path_once_with_owners_and_tamed_modes(
    distribution, tmp_path, path_without_tar
):
    dest = tmp_path / "opt" / "pkg-1-abc"
    rc, first = run_module(
        "streamlab_unpack", unpack_args(distribution, dest), path=path_without_tar
    )
    assert rc == 0 and first["changed"], first
    assert first["entries"] == ["pkg-1"] and first["replaced"] == [] and first["members"] == 9
    home = dest / "pkg-1"
    assert sorted(p.name for p in dest.iterdir()) == ["pkg-1"], "no staging directory left"
    assert (home / "bin" / "run.sh").read_bytes() == b"#!/bin/sh\n"
    assert (home / "deep" / "er" / "file").read_bytes() == b"deep"
    assert (home / "bin" / "conf" / "app.properties").read_text() == "a=1\n"  # through the link
    assert os.readlink(home / "libs" / "x.jar") == "x-1.jar"
    assert (home / "libs" / "copy.jar").stat().st_ino == (home / "libs" / "x-1.jar").stat().st_ino
    # setuid and group/other write go; the rest of each mode stays, implied directories get 0755.
    assert mode_of(home / "bin" / "run.sh") == 0o755
    assert mode_of(home / "conf" / "app.properties") == 0o644
    assert mode_of(home / "deep" / "er" / "file") == 0o600
    assert mode_of(home) == 0o755 and mode_of(home / "deep" / "er") == 0o755
    assert mode_of(dest) == 0o755
    for path in [dest, *dest.rglob("*")]:
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == (os.getuid(), os.getgid()), path
    assert (home / "bin" / "run.sh").stat().st_mtime == MTIME
    assert home.stat().st_mtime == MTIME

    (home / "conf" / "app.properties").write_text("changed by hand\n")
    rc, again = run_module("streamlab_unpack", unpack_args(distribution, dest))
    assert rc == 0 and not again["changed"], again
    assert (home / "conf" / "app.properties").read_text() == "changed by hand\n"


def test_replaces_what_an_interrupted_unpacking_left(distribution, tmp_path):
    dest = tmp_path / "pkg-1-abc"
    (dest / "pkg-1" / "bin").mkdir(parents=True)
    (dest / "pkg-1" / "bin" / "half-writt").write_text("x")
    rc, result = run_module(
        "streamlab_unpack", unpack_args(distribution, dest, creates="pkg-1/libs/x.jar")
    )
    assert rc == 0 and result["changed"] and result["replaced"] == ["pkg-1"], result
    assert sorted(p.name for p in (dest / "pkg-1" / "bin").iterdir()) == ["conf", "run.sh"]


def test_check_mode_changes_nothing(distribution, tmp_path):
    dest = tmp_path / "pkg-1-abc"
    rc, result = run_module("streamlab_unpack", unpack_args(distribution, dest), "--check")
    assert rc == 0 and result["changed"], result
    assert not dest.exists()


def test_a_home_the_archive_lacks_is_named(distribution, tmp_path):
    dest = tmp_path / "pkg-1-abc"
    rc, result = run_module("streamlab_unpack", unpack_args(distribution, dest, creates="pkg-2"))
    assert rc != 0
    assert "has no pkg-2; its top-level entries: pkg-1" in result["msg"], result


def test_creates_must_lie_inside_dest(distribution, tmp_path):
    args = unpack_args(distribution, tmp_path / "a")
    args["creates"] = str(tmp_path / "ab")
    rc, result = run_module("streamlab_unpack", args)
    assert rc != 0 and "must be a path inside dest" in result["msg"], result
    assert not (tmp_path / "a").exists()


UNSAFE = {
    "absolute name": [("/etc/evil", tarfile.REGTYPE, {})],
    "dot-dot name": [("pkg-1/../../evil", tarfile.REGTYPE, {})],
    "absolute link": [("pkg-1/l", tarfile.SYMTYPE, {"linkname": "/etc/passwd"})],
    "link out of the tree": [("pkg-1/l", tarfile.SYMTYPE, {"linkname": "../../etc"})],
    # Each link stays inside on its own; followed one after the other they leave the tree.
    "chained links out of the tree": [
        ("pkg-1/a/root", tarfile.SYMTYPE, {"linkname": "../.."}),
        ("pkg-1/out", tarfile.SYMTYPE, {"linkname": "a/root/.."}),
    ],
    "write through a link": [
        ("pkg-1/sub/", tarfile.DIRTYPE, {}),
        ("pkg-1/l", tarfile.SYMTYPE, {"linkname": "sub"}),
        ("pkg-1/l/f", tarfile.REGTYPE, {}),
    ],
    "hard link through a link": [
        ("pkg-1/sub/f", tarfile.REGTYPE, {}),
        ("pkg-1/l", tarfile.SYMTYPE, {"linkname": "sub"}),
        ("pkg-1/h", tarfile.LNKTYPE, {"linkname": "pkg-1/l/f"}),
    ],
    "hard link to a missing file": [("pkg-1/h", tarfile.LNKTYPE, {"linkname": "pkg-1/none"})],
    "fifo": [("pkg-1/fifo", tarfile.FIFOTYPE, {})],
    "device": [("pkg-1/dev", tarfile.CHRTYPE, {"devmajor": 1, "devminor": 3})],
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_unsafe_archives_are_refused_and_leave_nothing(case, tmp_path):
    src = archive(tmp_path / "evil.tgz", ("pkg-1/ok", tarfile.REGTYPE, {}), *UNSAFE[case])
    dest = tmp_path / "opt" / "pkg-1-abc"
    rc, result = run_module("streamlab_unpack", unpack_args(src, dest))
    assert rc != 0, result
    assert "is not safe to unpack, nothing was unpacked" in result["msg"], result
    assert list(dest.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.tgz", "opt"]


def test_a_corrupt_archive_fails_cleanly(distribution, tmp_path):
    broken = tmp_path / "broken.tgz"
    broken.write_bytes(distribution.read_bytes()[:200])
    dest = tmp_path / "pkg-1-abc"
    rc, result = run_module("streamlab_unpack", unpack_args(broken, dest))
    assert rc != 0 and f"cannot unpack {broken}" in result["msg"], result
    assert list(dest.iterdir()) == []


@pytest.mark.skipif(os.getuid() != 0, reason="the role makes root the owner: run as root")
def test_the_roles_unpack_entry_point_needs_no_tar_and_runs_once(
    distribution, tmp_path, path_without_tar
):
    """The artifact role's unpack entry point, as the component, driver and analysis roles use it.

    Run twice: the second run changes nothing.
    """
    inventory = tmp_path / "hosts.yml"
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": host}}}))
    dest = tmp_path / "opt" / "pkg-1-abc"
    extravars = {
        "unpack_archive": str(distribution),
        "unpack_dest": str(dest),
        "unpack_creates": str(dest / "pkg-1" / "libs"),
        "unpack_root_group": grp.getgrgid(0).gr_name,
    }
    # ansible-playbook itself comes from the virtualenv; nothing on the PATH unpacks archives.
    envvars = {"PATH": f"{Path(sys.executable).parent}:{path_without_tar}"}
    for run, wanted in (("first", lambda n: n > 0), ("second", lambda n: n == 0)):
        done = run_playbook(
            "../tests/playbooks/artifact_unpack.yml",  # resolved against playbooks/
            inventory,
            extravars=extravars,
            envvars=envvars,
            tmp_path=tmp_path,
        )
        assert done.rc == 0, done.output[-4000:]
        assert wanted(done.changed["localhost"]), f"{run} run: {done.changed}\n{done.output}"
        assert sorted(p.name for p in dest.iterdir()) == ["pkg-1"], "the archive's copy is gone"
    assert (dest / "pkg-1" / "bin" / "run.sh").read_bytes() == b"#!/bin/sh\n"
    assert (dest / "pkg-1").stat().st_uid == 0 and mode_of(dest) == 0o755
