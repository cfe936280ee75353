"""streamlab_files: a role's directories and files in one module run, idempotent, drift repaired."""

from __future__ import annotations

import getpass
import grp
import os
import stat

import pytest

from conftest import run_module

USER = getpass.getuser()
GROUP = grp.getgrgid(os.getgid()).gr_name


def mode_of(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def layout(tmp_path):
    """A role-like layout: a data directory, a config directory and two files."""
    shipped = tmp_path / "dist.properties"
    shipped.write_text("from the distribution\n")
    conf, data = tmp_path / "etc" / "x", tmp_path / "var" / "x"
    args = {
        "directories": [{"path": str(data), "mode": "0750"}, {"path": str(conf)}],
        "files": [
            {"dest": str(conf / "x.conf"), "content": "port=1\n"},
            {"dest": str(conf / "dist.properties"), "src": str(shipped), "mode": "0600"},
        ],
        "owner": USER,
        "group": GROUP,
        "mode": "0644",
    }
    return args, conf, data


def test_lays_out_once_then_changes_nothing(layout):
    args, conf, data = layout
    args["directories"][1]["mode"] = "0755"
    rc, first = run_module("streamlab_files", args)
    assert rc == 0 and first["changed"], first
    assert first["changed_paths"] == [
        str(data),
        str(conf),
        str(conf / "x.conf"),
        str(conf / "dist.properties"),
    ]
    assert (conf / "x.conf").read_text() == "port=1\n"
    assert (conf / "dist.properties").read_text() == "from the distribution\n"
    assert (mode_of(data), mode_of(conf / "x.conf"), mode_of(conf / "dist.properties")) == (
        0o750,
        0o644,
        0o600,
    )

    rc, again = run_module("streamlab_files", args)
    assert rc == 0 and not again["changed"] and again["changed_paths"] == [], again


def test_repairs_only_the_paths_that_drifted(layout):
    args, conf, data = layout
    assert run_module("streamlab_files", args)[0] == 0
    (conf / "x.conf").write_text("port=2\n")
    data.chmod(0o777)
    untouched = (conf / "dist.properties").stat().st_mtime_ns

    rc, check = run_module("streamlab_files", args, "--check", "--diff")
    assert rc == 0 and check["changed_paths"] == [str(data), str(conf / "x.conf")], check
    assert check["diff"] == [
        {
            "before_header": str(conf / "x.conf"),
            "after_header": str(conf / "x.conf"),
            "before": "port=2\n",
            "after": "port=1\n",
        }
    ]
    assert (conf / "x.conf").read_text() == "port=2\n" and mode_of(data) == 0o777  # check mode

    rc, repaired = run_module("streamlab_files", args)
    assert rc == 0 and repaired["changed_paths"] == [str(data), str(conf / "x.conf")], repaired
    assert (conf / "x.conf").read_text() == "port=1\n" and mode_of(data) == 0o750
    assert (conf / "dist.properties").stat().st_mtime_ns == untouched
    assert not list(conf.glob(".streamlab-*")), "a temporary file was left behind"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("dest_is_directory", "is a directory, not a file: move it away"),
        ("missing_parent", "does not exist"),
        ("content_and_src", "give exactly one of content and src"),
        ("missing_src", "cannot read its source"),
    ],
)
def test_bad_input_fails_with_the_path_and_the_fix(layout, tmp_path, change, message):
    args, conf, _ = layout
    conf.mkdir(parents=True)
    target = args["files"][0]
    if change == "dest_is_directory":
        (conf / "x.conf").mkdir()
    elif change == "missing_parent":
        args["directories"] = []
        target["dest"] = str(tmp_path / "nowhere" / "x.conf")
    elif change == "content_and_src":
        target["src"] = str(tmp_path / "dist.properties")
    else:
        args["files"][1]["src"] = str(tmp_path / "gone.properties")
    rc, failed = run_module("streamlab_files", args)
    assert rc != 0
    assert message in failed["msg"], failed
