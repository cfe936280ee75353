"""A run's verdict against the delivery guarantee it ran under (docs/metrics.md).

Pure Python, no Spark: the same rules for summary.json and anything else that has the counts.
"""

from __future__ import annotations

from typing import Any

AT_MOST_ONCE = "at_most_once"
AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE = "exactly_once"
DEFAULT_GUARANTEE = AT_LEAST_ONCE
GUARANTEES = (AT_MOST_ONCE, AT_LEAST_ONCE, EXACTLY_ONCE)


def _count(value: int) -> str:
    return f"{value:,}"


def verdict(
    guarantee: str | None, produced: int, lost: int, duplicate_records: int
) -> dict[str, Any]:
    """{guarantee, holds, lost, duplicate_records, reason}: at_most_once holds when no record
    was delivered twice, at_least_once when no acknowledged message was lost, exactly_once when
    both; holds is None for a guarantee the kit does not know."""
    chosen = guarantee or DEFAULT_GUARANTEE
    name = chosen.replace("_", "-")
    lost_text = f"{_count(lost)} of {_count(produced)} acknowledged messages lost"
    dup_text = (
        f"{_count(duplicate_records)} duplicate record{'' if duplicate_records == 1 else 's'}"
    )
    if chosen == AT_LEAST_ONCE:
        holds: bool | None = lost == 0
        detail = lost_text
    elif chosen == AT_MOST_ONCE:
        holds = duplicate_records == 0
        detail = f"{dup_text} ({_count(produced)} acknowledged messages)"
    elif chosen == EXACTLY_ONCE:
        holds = lost == 0 and duplicate_records == 0
        detail = f"{lost_text}, {dup_text}"
    else:
        holds = None
        detail = f"unknown guarantee (known: {', '.join(GUARANTEES)}); {lost_text}, {dup_text}"
    state = {True: "held", False: "violated", None: "not judged"}[holds]
    return {
        "guarantee": chosen,
        "holds": holds,
        "lost": lost,
        "duplicate_records": duplicate_records,
        "reason": f"{name} {state}: {detail}",
    }


def run_guarantee(run: dict[str, Any]) -> str:
    """run.json parameters.guarantee when it is a non-empty string, else at_least_once."""
    value = (run.get("parameters") or {}).get("guarantee")
    return value if isinstance(value, str) and value else DEFAULT_GUARANTEE
