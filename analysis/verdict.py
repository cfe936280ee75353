"""A run's verdict against the delivery guarantee it ran under (docs/metrics.md).

Pure Python, no Spark: the same rules for summary.json and anything else that has the counts.
"""

from __future__ import annotations

from typing import Any

AT_MOST_ONCE = "at_most_once"
AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE = "exactly_once"
DEFAULT_GUARANTEE = AT_LEAST_ONCE


# What each guarantee forbids (the same rules as roles/experiment/files/run_record.py's, which
# judges run.json from the collector's tally).
FORBIDS = {
    AT_MOST_ONCE: ("duplicates",),
    AT_LEAST_ONCE: ("loss",),
    EXACTLY_ONCE: ("loss", "duplicates"),
}


def verdict(
    guarantee: str | None, produced: int, lost: int, duplicate_records: int
) -> dict[str, Any]:
    """{guarantee, holds, lost, duplicate_records, reason}: at_most_once holds when no record
    was delivered twice, at_least_once when no acknowledged message was lost, exactly_once when
    both; holds is None for a guarantee the kit does not know. The reason names what broke
    the guarantee, or what it checked when it held."""
    chosen = guarantee or DEFAULT_GUARANTEE
    name = chosen.replace("_", "-")
    base = {"guarantee": chosen, "lost": lost, "duplicate_records": duplicate_records}
    forbids = FORBIDS.get(chosen)
    if forbids is None:
        return base | {"holds": None, "reason": f"{chosen} is not a guarantee the kit judges"}
    checks = {
        "loss": (lost, f"{lost:,} of {produced:,} acknowledged messages lost"),
        "duplicates": (
            duplicate_records,
            f"{duplicate_records:,} duplicate record{'' if duplicate_records == 1 else 's'}",
        ),
    }
    broken = [checks[kind][1] for kind in forbids if checks[kind][0]]
    if broken:
        return base | {"holds": False, "reason": f"{name} violated: " + "; ".join(broken)}
    kept = "; ".join(checks[kind][1] for kind in forbids)
    return base | {"holds": True, "reason": f"{name} held: {kept}"}


def run_guarantee(run: dict[str, Any]) -> str:
    """run.json parameters.guarantee when it is a non-empty string, else at_least_once."""
    value = (run.get("parameters") or {}).get("guarantee")
    return value if isinstance(value, str) and value else DEFAULT_GUARANTEE
