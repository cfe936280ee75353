"""experiment.yml refuses a bad setting before it installs or creates anything, with a message
naming the setting and the fix: on hosts Ansible reaches with a local connection, so no test
host is needed. (tests/test_lab_experiment.py checks on the test hosts that no topic or job is
created for the refusals that need a cluster's view.)"""

from __future__ import annotations

import pytest

from conftest import LOCAL_COMPONENT_GROUPS, LOCAL_HOSTS, local_inventory, run_playbook

HOSTS = LOCAL_HOSTS
GROUPS = {"driver": ("a",), **LOCAL_COMPONENT_GROUPS}


@pytest.mark.parametrize(
    ("extravars", "message"),
    [
        ({"engine": "spark"}, "engine=spark is not an engine the kit runs experiments on"),
        ({"engine": "flink", "rate": 0}, "rate=0 must be a number of messages per second above 0"),
        ({"engine": "storm", "count": -5}, "count=-5 must be a whole number of at least 1"),
        ({"engine": "flink", "fault": "meteor"}, "fault=meteor is not a fault the kit can inject"),
        ({"engine": "flink", "warmup_s": 60, "count": 1000}, "warmup_s=60 covers the whole run"),
    ],
)
def test_a_bad_setting_is_refused_before_anything_is_installed(tmp_path, extravars, message):
    results = tmp_path / "results"
    run = run_playbook(
        "experiment.yml",
        local_inventory(tmp_path, {host: {} for host in HOSTS}, GROUPS),
        extravars={**extravars, "experiment_results_dir": str(results)},
        tmp_path=tmp_path,
    )
    assert run.rc != 0
    assert message in " ".join(run.output.split()), run.output[-3000:]
    # Refused in the settings' checks, before the producer's installation on the driver host.
    assert "TASK [Check the experiment settings]" in run.output
    assert "TASK [Identify the producer code this checkout has]" not in run.output
    assert run.changed_nothing_on(HOSTS), run.changed
    assert not results.exists()
