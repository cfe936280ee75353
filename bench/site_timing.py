#!/usr/bin/env python3
"""Time site.yml on fresh test hosts: cold-cache download, first run (warm cache), re-run.

Also prints the resident memory of the lab's daemons at rest after the re-run.

Run as root from the repository (`make bench`). It rebuilds the test hosts from scratch twice.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import lab_playbooks
from lab_playbooks import REPO


def fresh_hosts(count: int) -> None:
    subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "lab" / "testhosts.py"),
            "up",
            "--fresh",
            "--hosts",
            str(count),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def site(
    cache_dir: str | None = None, playbooks: tuple[str, ...] = ("site.yml",)
) -> tuple[float, float, dict[str, int]]:
    """Run site.yml (or these playbooks in one run); return wall seconds, seconds spent in
    downloads, changed count per host."""
    download_s = 0.0

    def on_event(event: dict) -> bool:
        nonlocal download_s
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("task", "").startswith(
            "Download and verify"
        ):
            download_s += float(data.get("duration") or 0)
        return True  # keep the event, so the run's stats are recorded

    envvars = {"STREAMLAB_CACHE_DIR": cache_dir} if cache_dir else {}
    wall, stats = lab_playbooks.run(playbooks, envvars=envvars, event_handler=on_event)
    changed = {host: stats.get("changed", {}).get(host, 0) for host in stats["processed"]}
    return wall, download_s, changed


def lab_daemon_rss_mib() -> dict[str, float]:
    """Resident memory of the JVMs on each test host (the lab at rest), in MiB."""
    rss: dict[str, float] = {}
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    for name in sorted(line.split()[0] for line in listing.stdout.splitlines() if line.strip()):
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
        total_kib = 0
        for pid in pids.stdout.split():
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() != "java":
                    continue
                status = Path(f"/proc/{pid}/status").read_text().splitlines()
            except OSError:
                continue
            total_kib += next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        rss[name] = total_kib / 1024
    return rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3)
    args = parser.parse_args()

    fresh_hosts(args.hosts)
    with tempfile.TemporaryDirectory() as cold_cache:
        cold_wall, cold_download, _ = site(cold_cache)
    fresh_hosts(args.hosts)
    first_wall, warm_download, _ = site()
    again_wall, _, changed = site()
    zk_kafka_wall, _, zk_kafka_changed = site(playbooks=("zookeeper.yml", "kafka.yml"))

    rss = lab_daemon_rss_mib()
    per_host = ", ".join(f"{host} {mib:.0f}" for host, mib in rss.items())
    print(f"site.yml on {args.hosts} fresh test hosts ({os.cpu_count()} cores)")
    print(f"  cold cache: artifact download {cold_download:7.1f} s (whole run {cold_wall:.1f} s)")
    print(f"  warm cache: first run         {first_wall:7.1f} s (downloads {warm_download:.1f} s)")
    print(f"  idempotent re-run             {again_wall:7.1f} s, changed per host: {changed}")
    print(
        f"  ZooKeeper + Kafka re-run      {zk_kafka_wall:7.1f} s (zookeeper.yml, kafka.yml), "
        f"changed per host: {zk_kafka_changed}"
    )
    print(f"  daemon RSS at rest            {sum(rss.values()):7.0f} MiB ({per_host})")


if __name__ == "__main__":
    main()
