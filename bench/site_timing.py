#!/usr/bin/env python3
"""Time site.yml on fresh test hosts: cold-cache download, first run (warm cache), re-run.

Also prints how long `testhosts.py up` took on a removed lab (node3's root file system cached;
with --cold-rootfs the cached one is deleted first, so the first build debootstraps it) and the
resident memory of the lab's daemons at rest after the re-run.

Run as root from the repository (`make bench`). It rebuilds the test hosts from scratch twice.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lab_playbooks
from lab_playbooks import REPO

sys.path.insert(0, str(REPO / "tests" / "lab"))
import systemd_host  # noqa: E402
import testhosts  # noqa: E402


def testhosts_cmd(*args: str) -> float:
    """Run tests/lab/testhosts.py with args, showing its output; return the wall seconds."""
    started = time.monotonic()
    subprocess.run(
        [sys.executable, str(REPO / "tests" / "lab" / "testhosts.py"), *args], check=True
    )
    return time.monotonic() - started


def fresh_hosts(count: int) -> float:
    """Remove the test hosts, then build them from scratch; return the seconds of the build
    alone (removing a converged lab waits for node3's orderly shutdown, timed apart)."""
    down = testhosts_cmd("down")
    up = testhosts_cmd("up", "--hosts", str(count))
    print(f"  (testhosts.py down {down:.1f} s, up {up:.1f} s)")
    return up


def site(
    cache_dir: str | None = None, playbooks: tuple[str, ...] = ("site.yml",)
) -> tuple[float, float, dict[str, int], str]:
    """Run site.yml (or these playbooks in one run); return wall seconds, seconds spent in
    downloads, changed count per host, and the busy share of the machine's CPU time meanwhile
    (the test hosts share its cores)."""
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
    wall, stats, shares = lab_playbooks.run(playbooks, envvars=envvars, event_handler=on_event)
    busy = f"CPU busy {shares['busy']:.0%}" if shares else "CPU busy not measured"
    changed = {host: stats.get("changed", {}).get(host, 0) for host in stats["processed"]}
    return wall, download_s, changed, busy


def java_rss_kib(pids: list[str]) -> int:
    """Summed VmRSS of the java processes among pids (as /proc of this machine shows them)."""
    total_kib = 0
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "java":
                continue
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        total_kib += next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return total_kib


def lab_daemon_rss_mib(count: int) -> dict[str, float]:
    """Resident memory of the JVMs on each test host (the lab at rest), in MiB: the processes
    of a host's network namespace, or of a host booted with systemd, its container's."""
    rss: dict[str, float] = {}
    for index in range(1, count + 1):
        host = testhosts.Host(index)
        if host.booted_with_systemd:
            leader = systemd_host.leader_pid(host.instance)
            if leader is None:
                raise SystemExit(f"{host.name} is not running: its daemons cannot be measured")
            in_container = subprocess.run(
                ["pgrep", "--ns", str(leader), "--nslist", "pid", "-x", "java"],
                capture_output=True,
                text=True,
            )
            pids = in_container.stdout.split()
        else:
            in_netns = subprocess.run(
                ["ip", "netns", "pids", host.name], capture_output=True, text=True
            )
            pids = in_netns.stdout.split()
        rss[host.name] = java_rss_kib(pids) / 1024
    return rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument(
        "--cold-rootfs",
        action="store_true",
        help=f"delete the cached root file systems ({systemd_host.CACHE_DIR}) first",
    )
    args = parser.parse_args()

    if args.cold_rootfs:
        testhosts_cmd("down")
        if systemd_host.CACHE_DIR.exists():
            shutil.rmtree(systemd_host.CACHE_DIR)
    first_lab_wall = fresh_hosts(args.hosts)
    with tempfile.TemporaryDirectory() as cold_cache:
        cold_wall, cold_download, _, cold_busy = site(cold_cache)
    second_lab_wall = fresh_hosts(args.hosts)
    first_wall, warm_download, _, first_busy = site()
    again_wall, _, changed, again_busy = site()
    zk_kafka_wall, _, zk_kafka_changed, zk_kafka_busy = site(
        playbooks=("zookeeper.yml", "kafka.yml")
    )

    rss = lab_daemon_rss_mib(args.hosts)
    per_host = ", ".join(f"{host} {mib:.0f}" for host, mib in rss.items())
    rootfs = "built cold" if args.cold_rootfs else "cached"
    print(
        f"test hosts: testhosts.py up on a removed lab {first_lab_wall:.1f} s (node3's root "
        f"file system {rootfs}), again {second_lab_wall:.1f} s (cached)"
    )
    print(f"site.yml on {args.hosts} fresh test hosts ({os.cpu_count()} cores)")
    print(
        f"  cold cache: artifact download {cold_download:7.1f} s (whole run {cold_wall:.1f} s, "
        f"{cold_busy})"
    )
    print(
        f"  warm cache: first run         {first_wall:7.1f} s (downloads {warm_download:.1f} s, "
        f"{first_busy})"
    )
    print(
        f"  idempotent re-run             {again_wall:7.1f} s ({again_busy}), changed per host: "
        f"{changed}"
    )
    print(
        f"  ZooKeeper + Kafka re-run      {zk_kafka_wall:7.1f} s (zookeeper.yml, kafka.yml, "
        f"{zk_kafka_busy}), changed per host: {zk_kafka_changed}"
    )
    print(f"  daemon RSS at rest            {sum(rss.values()):7.0f} MiB ({per_host})")


if __name__ == "__main__":
    main()
