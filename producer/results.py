"""Reading the engine's result records and writing them as received.jsonl lines."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

RAW_LIMIT = 200


@dataclass(frozen=True)
class ResultValue:
    """What a result record says; msg_id None means malformed, and raw keeps its beginning."""

    msg_id: int | None
    processed_ms: int | None
    raw: str | None = None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_result(value: bytes | None) -> ResultValue:
    """Parse a record value: a JSON object with an integer msg_id (processed_ms optional)."""
    try:
        data = json.loads(value) if value is not None else None
    except (ValueError, TypeError):
        data = None
    if not isinstance(data, dict) or not _is_int(data.get("msg_id")):
        return ResultValue(None, None, raw_text(value))
    return ResultValue(data["msg_id"], epoch_ms(data.get("processed_ms")))


def epoch_ms(value: Any) -> int | None:
    """An integer millisecond time from a JSON number, None for anything else."""
    if _is_int(value):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


def raw_text(value: bytes | None) -> str:
    """The value's first RAW_LIMIT characters, undecodable bytes replaced."""
    if value is None:
        return ""
    return value[: RAW_LIMIT * 4].decode("utf-8", errors="replace")[:RAW_LIMIT]


def received_line(
    result: ResultValue, recv_ms: int, partition: int, offset: int, broker_ms: int | None = None
) -> str:
    """One received.jsonl line; broker_ms is the record's LogAppendTime timestamp, if it has one."""
    row: dict[str, Any] = {
        "msg_id": result.msg_id,
        "recv_ms": recv_ms,
        "partition": partition,
        "offset": offset,
        "processed_ms": result.processed_ms,
        "broker_ms": broker_ms,
    }
    if result.raw is not None:
        row["raw"] = result.raw
    return json.dumps(row, separators=(",", ":")) + "\n"
