"""The test lab's systemd host, without booting one: which mirror its root file system comes
from, when the cached one is rebuilt, what node3 gets in the inventory (tests/lab)."""

from __future__ import annotations

import sys

import pytest
from test_os_rendering import FAMILIES

from conftest import REPO

sys.path.insert(0, str(REPO / "tests" / "lab"))
import systemd_host  # noqa: E402
import testhosts  # noqa: E402
from labutil import LabError  # noqa: E402

DEB822 = """\
Types: deb
URIs: http://deb.example.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.example.org/debian-security
Suites: bookworm-security
Components: main
"""


@pytest.fixture
def apt_sources(tmp_path, monkeypatch):
    sources_dir = tmp_path / "sources.list.d"
    sources_dir.mkdir()
    monkeypatch.setattr(systemd_host, "APT_SOURCES", tmp_path / "sources.list")
    monkeypatch.setattr(systemd_host, "APT_SOURCES_DIR", sources_dir)
    monkeypatch.delenv(systemd_host.MIRROR_OVERRIDE, raising=False)
    return tmp_path


def test_the_mirror_is_the_deb822_stanza_of_a_main_suite_not_security(apt_sources):
    security_first = DEB822.split("\n\n")[1] + "\n" + DEB822.split("\n\n")[0]
    (apt_sources / "sources.list.d" / "debian.sources").write_text(security_first)
    assert systemd_host.debian_mirror() == "http://deb.example.org/debian"


def test_the_mirror_comes_from_a_one_line_sources_list_too(apt_sources):
    (apt_sources / "sources.list").write_text(
        "# comment\ndeb [arch=amd64] http://mirror.example.net/debian/ trixie main\n"
    )
    assert systemd_host.debian_mirror() == "http://mirror.example.net/debian"


def test_a_third_party_repository_of_the_same_suite_is_not_the_mirror(apt_sources):
    (apt_sources / "sources.list.d" / "adoptium.sources").write_text(
        "Types: deb\nURIs: https://packages.adoptium.net/artifactory/deb\nSuites: bookworm\n"
        "Components: main\n"
    )
    (apt_sources / "sources.list.d" / "debian.sources").write_text(DEB822)
    assert systemd_host.debian_mirror() == "http://deb.example.org/debian"


def test_the_mirror_can_be_given(apt_sources, monkeypatch):
    monkeypatch.setenv(systemd_host.MIRROR_OVERRIDE, "http://local.example/debian/")
    assert systemd_host.debian_mirror() == "http://local.example/debian"


def test_no_debian_mirror_is_an_error_that_names_the_file_to_fix(apt_sources):
    (apt_sources / "sources.list").write_text("deb http://example.org/ubuntu noble main\n")
    with pytest.raises(LabError, match=r"no Debian mirror found: add a 'deb' source .*\.sources"):
        systemd_host.debian_mirror()


def test_the_cached_root_file_system_changes_exactly_when_its_recipe_does():
    recipe = systemd_host.Recipe("trixie", "http://m/debian", ("openjdk-21-jdk-headless",))
    same = systemd_host.Recipe("trixie", "http://m/debian/", ("openjdk-21-jdk-headless", "dbus"))
    assert recipe.key == same.key  # a base package and a trailing slash change nothing
    others = {
        systemd_host.Recipe("bookworm", "http://m/debian", recipe.packages),
        systemd_host.Recipe("trixie", "http://other/debian", recipe.packages),
        systemd_host.Recipe("trixie", "http://m/debian", ("openjdk-25-jdk-headless",)),
    }
    assert recipe.key not in {other.key for other in others}
    assert len({other.key for other in others}) == 3


def test_node3_boots_debian_13_with_the_common_role_packages_and_its_own_package_database(
    apt_sources,
):
    (apt_sources / "sources.list.d" / "debian.sources").write_text(DEB822)
    node3, node2 = testhosts.Host(3), testhosts.Host(2)
    assert node3.booted_with_systemd and not node2.booted_with_systemd
    recipe = node3.recipe
    assert recipe.suite == "trixie" and recipe.mirror == "http://deb.example.org/debian"
    # Debian 13's packages as test_os_rendering.py writes them out, and what the lab adds:
    # Ansible's apt module needs python3-apt; node3 runs firewalld as Rocky 9 does.
    debian_13 = set(FAMILIES["Debian13"]["packages"])
    assert set(recipe.packages) == debian_13 | {"python3-apt", "firewalld"}
    assert testhosts.host_vars(node3) == {
        "ansible_host": "10.77.0.13",
        "common_package_database_shared": False,
    }
    # node2 uses this machine's package database and has no firewall: the kit turns on its own.
    assert testhosts.host_vars(node2) == {"ansible_host": "10.77.0.12"}
    assert node2.second_ip == "10.78.0.12" and node3.second_ip is None
