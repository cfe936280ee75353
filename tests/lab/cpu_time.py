"""How this machine's CPU time went between two readings of /proc/stat: busy, idle, and stolen
by the hypervisor. The test hosts share this machine's cores, so `make test`'s runner
(tests/run_suite.py) and the benches (bench/) print it beside their durations: near 100 % busy,
a run waited on this machine's cores rather than on its daemons or SSH."""

from __future__ import annotations

from pathlib import Path

# /proc/stat's "cpu" line, in clock ticks of all cores (guest time is already in user).
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_ticks(proc_stat: str) -> dict[str, int]:
    """The machine's CPU time so far by kind, from /proc/stat's text ({} where it has none)."""
    for line in proc_stat.splitlines():
        fields = line.split()
        if fields[:1] == ["cpu"]:
            # An old kernel's line may stop before steal.
            return dict(zip(CPU_FIELDS, (int(field) for field in fields[1:9]), strict=False))
    return {}


def read_cpu_ticks() -> dict[str, int]:
    try:
        return cpu_ticks(Path("/proc/stat").read_text())
    except OSError:
        return {}


def cpu_shares(before: dict[str, int], after: dict[str, int]) -> dict[str, float] | None:
    """The shares of the machine's CPU time between two readings that were busy, idle, and
    stolen (time this virtual machine was ready to run but its hypervisor ran something else);
    None without two readings that differ."""
    spent = {kind: after.get(kind, 0) - before.get(kind, 0) for kind in CPU_FIELDS}
    total = sum(spent.values())
    if not before or not after or total <= 0:
        return None
    idle = spent["idle"] + spent["iowait"]
    return {
        "busy": (total - idle - spent["steal"]) / total,
        "idle": idle / total,
        "stolen": spent["steal"] / total,
    }


def cpu_use(before: dict[str, int], after: dict[str, int]) -> str:
    """How the machine's CPU time went between two readings, in words (cpu_shares)."""
    return shares_in_words(cpu_shares(before, after))


def shares_in_words(shares: dict[str, float] | None) -> str:
    """cpu_shares' result as the runner and the benches print it."""
    if shares is None:
        return "the machine's CPU time: not measured (no /proc/stat, or no time between readings)"
    return (
        f"the machine's CPU time: {shares['busy']:.0%} busy, {shares['idle']:.0%} idle, "
        f"{shares['stolen']:.0%} stolen by the hypervisor"
    )
