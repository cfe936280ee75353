#!/usr/bin/env python3
"""Write a copy of the test lab's inventory (inventory/lab) with Flink's TLS off, for the benches
that compare engines: Storm's and Spark's traffic between their own workers has no TLS in the
kit, so Flink with it would not be on equal footing (docs/engines.md). Kafka's SASL_SSL stays:
every engine's clients go through it alike.

    python bench/equal_footing_inventory.py [--out bench/out/lab-equal]

Then `ansible-playbook -i bench/out/lab-equal/hosts.yml playbooks/site.yml` converges the lab
with it, and the benches take it with -i or --inventory.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
LAB = REPO / "inventory" / "lab"
# Off for the comparison; the rest of the lab's settings stay as they are.
EQUAL_FOOTING = {"flink_tls_internal": False, "flink_tls_rest": False}


def write(out: Path) -> Path:
    hosts = LAB / "hosts.yml"
    if not hosts.is_file():
        raise SystemExit(f"{hosts} does not exist: run `make lab` first, which writes it")
    (out / "group_vars").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(hosts, out / "hosts.yml")
    variables = yaml.safe_load((LAB / "group_vars" / "all.yml").read_text()) or {}
    variables.update(EQUAL_FOOTING)
    (out / "group_vars" / "all.yml").write_text(
        "---\n# Written by bench/equal_footing_inventory.py from inventory/lab: do not edit.\n"
        + yaml.safe_dump(variables, sort_keys=False)
    )
    return out / "hosts.yml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "lab-equal")
    print(write(parser.parse_args().out))


if __name__ == "__main__":
    main()
