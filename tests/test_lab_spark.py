"""Spark on the test hosts: the master sees both workers, and a PySpark job runs on them."""

from __future__ import annotations

import json
import urllib.request

import pytest
from pyspark.sql import SparkSession

from conftest import role_default

pytestmark = pytest.mark.lab


def master_state(lab: dict[str, str]) -> dict:
    with urllib.request.urlopen(f"http://{lab['node1']}:8080/json/", timeout=5) as response:
        return json.load(response)


def test_master_reports_both_workers_alive(converged):
    state = master_state(converged)
    assert state["status"] == "ALIVE"
    alive = sorted(w["host"] for w in state["workers"] if w["state"] == "ALIVE")
    assert alive == [converged["node2"], converged["node3"]]


def test_pyspark_job_runs_on_executors_of_both_workers(converged):
    spark = (
        SparkSession.builder.master(f"spark://{converged['node1']}:7077")
        .appName("streamlab-smoke")
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
        .getOrCreate()
    )
    try:
        total = spark.range(0, 1_000_000, numPartitions=8).selectExpr("sum(id) AS s").first()["s"]
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().keySet().toString()
    finally:
        spark.stop()
    assert total == 499_999_500_000
    assert converged["node2"] in executors and converged["node3"] in executors, executors
