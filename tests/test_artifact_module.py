"""The artifact fetcher: checksums, cache hits, reproducible bundles, clear failures."""

from __future__ import annotations

import hashlib
import importlib.util
import tarfile

import pytest

from conftest import REPO, run_module

SPEC = importlib.util.spec_from_file_location(
    "streamlab_artifact", REPO / "roles" / "artifact" / "library" / "streamlab_artifact.py"
)
artifact = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(artifact)


@pytest.fixture
def mirror(tmp_path):
    root = tmp_path / "mirror" / "maven" / "org" / "x"
    root.mkdir(parents=True)
    files = []
    for name, body in (("a-1.jar", b"alpha" * 1000), ("b-1.jar", b"beta" * 1000)):
        (root / name).write_bytes(body)
        files.append(
            {"path": f"org/x/{name}", "sha256": hashlib.sha256(body).hexdigest(), "dest": "lib"}
        )
    return tmp_path / "mirror", files


def test_download_verifies_and_leaves_no_partial_file(mirror, tmp_path):
    base, files = mirror
    target = tmp_path / "cache" / "a.jar"
    artifact.download(
        f"file://{base}/maven/{files[0]['path']}",
        str(target),
        "sha256",
        files[0]["sha256"],
        timeout=5,
        retries=1,
    )
    assert hashlib.sha256(target.read_bytes()).hexdigest() == files[0]["sha256"]
    bad = tmp_path / "cache" / "bad.jar"
    with pytest.raises(artifact.ChecksumError, match="expected sha256 0{64}, got"):
        artifact.download(
            f"file://{base}/maven/{files[1]['path']}",
            str(bad),
            "sha256",
            "0" * 64,
            timeout=5,
            retries=1,
        )
    assert not bad.exists() and not (tmp_path / "cache" / "bad.jar.part").exists()


def test_bundles_are_byte_for_byte_reproducible(mirror, tmp_path):
    base, files = mirror
    entries = [(str(base / "maven" / f["path"]), f) for f in files]
    first, second = tmp_path / "one.tar.gz", tmp_path / "two.tar.gz"
    artifact.build_bundle("x", "1", entries, str(first))
    artifact.build_bundle("x", "1", list(reversed(entries)), str(second))
    assert first.read_bytes() == second.read_bytes()

    # What hosts unpack: one top directory, each pinned file under its dest with the pinned
    # digest, and nothing that depends on who built the bundle or when.
    with tarfile.open(first) as bundle:
        members = {member.name: member for member in bundle.getmembers()}
        digests = {
            name: hashlib.sha256(bundle.extractfile(member).read()).hexdigest()
            for name, member in members.items()
            if member.isfile()
        }
    assert digests == {f"x-1/lib/{f['path'].rsplit('/', 1)[1]}": f["sha256"] for f in files}
    assert sorted(name for name, m in members.items() if m.isdir()) == ["x-1", "x-1/lib"]
    assert len(members) == len(files) + 2, sorted(members)
    for member in members.values():
        assert (member.uid, member.gid, member.uname, member.gname) == (0, 0, "", ""), member
        assert member.mtime == 0 and member.mode == (0o755 if member.isdir() else 0o644)


def test_module_caches_bundles_and_names_the_fix_on_corruption(mirror, tmp_path):
    base, files = mirror
    args = {
        "name": "x",
        "version": "1",
        "source": "maven",
        "base_url": f"file://{base}/maven",
        "files": files,
        "bundle": True,
        "cache_dir": str(tmp_path / "cache"),
    }
    rc, first = run_module("streamlab_artifact", args)
    assert rc == 0 and first["changed"] and len(first["downloaded"]) == 2, first
    rc, again = run_module("streamlab_artifact", args)
    assert rc == 0 and not again["changed"] and again["downloaded"] == [], again
    assert again["archive"] == first["archive"]

    (base / "maven" / files[0]["path"]).write_bytes(b"tampered")
    args["cache_dir"] = str(tmp_path / "cold-cache")
    rc, failed = run_module("streamlab_artifact", args)
    assert rc != 0
    assert "Checksum mismatch for x 1 from maven" in failed["msg"]
    assert "make lock COMPONENT=x VERSION=1" in failed["msg"]
