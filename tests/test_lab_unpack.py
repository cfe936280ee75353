"""Installing without GNU tar (macOS has bsdtar) or any tar at all (Rocky 9 minimal), for real:
the artifact role installs ZooKeeper over SSH on a test host whose modules see a PATH on which
no program unpacks archives."""

from __future__ import annotations

import shlex

import pytest
import yaml

from conftest import ARCHIVERS, LAB_INVENTORY, REPO, on_lab_host, run_playbook

pytestmark = pytest.mark.lab

HOST = "node2"
BIN_WITHOUT_TAR = "/tmp/streamlab-bin-without-tar"  # the test host's private /tmp
INSTALL_DIR = "/tmp/streamlab-install-without-tar"
PINS = REPO / "roles" / "zookeeper" / "vars" / "main" / "artifacts.yml"


def pinned_jar_digest() -> str:
    bundle = yaml.safe_load(PINS.read_text())["_zookeeper_artifacts"]["zookeeper"]["3.9.4"]
    (jar,) = (f for f in bundle["maven"]["files"] if f["path"].endswith("/zookeeper-3.9.4.jar"))
    return jar["sha256"]


def test_the_artifact_role_installs_a_component_where_no_tar_is_on_the_path(lab, tmp_path):
    address = lab[HOST]
    # Every program of the host's /usr/bin and /usr/sbin but the archivers, as links.
    prepare = (
        f"rm -rf {BIN_WITHOUT_TAR} {INSTALL_DIR} && mkdir -p {BIN_WITHOUT_TAR} && "
        "for f in /usr/bin/* /usr/sbin/*; do n=${f##*/}; "
        f"case ' {' '.join(sorted(ARCHIVERS))} ' in *\" $n \"*) ;; "
        f"*) [ -e {BIN_WITHOUT_TAR}/$n ] || ln -s $f {BIN_WITHOUT_TAR}/$n ;; esac; done; "
        f"for tool in {' '.join(sorted(ARCHIVERS))}; do "
        f"PATH={BIN_WITHOUT_TAR} command -v $tool && exit 1; done; exit 0"
    )
    prepared = on_lab_host(address, prepare)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    try:
        extravars = {"without_tar_path": BIN_WITHOUT_TAR, "install_dir": INSTALL_DIR}
        for run, wanted in (("first", lambda n: n > 0), ("second", lambda n: n == 0)):
            done = run_playbook(
                # resolved against playbooks/
                "../tests/playbooks/artifact_install_without_tar.yml",
                LAB_INVENTORY,
                extravars=extravars,
                limit=HOST,
                tmp_path=tmp_path / run,
            )
            assert done.rc == 0, done.output[-4000:]
            assert wanted(done.changed.get(HOST, 0)), f"{run} run: {done.changed}\n{done.output}"
        # The stable link leads to the unpacked bundle, whose jar is the pinned one.
        jar = f"{INSTALL_DIR}/zookeeper/lib/zookeeper-3.9.4.jar"
        digest = on_lab_host(address, f"sha256sum {shlex.quote(jar)}")
        assert digest.returncode == 0, digest.stderr
        assert digest.stdout.split()[0] == pinned_jar_digest()
        owners = on_lab_host(address, f"stat -c %U:%G {INSTALL_DIR}/zookeeper/ {jar}")
        assert owners.stdout.split() == ["root:root", "root:root"], owners.stdout
    finally:
        on_lab_host(address, f"rm -rf {BIN_WITHOUT_TAR} {INSTALL_DIR}")
