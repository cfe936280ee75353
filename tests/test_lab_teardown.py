"""playbooks/teardown.yml and playbooks/redeploy.yml on the test hosts.

Runs last of the tests that need the cluster (file order): it stops the whole lab, redeploy brings
it back healthy with the shipped defaults instead of the lab's opt-in security, one experiment
runs through them, and a teardown ends it, so that the next converge formats Kafka again with the
lab's SCRAM user (a storage formatted without one cannot take SASL_SSL).
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from conftest import (
    LAB_EXPERIMENT_RATE,
    LAB_INVENTORY,
    LAB_KAFKA_CLIENT_CONFIG,
    REPO,
    PlaybookRun,
    control_node_reaches_only_ssh,
    flink_cli_run,
    flink_rest,
    lab_inventory_copy,
    lab_kafka_settings,
    on_lab_host,
    run_playbook,
    wait_until,
)

pytestmark = pytest.mark.lab

FLINK_JOBS_CACHE = Path.home() / ".cache" / "streamlab" / "jobs"
DATA_DIR = "/var/lib/streamlab"
# What teardown keeps in the data directory: supervisord's socket and pid, the fault agent's dir.
KEPT_IN_DATA = {"supervisor", "faults"}
# What the lab turns on beyond the shipped defaults (inventory/lab/group_vars/all.yml), set back
# to the roles' defaults, as inventory/example-cluster leaves them: Kafka without SASL_SSL,
# Flink without TLS, Spark's authentication with a secret the kit generates. The lab's memory
# sizes stay: the example's would not fit this machine.
SHIPPED_DEFAULTS = {
    "kafka_sasl_enabled": False,
    "flink_tls_internal": False,
    "flink_tls_rest": False,
    "spark_authenticate_secret": "",
}
SHIPPED_COUNT = 10 * LAB_EXPERIMENT_RATE  # 10 s of messages


def results_snapshot() -> dict[str, tuple[int, int]]:
    """Every file under results/ with its size and modification time."""
    root = REPO / "results"
    return {
        str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def running_daemons(address: str) -> list[str]:
    done = on_lab_host(
        address,
        "/opt/streamlab/venv/bin/supervisorctl",
        "-c",
        "/etc/streamlab/supervisord.conf",
        "status",
    )
    up = {"RUNNING", "STARTING", "BACKOFF", "STOPPING"}
    return sorted(
        fields[0]
        for fields in map(str.split, done.stdout.splitlines())
        if fields[1:2] and fields[1] in up
    )


def data_entries(address: str) -> set[str]:
    done = on_lab_host(address, "ls", "-A", DATA_DIR)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def task_outputs(output: str, task_name: str) -> list[str]:
    """What the playbook printed for each task of that name, in order (stripped): the lines
    between its TASK header and the next header."""
    headers = list(re.finditer(r"^(?:TASK|RUNNING HANDLER|PLAY)\b(.*)$", output, re.MULTILINE))
    wanted = re.compile(rf" \[(?:[^\]]* : )?{re.escape(task_name)}\] \**")
    return [
        output[header.end() : (later.start() if later else len(output))].strip()
        for header, later in zip(headers, [*headers[1:], None], strict=True)
        if wanted.fullmatch(header.group(1))
    ]


def task_output(output: str, task_name: str) -> str:
    """What the playbook printed for the last task of that name; empty when no such task ran."""
    return (task_outputs(output, task_name) or [""])[-1]


def flink_jobs(lab: dict[str, str], tls: bool | None = None) -> dict[str, str]:
    """Job name -> state, as the JobManager on node1 reports them."""
    jobs = flink_rest(lab, "/jobs/overview", timeout_s=10, tls=tls)["jobs"]
    return {job["name"]: job["state"] for job in jobs}


def submit_flink_job(lab: dict[str, str], prefix: str) -> str:
    """A job of the kit's own jar reading prefix-in, submitted the way an experiment does;
    returns its name (streamlab-flink-<input topic>)."""
    jars = sorted(FLINK_JOBS_CACHE.glob("flink-*.jar"), key=lambda path: path.stat().st_mtime)
    assert jars, f"no Flink job jar in {FLINK_JOBS_CACHE}: the experiment tests build it first"
    remote_jar = f"{DATA_DIR}/jobs/{prefix}.jar"
    assert on_lab_host(lab["node1"], "mkdir", "-p", f"{DATA_DIR}/jobs").returncode == 0
    bootstrap = ",".join(f"{address}:9092" for address in lab.values())
    flink_cli_run(
        lab,
        jars[-1],
        remote_jar,
        ["--class", "streamlab.FlinkJob"],
        [
            *("--bootstrap", bootstrap, "--input-topic", f"{prefix}-in"),
            # written on node1 by the experiment that built the jar
            *("--kafka-config", LAB_KAFKA_CLIENT_CONFIG),
            *("--output-topic", f"{prefix}-out", "--group-id", f"{prefix}-flink"),
            *("--checkpoint-interval-s", "5", "--tolerable-failed-checkpoints", "3"),
            *("--parallelism", "1"),
        ],
    )
    return f"streamlab-flink-{prefix}-in"


# A driver of the kit's shape: an application named by the run's prefix, its script where an
# experiment puts the query's (roles/experiment/tasks/spark/submit.yml), running until stopped.
LEFTOVER_SPARK_DRIVER = """
import sys, time
from pyspark.sql import SparkSession

name, address = sys.argv[1:]
spark = (
    SparkSession.builder.appName(name)
    .config("spark.driver.host", address).config("spark.driver.bindAddress", address)
    .config("spark.cores.max", "1").config("spark.executor.memory", "512m")
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
spark.range(0, 10, numPartitions=1).count()
print("RUNNING", flush=True)
while True:
    time.sleep(1)
"""


def spark_apps(lab: dict[str, str]) -> dict[str, str]:
    """Application name -> id, as the Spark master on node1 lists its active ones."""
    with urllib.request.urlopen(f"http://{lab['node1']}:8080/json/", timeout=10) as answer:
        return {app["name"]: app["id"] for app in json.load(answer)["activeapps"]}


def start_spark_driver(lab: dict[str, str], name: str) -> None:
    """An application left running on the Spark cluster, its driver on the master host (node1)
    with the cluster's spark-defaults.conf (its secret among them), as an interrupted
    experiment leaves one; returns once the master lists it."""
    job_dir = f"{DATA_DIR}/jobs/{name}"
    script = f"{job_dir}/streamlab_spark_job.py"
    started = on_lab_host(
        lab["node1"],
        f"mkdir -p {job_dir} && cat > {script} && lib=$(readlink -f /opt/streamlab/spark)/../lib"
        " && export PYTHONPATH=$(echo $lib/pyspark.zip $lib/py4j-*-src.zip | tr ' ' :)"
        " SPARK_HOME=/opt/streamlab/spark SPARK_CONF_DIR=/etc/streamlab/spark"
        " JAVA_HOME=$(dirname $(dirname $(readlink -f /usr/bin/java)))"
        # Only the driver in the background: a backgrounded `cat` would read /dev/null.
        f" && {{ setsid nohup /opt/streamlab/venv/bin/python {script} {name} {lab['node1']}"
        f" > {job_dir}/driver.log 2>&1 < /dev/null & }}",
        input_text=LEFTOVER_SPARK_DRIVER,
    )
    assert started.returncode == 0, started.stderr
    wait_until(lambda: spark_apps(lab), lambda apps: name in apps, f"application {name}", 180)


def plan_of(output: str) -> dict:
    """The cluster plan the teardown printed (its `Say what would go on the cluster` task)."""
    block = output.split("Say what would go on the cluster", 1)[1]
    return yaml.safe_load(block[block.index("{") : block.index("\n}") + 2])["msg"]


def test_teardown_lists_then_cleans_what_it_reaches_and_redeploy_brings_the_lab_back(
    converged, tmp_path
):
    lab = converged
    results_before = results_snapshot()
    prefix = f"streamlab-teardown-{uuid.uuid4().hex[:8]}"
    foreign = f"not-the-kit-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(
        bootstrap_servers=[f"{a}:9092" for a in lab.values()], **lab_kafka_settings()
    )
    try:
        admin.create_topics(
            [NewTopic(name, 1, 1) for name in (f"{prefix}-in", f"{prefix}-out", foreign)]
        )
    finally:
        admin.close()
    job = submit_flink_job(lab, prefix)
    spark_app = f"{prefix}-spark"
    start_spark_driver(lab, spark_app)

    # Without confirmation: the plan names the job and the kit's topics, and nothing changes.
    # The control node reaches the hosts over SSH only in every teardown and the redeploy: the
    # jobs and topics are asked for from hosts of the cluster.
    with control_node_reaches_only_ssh(lab):
        listed = run_playbook("teardown.yml", LAB_INVENTORY, tmp_path=tmp_path)
    assert listed.rc == 0, listed.output[-6000:]
    assert listed.changed_nothing_on([*lab, "localhost"]), listed.changed  # its Report play
    plan = plan_of(listed.output)
    assert job in plan["cancel_jobs"], plan
    assert spark_app in plan["cancel_jobs"], plan
    assert {f"{prefix}-in", f"{prefix}-out"} <= set(plan["delete_topics"]), plan
    assert foreign not in plan["delete_topics"], plan
    assert "Nothing was changed. Run again with -e confirm=yes" in " ".join(listed.output.split())
    assert flink_jobs(lab)[job] == "RUNNING"
    assert spark_app in spark_apps(lab)
    assert "kafka" in running_daemons(lab["node2"])

    # node3 cannot be reached: the others are cleaned, node3 is named and the run fails.
    partial_inventory = lab_inventory_copy(
        tmp_path / "partial",
        lambda data: data["all"]["hosts"]["node3"].update(ansible_host="10.77.0.250"),
    )
    with control_node_reaches_only_ssh(lab):
        partial = run_playbook(
            "teardown.yml", partial_inventory, extravars={"confirm": "yes"}, tmp_path=tmp_path
        )
    assert partial.rc != 0
    assert "Not torn down: node3 (node3 unreachable" in " ".join(partial.output.split()), (
        partial.output[-3000:]
    )
    # The confirmed run cancelled it (the listing's skipped loop prints `skipping:` instead).
    assert re.search(rf"changed: \[node1[^\]]*\] => \(item={job}\)", partial.output), (
        partial.output[-6000:]
    )
    # ... stopped the Spark application's driver on the master host, before the master itself
    # was stopped (the teardown lists what is left afterwards, skipping the stop): no process of
    # it is left there ...
    stopping = "\n".join(task_outputs(partial.output, "Stop the kit's drivers on the master host"))
    assert re.search(rf"^changed: \[node1[^\]]*\] => \(item={spark_app}\)", stopping, re.M), (
        stopping or partial.output[-6000:]
    )
    left = on_lab_host(lab["node1"], "pgrep", "--full", f"jobs/{spark_app}/[s]treamlab_spark")
    assert left.returncode == 1, left.stdout
    # ... and deleted the kit's topics, asked from a Kafka host (node1, the first of the play).
    deleting = task_output(
        partial.output, "Find, and delete when asked, the topics whose names start with streamlab-"
    )
    assert re.search(r"^changed: \[node1\b", deleting, re.MULTILINE), (
        deleting or partial.output[-6000:]
    )
    for host in ("node1", "node2"):
        assert running_daemons(lab[host]) == [], host
        assert data_entries(lab[host]) <= KEPT_IN_DATA, host
    assert "kafka" in running_daemons(lab["node3"])
    assert len(data_entries(lab["node3"]) - KEPT_IN_DATA) > 0

    # Everything reached: node3 is cleaned; node1 and node2, already clean, are not changed.
    with control_node_reaches_only_ssh(lab):
        whole = run_playbook(
            "teardown.yml", LAB_INVENTORY, extravars={"confirm": "yes"}, tmp_path=tmp_path
        )
    assert whole.rc == 0, whole.output[-6000:]
    assert whole.changed["node1"] == 0 and whole.changed["node2"] == 0, whole.changed
    assert whole.changed["node3"] > 0
    assert running_daemons(lab["node3"]) == []
    assert data_entries(lab["node3"]) <= KEPT_IN_DATA

    # Redeploy: the (empty) teardown, then site.yml with the shipped defaults, ending with every
    # health check passed through them. Whatever happens from here, the lab's state is torn down
    # at the end: a Kafka formatted without the lab's SCRAM user would refuse the next converge.
    try:
        redeployed = with_shipped_defaults(lab, "redeploy.yml", tmp_path, confirm="yes")
        assert redeployed.rc == 0, redeployed.output[-6000:]
        # Every broker was stopped before it: its teardown names Kafka as not answering, and why.
        reset_plan = plan_of(redeployed.output)
        assert "kafka" in reset_plan["not_answering"], reset_plan
        assert reset_plan["kafka_problem"] == "no broker answers", reset_plan
        assert "kafka" in running_daemons(lab["node3"])
        assert "flink-jobmanager" in running_daemons(lab["node1"])
        assert job not in flink_jobs(lab, tls=False)
        assert results_snapshot() == results_before
        run_through_shipped_defaults(lab, tmp_path)
    finally:
        reset = with_shipped_defaults(lab, "teardown.yml", tmp_path, confirm="yes")
        assert reset.rc == 0, reset.output[-6000:]


def with_shipped_defaults(
    lab: dict[str, str], playbook: str, tmp_path: Path, **extravars: object
) -> PlaybookRun:
    """A playbook run on the lab with SHIPPED_DEFAULTS, reaching the hosts over SSH only."""
    with control_node_reaches_only_ssh(lab):
        return run_playbook(
            playbook,
            LAB_INVENTORY,
            extravars={**SHIPPED_DEFAULTS, **extravars},
            tmp_path=tmp_path,
        )


def run_through_shipped_defaults(lab: dict[str, str], tmp_path: Path) -> None:
    """One Flink run through the shipped defaults: its clients and the JobManager say so."""
    # Kafka now answers without SASL_SSL: a plain client lists every broker.
    admin = KafkaAdminClient(bootstrap_servers=[f"{a}:9092" for a in lab.values()])
    try:
        assert len(admin.describe_cluster()["brokers"]) == len(lab)
    finally:
        admin.close()
    # Spark's authentication runs with the secret the kit generated beside the inventory.
    secret = LAB_INVENTORY.parent / ".secrets" / "spark-authenticate-secret"
    assert secret.stat().st_mode & 0o777 == 0o600, oct(secret.stat().st_mode)
    results = tmp_path / "shipped-results"
    run_id = f"test-shipped-{uuid.uuid4().hex[:8]}"
    run = with_shipped_defaults(
        lab,
        "experiment.yml",
        tmp_path,
        engine="flink",
        count=SHIPPED_COUNT,
        rate=LAB_EXPERIMENT_RATE,
        warmup_s=4,
        run_id=run_id,
        experiment_results_dir=str(results),
        analyze_on="none",
    )
    assert run.rc == 0, run.output[-6000:]
    held = (
        f"run {run_id} (flink, fault=none): complete, at-least-once held: 0 of "
        f"{SHIPPED_COUNT:,} acknowledged messages lost"
    )
    assert held in run.output, run.output[-6000:]
    record = json.loads((results / run_id / "run.json").read_text())
    settings = record["settings"]
    assert (settings["kafka.security_protocol"], settings["kafka.sasl_mechanism"]) == (
        "PLAINTEXT",
        "(none)",
    )
    assert (settings["tls_internal"], settings["tls_rest"]) == (False, False)


def test_redeploy_refuses_without_confirmation(converged, tmp_path):
    refused = run_playbook("redeploy.yml", LAB_INVENTORY, tmp_path=tmp_path)
    assert refused.rc != 0
    assert "give -e confirm=yes" in " ".join(refused.output.split())
    assert refused.changed_nothing_on(["localhost"]), refused.changed  # refused in its first play
