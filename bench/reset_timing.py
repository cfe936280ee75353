#!/usr/bin/env python3
"""Time resetting the test hosts: teardown (state only), redeploy (teardown then site.yml), and
purge followed by site.yml; each repeated, with the changed count per host.

Needs converged test hosts (make lab, then site.yml; make test leaves them torn down); leaves
them converged.
Run as root from the repository (`make bench-reset`). The hosts share this machine's cores: each
figure also gives the share of the machine's CPU time that was busy while it ran (/proc/stat, as
`make test` reports it). Near 100 %, the playbook waited on this machine's cores rather than on
its daemons or SSH, and hosts with cores of their own could take less.
"""

from __future__ import annotations

import argparse
import statistics

import lab_playbooks

CONFIRMED = {"confirm": "yes"}


def timed(
    playbooks: tuple[str, ...], extravars: dict | None = None
) -> tuple[float, int, float | None]:
    """Wall seconds, changed tasks, and the busy share of the machine's CPU time meanwhile."""
    played = lab_playbooks.run(playbooks, extravars=extravars)
    busy = played.cpu_shares and played.cpu_shares["busy"]
    return played.wall_s, sum(played.stats.get("changed", {}).values()), busy


def spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:6.1f} s"
    each = ", ".join(f"{value:.1f}" for value in values)
    return (
        f"{statistics.mean(values):6.1f} s ± {statistics.stdev(values):4.1f} "
        f"(n={len(values)}, in order: {each})"
    )


def busy(values: list[float | None]) -> str:
    measured = [value for value in values if value is not None]
    if not measured:
        return "CPU busy: not measured"
    return "CPU busy " + ", ".join(f"{value:.0%}" for value in measured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()

    figures: dict[str, list[tuple[float, float | None]]] = {
        "teardown, listing only": [],
        "teardown (state), lab running": [],
        "teardown again (nothing left)": [],
        "site.yml after a teardown": [],
        "redeploy.yml, lab running": [],
        "purge, lab running": [],
        "site.yml after a purge": [],
    }
    changed_again: list[int] = []

    def take(name: str, playbook: str, extravars: dict | None = None) -> int:
        wall, changed, busy_share = timed((playbook,), extravars)
        figures[name].append((wall, busy_share))
        return changed

    for repetition in range(1, args.repetitions + 1):
        print(f"repetition {repetition}/{args.repetitions}", flush=True)
        take("teardown, listing only", "teardown.yml")
        take("teardown (state), lab running", "teardown.yml", CONFIRMED)
        changed_again.append(take("teardown again (nothing left)", "teardown.yml", CONFIRMED))
        take("site.yml after a teardown", "site.yml")
        take("redeploy.yml, lab running", "redeploy.yml", CONFIRMED)
        take("purge, lab running", "teardown.yml", {**CONFIRMED, "purge": "true"})
        take("site.yml after a purge", "site.yml")

    print("\nwall time on the 3 test hosts (they share this machine's 2 cores), and the busy")
    print("share of the machine's CPU time during each run:")
    for name, runs in figures.items():
        walls = [wall for wall, _ in runs]
        print(f"  {name:32} {spread(walls)}; {busy([share for _, share in runs])}")
    print(f"  changed tasks in the second teardown: {changed_again}")


if __name__ == "__main__":
    main()
