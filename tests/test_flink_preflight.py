"""Preflight of the flink role: TLS switches that differ between Flink hosts are refused before
any change, naming the setting and the hosts."""

from __future__ import annotations

import pytest
import yaml

from conftest import run_playbook

LOCAL = {
    "ansible_connection": "local",
    "ansible_python_interpreter": "{{ ansible_playbook_python }}",
}


@pytest.mark.parametrize("setter", ["jm", "tm"])
def test_flink_hosts_with_different_tls_switches_are_refused(tmp_path, setter):
    """Whichever host sets the switch (the first of the play, which runs the check, or another),
    the other has the role's default and the two differ."""
    hosts = {"jm": dict(LOCAL), "tm": dict(LOCAL)}
    hosts[setter]["flink_tls_rest"] = True
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": hosts,
                    "children": {
                        "flink_jobmanager": {"hosts": {"jm": {}}},
                        "flink_taskmanager": {"hosts": {"tm": {}}},
                    },
                }
            }
        )
    )
    refused = run_playbook(
        "preflight.yml",
        inventory,
        extravars={"preflight_components": ["flink"]},
        tmp_path=tmp_path,
    )
    assert refused.rc != 0
    message = " ".join(refused.output.split())
    assert "flink_tls_rest differs between the Flink hosts (jm, tm)" in message, refused.output[
        -3000:
    ]
    assert "flink_tls_internal differs" not in message
