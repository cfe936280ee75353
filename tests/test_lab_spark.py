"""Spark on the test hosts: the master sees both workers, and a PySpark job runs on them. The
lab turns Spark's shared-secret authentication on (inventory/lab/group_vars/all.yml): an
application that holds the secret runs, one that does not is refused."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import uuid

import pytest
import yaml
from pyspark.sql import SparkSession

from conftest import REPO, on_lab_host, role_default

pytestmark = pytest.mark.lab


def master_state(lab: dict[str, str]) -> dict:
    with urllib.request.urlopen(f"http://{lab['node1']}:8080/json/", timeout=5) as response:
        return json.load(response)


def test_master_reports_both_workers_alive(converged):
    state = master_state(converged)
    assert state["status"] == "ALIVE"
    alive = sorted(w["host"] for w in state["workers"] if w["state"] == "ALIVE")
    assert alive == [converged["node2"], converged["node3"]]


LAB_SECRET = yaml.safe_load((REPO / "inventory" / "lab" / "group_vars" / "all.yml").read_text())[
    "spark_authenticate_secret"
]


def lab_session(lab: dict[str, str], name: str, secret: str | None) -> SparkSession:
    """A PySpark application on the lab's cluster, its driver here on the lab bridge."""
    # A builder of its own: SparkSession.builder is shared, and would keep an earlier
    # session's settings (the secret among them).
    builder = (
        SparkSession.Builder()
        .master(f"spark://{lab['node1']}:7077")
        .appName(name)
        # The driver runs here, on the lab bridge; executors connect back to this address.
        .config("spark.driver.host", "10.77.0.1")
        .config("spark.driver.bindAddress", "10.77.0.1")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.executor.memory", "512m")
        # What spark-defaults.conf gives applications on the cluster's hosts: node3 runs
        # firewalld, which admits only the block managers' pinned ports, and the job's shuffle
        # fetches blocks from an executor there.
        .config("spark.blockManager.port", str(role_default("spark", "spark_block_manager_port")))
        .config("spark.port.maxRetries", str(role_default("spark", "spark_port_max_retries")))
    )
    if secret is not None:
        builder = builder.config("spark.authenticate", "true").config(
            "spark.authenticate.secret", secret
        )
    return builder.getOrCreate()


def test_pyspark_job_runs_on_executors_of_both_workers(converged):
    spark = lab_session(converged, "streamlab-smoke", LAB_SECRET)
    try:
        total = spark.range(0, 1_000_000, numPartitions=8).selectExpr("sum(id) AS s").first()["s"]
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().keySet().toString()
    finally:
        spark.stop()
    assert total == 499_999_500_000
    assert converged["node2"] in executors and converged["node3"] in executors, executors


NO_SECRET_APPLICATION = """
import sys
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

master, name = sys.argv[1:]
builder = (
    SparkSession.Builder().master(master).appName(name)
    .config("spark.driver.host", "10.77.0.1").config("spark.driver.bindAddress", "10.77.0.1")
    .config("spark.executor.cores", "1").config("spark.cores.max", "2")
    .config("spark.executor.memory", "512m")
)
try:
    spark = builder.getOrCreate()
    try:
        print("RAN", spark.range(0, 100, numPartitions=2).count())
    finally:
        spark.stop()
except Py4JJavaError as error:
    print("REFUSED" if "stopped SparkContext" in str(error) or "shut down" in str(error) else error)
"""


def test_an_application_without_the_secret_is_refused(converged):
    """The master refuses it ("Expected SaslMessage"): after its 3 tries (20 s each) the
    application gives up and its SparkContext stops; the master never lists it. In a process of
    its own: a driver JVM keeps the settings of the first application it ran (the secret)."""
    name = f"streamlab-no-secret-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [sys.executable, "-c", NO_SECRET_APPLICATION, f"spark://{converged['node1']}:7077", name],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.stdout.strip().splitlines()[-1:] == ["REFUSED"], done.stdout + done.stderr[-3000:]
    assert "All masters are unresponsive" in done.stderr, done.stderr[-3000:]
    state = master_state(converged)
    listed = {app["name"] for app in state.get("activeapps", []) + state.get("completedapps", [])}
    assert name not in listed, listed


def test_the_secret_is_readable_by_root_and_the_service_account_only(converged):
    for host in ("node1", "node2", "node3"):
        done = on_lab_host(
            converged[host], "stat -c '%U:%G %a' /etc/streamlab/spark/spark-defaults.conf"
        )
        assert done.stdout.split() == ["root:streamlab", "640"], (host, done.stdout, done.stderr)
