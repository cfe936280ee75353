#!/usr/bin/env python3
"""Time resetting the test hosts: teardown (state only), redeploy (teardown then site.yml), and
purge followed by site.yml; each repeated, with the changed count per host.

Needs converged test hosts (make lab, then site.yml or make test); leaves them converged.
Run as root from the repository (`make bench-reset`). The hosts share this machine's cores.
"""

from __future__ import annotations

import argparse
import statistics

import lab_playbooks

CONFIRMED = {"confirm": "yes"}


def timed(playbooks: tuple[str, ...], extravars: dict | None = None) -> tuple[float, int]:
    wall, stats = lab_playbooks.run(playbooks, extravars=extravars)
    return wall, sum(stats.get("changed", {}).values())


def spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:6.1f} s"
    each = ", ".join(f"{value:.1f}" for value in values)
    return (
        f"{statistics.mean(values):6.1f} s ± {statistics.stdev(values):4.1f} "
        f"(n={len(values)}, in order: {each})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()

    figures: dict[str, list[float]] = {
        "teardown, listing only": [],
        "teardown (state), lab running": [],
        "teardown again (nothing left)": [],
        "site.yml after a teardown": [],
        "redeploy.yml, lab running": [],
        "purge, lab running": [],
        "site.yml after a purge": [],
    }
    changed_again: list[int] = []
    for repetition in range(1, args.repetitions + 1):
        print(f"repetition {repetition}/{args.repetitions}", flush=True)
        figures["teardown, listing only"].append(timed(("teardown.yml",))[0])
        figures["teardown (state), lab running"].append(timed(("teardown.yml",), CONFIRMED)[0])
        wall, changed = timed(("teardown.yml",), CONFIRMED)
        figures["teardown again (nothing left)"].append(wall)
        changed_again.append(changed)
        figures["site.yml after a teardown"].append(timed(("site.yml",))[0])
        figures["redeploy.yml, lab running"].append(timed(("redeploy.yml",), CONFIRMED)[0])
        figures["purge, lab running"].append(
            timed(("teardown.yml",), {**CONFIRMED, "purge": "true"})[0]
        )
        figures["site.yml after a purge"].append(timed(("site.yml",))[0])

    print("\nwall time on the 3 test hosts (they share this machine's 2 cores):")
    for name, values in figures.items():
        print(f"  {name:32} {spread(values)}")
    print(f"  changed tasks in the second teardown: {changed_again}")


if __name__ == "__main__":
    main()
