"""fault.yml refuses a fault longer than fault_max_duration_s before it does anything, naming
the setting and the fix: on hosts Ansible reaches with a local connection."""

from __future__ import annotations

from conftest import LOCAL_COMPONENT_GROUPS, LOCAL_HOSTS, local_inventory, run_playbook

GROUPS = {"driver": ("a",), **LOCAL_COMPONENT_GROUPS}


def test_a_fault_longer_than_the_longest_accepted_is_refused(tmp_path):
    run = run_playbook(
        "fault.yml",
        local_inventory(tmp_path, {host: {} for host in LOCAL_HOSTS}, GROUPS),
        extravars={"fault": "network_partition", "duration_s": 3600},
        tmp_path=tmp_path,
    )
    assert run.rc != 0
    assert (
        "duration_s=3600 is longer than fault_max_duration_s=900: shorten it, or give "
        "-e fault_max_duration_s=3600 if a fault that long is meant."
    ) in " ".join(run.output.split()), run.output[-3000:]
    assert run.changed_nothing_on(LOCAL_HOSTS), run.changed
