#!/usr/bin/env python3
"""Figures of the experiment on the test hosts (issue 4): producer capacity and pacing, experiment
overhead per engine, baseline end-to-end latency per engine.

Needs converged test hosts (`make lab` and site.yml). Run as root from the repository:
`make bench-experiment`. Every figure printed is measured in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import lab_playbooks

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from analysis.study.report import phase_table  # noqa: E402

DRIVER = "10.77.0.11"
BOOTSTRAP = "10.77.0.11:9092,10.77.0.12:9092,10.77.0.13:9092"
SSH = ["ssh", "-i", "/srv/lab/ssh/id_ed25519", "-o", "BatchMode=yes"]
SSH += ["-o", "UserKnownHostsFile=/srv/lab/ssh/known_hosts", f"root@{DRIVER}"]
PYTHON = "env PYTHONPATH=/opt/streamlab/driver /opt/streamlab/venv/bin/python"
# How the kit's clients connect to the lab's Kafka (SASL_SSL there): the file experiments write.
KAFKA = f"--bootstrap {BOOTSTRAP} --kafka-config /etc/streamlab/kafka-client.properties"


def on_driver(command: str) -> str:
    """Run a shell command on the driver host (node1) over SSH; return its stdout."""
    done = subprocess.run([*SSH, command], capture_output=True, text=True, check=False)
    if done.returncode not in (0, 3):
        sys.exit(f"on the driver host `{command}` failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def produce_alone(count: int, rate: float) -> dict:
    """Producer alone against the lab's Kafka, from the driver host, into a fresh topic."""
    topic = f"streamlab-bench-{uuid.uuid4().hex[:8]}"
    work = f"/tmp/{topic}"
    on_driver(
        f"{PYTHON} -m producer.topics {KAFKA} --partitions 4 --replication 3 "
        f"{topic} && mkdir -p {work}"
    )
    on_driver(
        f"{PYTHON} -m producer.produce {KAFKA} --topic {topic} --count {count} "
        f"--rate {rate} --seed 1 --out {work}/produced.jsonl > {work}/log 2>&1"
    )
    return json.loads(on_driver(f"cat {work}/produced.summary.json && rm -rf {shlex.quote(work)}"))


def experiment(engine: str, count: int, rate: int, results: Path) -> tuple[float, Path, str]:
    """Wall seconds, the run's directory, and how the machine's CPU time went meanwhile."""
    run_id = f"bench-{engine}-{uuid.uuid4().hex[:8]}"
    extravars = {"engine": engine, "count": count, "rate": rate, "run_id": run_id}
    wall, _, shares = lab_playbooks.run(
        ("experiment.yml",), extravars | {"experiment_results_dir": str(results)}
    )
    return wall, results / run_id, lab_playbooks.shares_in_words(shares)


def percentile(sorted_values: list[int], q: float) -> float:
    return float(sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))])


def end_to_end_ms(run: Path) -> list[int]:
    """recv_ms of each id's first arrival minus its intended send time (one clock: the driver)."""
    intended = {}
    for line in (run / "produced.jsonl").read_text().splitlines():
        record = json.loads(line)
        intended[record["msg_id"]] = record["intended_ms"]
    first: dict[int, int] = {}
    for line in (run / "received.jsonl").read_text().splitlines():
        record = json.loads(line)
        msg_id = record["msg_id"]
        if msg_id in intended and msg_id not in first:
            first[msg_id] = record["recv_ms"]
    return sorted(first[i] - intended[i] for i in first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity-count", type=int, default=300_000)
    parser.add_argument("--paced-count", type=int, default=100_000)
    parser.add_argument("--count", type=int, default=40_000, help="messages per experiment")
    parser.add_argument("--rate", type=int, default=2_000, help="msg/s per experiment")
    parser.add_argument("--runs", type=int, default=4, help="experiments per engine")
    args = parser.parse_args()

    print(f"experiment figures on the test hosts ({os.cpu_count()} cores, driver {DRIVER})")
    # The producer code on the driver host is this checkout's, so experiments time themselves only.
    lab_playbooks.run(("driver.yml",))
    unthrottled = produce_alone(args.capacity_count, 1_000_000)
    print(
        f"  producer alone, unthrottled, acks=all: {unthrottled['achieved_rate']:9.0f} msg/s "
        f"sustained over {args.capacity_count} messages ({unthrottled['errors']} errors, "
        f"{unthrottled['client']['security_protocol']})"
    )
    paced = produce_alone(args.paced_count, 5_000)
    error = abs(paced["achieved_rate"] - 5_000) / 5_000 * 100
    print(
        f"  producer alone at 5000 msg/s: achieved {paced['achieved_rate']:.1f} msg/s "
        f"(error {error:.3f} %), send lag p50 {paced['send_lag_ms']['p50']:.2f} ms, "
        f"p99 {paced['send_lag_ms']['p99']:.2f} ms, max {paced['send_lag_ms']['max']:.1f} ms"
    )
    with tempfile.TemporaryDirectory() as results:
        runs = []
        for _ in range(args.runs):
            for engine in ("flink", "storm"):
                wall, run, cpu = experiment(engine, args.count, args.rate, Path(results))
                runs.append(run)
                produced = json.loads((run / "produced.summary.json").read_text())
                received = json.loads((run / "received.summary.json").read_text())
                producing_s = (produced["end_ms"] - produced["start_ms"]) / 1000
                latency = end_to_end_ms(run)
                print(
                    f"  {engine:5}: experiment.yml {wall:6.1f} s, producer {producing_s:5.1f} s, "
                    f"overhead {wall - producing_s:5.1f} s; {args.count} msgs at {args.rate}/s: "
                    f"missing {received['missing']}, duplicates {received['duplicates']}; "
                    f"end-to-end latency p50 {percentile(latency, 0.50):.0f} ms, "
                    f"p99 {percentile(latency, 0.99):.0f} ms"
                )
                print(f"         while experiment.yml ran, {cpu}")
        # Where each run's time went, from its run.json phases (control node's clock).
        print(f"  phases over {args.runs} run(s) per engine:")
        for line in phase_table(runs):
            print(f"    {line}")


if __name__ == "__main__":
    main()
