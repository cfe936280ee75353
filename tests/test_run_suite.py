"""tests/run_suite.py: where the low-weight cgroup of the tests beside the lab's goes."""

from __future__ import annotations

from run_suite import own_cpu_cgroup

CGROUP_V1 = """\
9:name=systemd:/
4:memory:/process_api/2b4b
2:cpuacct:/
1:cpu:/ci/job-7
0::/
"""


def test_the_cpu_hierarchys_line_names_the_cgroup():
    assert own_cpu_cgroup(CGROUP_V1) == "/ci/job-7"


def test_cpu_and_cpuacct_mounted_together_count_as_the_cpu_hierarchy():
    assert own_cpu_cgroup("3:cpu,cpuacct:/build\n0::/\n") == "/build"


def test_a_machine_whose_cgroups_name_no_cpu_hierarchy_gives_the_root():
    assert own_cpu_cgroup("0::/user.slice/session-1.scope\n") == "/"
