"""report.md, report.html (plots embedded) and the short table summarize prints.

A report is a list of blocks (headings, paragraphs, tables, images) rendered twice, so the
Markdown and the HTML always say the same thing.
"""

from __future__ import annotations

import base64
import html
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis import engines

MS_PER_S = 1000


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]


@dataclass(frozen=True)
class Image:
    path: str  # relative to the report
    title: str


Block = Heading | Paragraph | Table | Image


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write a file under a temporary name in its directory, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2) + "\n")


# ---------------------------------------------------------------- number formats


def count(value: Any) -> str:
    return "–" if value is None else f"{value:,}".replace(",", " ")


def rate(value: float | None) -> str:
    """A share as a percentage with enough digits for small rates."""
    if value is None:
        return "–"
    return f"{value * 100:.4g} %"


def number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return str(value)


# A fault's recovery_s is null when no acknowledged message produced after the fault opened 5 s
# of on-time delivery before producing ended (docs/metrics.md): the run does not show a
# recovery, which is not evidence that the engine would never have recovered.
NO_RECOVERY = "not in run"


def seconds(value: float | None, missing: str = "–") -> str:
    return missing if value is None else f"{value:.3f} s"


def recovery_text(fault: dict[str, Any]) -> str:
    """A fault's recovery: its time, or for a censored one its lower bound (`>= 41.000 s`);
    `not in run` for an older summary without the bound."""
    if fault.get("recovery_s") is not None:
        return seconds(fault["recovery_s"])
    bound = fault.get("recovery_at_least_s")
    return f">= {seconds(bound)} (censored)" if bound is not None else NO_RECOVERY


def verdict_text(summary: dict[str, Any]) -> str:
    """The verdict's one line, VIOLATED in capitals; '–' for a summary without one."""
    verdict = summary.get("verdict")
    if not isinstance(verdict, dict):
        return "–"
    reason = str(verdict.get("reason") or "")
    return reason.replace("violated", "VIOLATED", 1) if verdict.get("holds") is False else reason


def _phase_row(label: str, phase: dict[str, Any] | None, origin: int | None) -> list[str]:
    if not phase:
        return [label, "–", "–", "–", "–", "–", "–"]
    return [
        label,
        f"{offset_s(phase.get('from_ms'), origin)} … {offset_s(phase.get('to_ms'), origin)}",
        count(phase.get("count")),
        *(number(phase.get(name)) for name in ("p50", "p99", "p99.9", "max")),
    ]


def offset_s(time_ms: int | None, origin_ms: int | None) -> str:
    if time_ms is None or origin_ms is None:
        return "–"
    return f"{(time_ms - origin_ms) / MS_PER_S:+.3f} s"


# ---------------------------------------------------------------- content


def _delivery_rows(s: dict[str, Any]) -> list[list[str]]:
    return [
        ["produced (acknowledged ids)", count(s["produced"]), ""],
        ["received records", count(s["received_records"]), ""],
        ["received unique ids", count(s["received_unique"]), ""],
        ["malformed records", count(s["malformed_records"]), ""],
        ["lost", count(s["lost"]), rate(s["loss_rate"])],
        *([["where the lost were", lost_where_text(s), ""]] if lost_where_text(s) else []),
        ["duplicate records", count(s["duplicate_records"]), rate(s["duplicate_rate"])],
        [
            "duplicated messages",
            count(s["duplicated_messages"]),
            rate(s["duplicated_messages_rate"]),
        ],
        ["not acknowledged (produced.jsonl)", count(s["unacked"]), ""],
        ["received but not acknowledged", count(s["unacked_received"]), ""],
        ["received but never produced", count(s["received_not_produced"]), ""],
    ]


def lost_where_text(s: dict[str, Any]) -> str:
    """Which input partitions the lost messages were on and when they were sent, from the
    first fault's start (or the run's first message): empty when nothing was lost."""
    where = s.get("lost_where") or {}
    if not s.get("lost") or not where.get("by_partition"):
        return ""
    partitions = ", ".join(f"{p} ({count(n)})" for p, n in where["by_partition"].items())
    faults = s.get("faults") or []
    origin, label = (
        (faults[0]["start_ms"], "fault 1's start")
        if faults
        else (s.get("first_intended_ms"), "the first message")
    )
    return (
        f"input partitions {partitions}; sent {offset_s(where.get('first_sent_ms'), origin)} to "
        f"{offset_s(where.get('last_sent_ms'), origin)} from {label}"
    )


def _fault_rows(s: dict[str, Any]) -> list[list[str]]:
    origin = s.get("first_intended_ms")
    rows = []
    for number_, fault in enumerate(s["faults"], start=1):
        rows.append(
            [
                str(number_),
                f"{fault.get('fault')} {fault.get('host') or ''}".strip(),
                offset_s(fault["start_ms"], origin),
                offset_s(fault.get("end_ms"), origin),
                seconds(fault["stall_s"], "none"),
                recovery_text(fault),
                f"{fault['threshold_ms']} ms",
                number(fault["baseline_p99_ms"]),
                count(fault["baseline_messages"]),
            ]
        )
    return rows


TIMELINE_HEADERS = [
    "#",
    "detected",
    "engine whole",
    "first output",
    "caught up",
    "recovery",
    "failure cost (ms)",
    "partition stall",
    "duplicates",
    "replayed",
    "checkpoint age",
]


def _caught_up_text(fault: dict[str, Any]) -> str:
    if fault.get("caught_up_censored"):
        return "not in run (censored)"
    return seconds(fault.get("caught_up_s"))


def _recovery_timeline_rows(s: dict[str, Any]) -> list[list[str]]:
    """Per fault, seconds from its start: the engine's word, the output, the backlog."""
    rows = []
    for number_, fault in enumerate(s["faults"], start=1):
        stalls = fault.get("partition_stalls")
        worst = max(stalls, key=lambda p: p["stall_s"])["partition"] if stalls else None
        stall = (
            f"{seconds(fault.get('partition_stall_s'))} (partition {worst})"
            if worst is not None
            else "–"
        )
        age = fault.get("checkpoint_age_s")
        rows.append(
            [
                str(number_),
                seconds(fault.get("detected_s")),
                seconds(fault.get("engine_whole_s")),
                seconds(fault.get("first_output_s")),
                _caught_up_text(fault),
                recovery_text(fault),
                number(fault.get("failure_cost_ms")),
                stall,
                count(fault.get("duplicate_records")),
                seconds(fault.get("replayed_s")),
                seconds(age) if age is not None else (fault.get("checkpoint_age_note") or "–"),
            ]
        )
    return rows


def _phase_blocks(s: dict[str, Any]) -> list[Block]:
    """The steady state the run shows, and its latency before the first fault and after the
    last recovery (nothing for an older summary)."""
    state = s.get("steady_state")
    phases = s.get("latency_phases")
    if not isinstance(state, dict) or not isinstance(phases, dict):
        return []
    origin = s.get("first_intended_ms")
    if state.get("reached"):
        where = (
            f"Steady state from {offset_s(state.get('from_ms'), origin)} (detected at "
            f"{offset_s(state.get('detected_from_ms'), origin)}, warm-up to "
            f"{offset_s(state.get('warmup_from_ms'), origin)})."
        )
    else:
        where = (
            "**No steady state reached** before the first fault (or the end): latency or "
            "backlog still fell; the phases below start at the warm-up's end, "
            f"{offset_s(state.get('warmup_from_ms'), origin)}, and are not steady figures."
        )
    reason = phases.get("after_recovery_reason")
    after_label = "after last recovery" + (f" ({reason})" if reason else "")
    return [
        Paragraph(f"{where} Method: {state.get('method')}."),
        Table(
            ["phase", "due (from first message)", "count", "p50", "p99", "p99.9", "max"],
            [
                _phase_row(
                    "before first fault" if s.get("faults") else "steady (no fault)",
                    phases.get("before_fault"),
                    origin,
                ),
                _phase_row(after_label, phases.get("after_recovery"), origin),
            ],
        ),
    ]


def _timeline_blocks(s: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = []
    for number_, fault in enumerate(s["faults"], start=1):
        timeline = fault.get("engine_timeline") or {}
        rows = [
            [f"{event['offset_s']:+.3f} s", event["source"], _event_text(event["event"])]
            for event in timeline.get("events", [])
        ]
        lag = timeline.get("lag")
        if lag:
            rows.append(
                [
                    "0 … +120 s",
                    "consumer lag",
                    f"before {number(lag['lag_before'])}, max {number(lag['max_lag'])}, "
                    f"max backlog {number(lag['max_backlog'])} ({lag['samples']} samples)",
                ]
            )
        if rows:
            blocks.append(Paragraph(f"Engine timeline around fault {number_}:"))
            blocks.append(Table(["time from fault", "source", "event"], rows))
    return blocks


def _event_text(event: Any) -> str:
    return event if isinstance(event, str) else json.dumps(event, separators=(",", ":"))


def _engine_rows(evidence: dict[str, Any]) -> list[list[str]]:
    """Each engine module's rows of its evidence (analysis/engines/)."""
    return [
        row
        for module in engines.modules()
        if evidence.get(module.NAME)
        for row in module.report_rows(evidence[module.NAME])
    ]


def blocks(summary: dict[str, Any], plots: Sequence[tuple[str, str]]) -> list[Block]:
    s = summary
    out: list[Block] = [Heading(f"Run {s['run_id']}", 1)]
    facts = [f"engine **{s['engine']}**", f"fault schedule **{s.get('fault') or 'none'}**"]
    if s.get("status"):
        facts.append(f"status **{s['status']}**")
    out.append(Paragraph(", ".join(facts) + "."))
    if s["partial_inputs"]:
        out.append(
            Paragraph(
                "Partial inputs (their writer did not finish): "
                + ", ".join(f"`{name}`" for name in s["partial_inputs"])
                + "."
            )
        )
    if s.get("parameters"):
        pairs = ", ".join(f"{k}={v}" for k, v in sorted(s["parameters"].items()) if v is not None)
        out.append(Paragraph(f"Parameters: {pairs}."))

    out.append(Heading("Delivery"))
    if s.get("verdict"):
        out.append(Paragraph(f"Verdict: **{verdict_text(s)}**."))
    out.append(Table(["", "count", "share of produced"], _delivery_rows(s)))

    latency = s["latency_ms"]
    out.append(Heading("Latency"))
    out.append(
        Paragraph(
            f"First delivery - intended send time, over {count(latency['count'])} acknowledged "
            f"messages due at least {number(s['warmup_s'])} s after the first one "
            "(nearest-rank percentiles, ms)."
        )
    )
    names = ["p50", "p90", "p99", "p99.9", "max", "mean"]
    out.append(Table(names, [[number(latency[name]) for name in names]]))
    parts = s.get("latency_parts_ms") or {}
    if parts:
        out.append(
            Paragraph(
                "Where it goes, from the first delivery's stamps (docs/metrics.md): send lag "
                "(sent - intended), to the engine (processed - sent), engine to broker (broker "
                "append - processed), broker to collector (received - broker append), in ms."
            )
        )
        out.append(
            Table(
                ["part", "count", "p50", "p99", "max"],
                [
                    [name, count(part["count"]), *(number(part[k]) for k in ("p50", "p99", "max"))]
                    for name, part in parts.items()
                ],
            )
        )

    out.extend(_phase_blocks(s))

    throughput = s["throughput"]
    out.append(Heading("Throughput"))
    out.append(
        Table(
            ["", "mean /s", "max /s", "seconds"],
            [
                [
                    label,
                    number(throughput[key]["mean"], 1),
                    count(throughput[key]["max"]),
                    count(throughput[key]["seconds"]),
                ]
                for label, key in (
                    ("produced (acked, by send time)", "produced_per_s"),
                    ("first deliveries", "received_per_s"),
                )
            ],
        )
    )

    out.append(Heading("Faults"))
    if s["faults"]:
        out.append(
            Table(
                [
                    "#",
                    "fault",
                    "start",
                    "end",
                    "stall",
                    "recovery",
                    "threshold",
                    "baseline p99 (ms)",
                    "baseline messages",
                ],
                _fault_rows(s),
            )
        )
        if any("detected_s" in fault for fault in s["faults"]):
            out.append(
                Paragraph(
                    "Recovery timeline, seconds from each fault's start on the driver's clock "
                    "(docs/metrics.md): the engine says it is unwell (detected) and whole again; "
                    "the first delivery of a message due during the worst partition's outage "
                    "(first output); the backlog back at its level before the fault (caught "
                    "up); 5 s of on-time delivery (recovery, `>=` when the run ends first); the "
                    "largest latency over the baseline p50 until then (failure cost); duplicate "
                    "records received until the next fault and the seconds of input they are "
                    "(replayed); time since the last completed checkpoint (an engine that "
                    "checkpoints)."
                )
            )
            out.append(Table(TIMELINE_HEADERS, _recovery_timeline_rows(s)))
        out.extend(_timeline_blocks(s))
    else:
        out.append(Paragraph("No fault was injected (baseline run)."))

    engine_rows = _engine_rows(s.get("engine_evidence") or {})
    if engine_rows:
        out.append(Heading("Engine evidence"))
        out.append(Table(["", ""], engine_rows))

    if plots:
        out.append(Heading("Plots"))
        for name, title in plots:
            out.append(Image(f"plots/{name}", title))
    return out


# ---------------------------------------------------------------- rendering


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(content: Sequence[Block]) -> str:
    lines: list[str] = []
    for block in content:
        if isinstance(block, Heading):
            lines += ["#" * block.level + " " + block.text, ""]
        elif isinstance(block, Paragraph):
            lines += [block.text, ""]
        elif isinstance(block, Table):
            lines.append("| " + " | ".join(_md_cell(h) for h in block.headers) + " |")
            lines.append("|" + "|".join("---" for _ in block.headers) + "|")
            for row in block.rows:
                lines.append("| " + " | ".join(_md_cell(cell) for cell in row) + " |")
            lines.append("")
        else:
            lines += [f"![{block.title}]({block.path})", ""]
    return "\n".join(lines)


def _html_inline(text: str) -> str:
    """Escape, then render **bold** and `code` as the Markdown does."""
    escaped = html.escape(text)
    parts = escaped.split("**")
    escaped = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = escaped.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


STYLE = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse;margin:0.5em 0 1.5em}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    "th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee}"
)


def html_page(content: Sequence[Block], base: Path, title: str) -> str:
    """A self-contained page: images are read from base and embedded as data URIs."""
    parts = [
        "<!DOCTYPE html>",
        f'<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>',
        f"<style>{STYLE}</style></head><body>",
    ]
    for block in content:
        if isinstance(block, Heading):
            level = min(block.level, 6)
            parts.append(f"<h{level}>{_html_inline(block.text)}</h{level}>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{_html_inline(block.text)}</p>")
        elif isinstance(block, Table):
            parts.append("<table><tr>")
            parts += [f"<th>{_html_inline(h)}</th>" for h in block.headers]
            parts.append("</tr>")
            for row in block.rows:
                cells = "".join(f"<td>{_html_inline(cell)}</td>" for cell in row)
                parts.append(f"<tr>{cells}</tr>")
            parts.append("</table>")
        else:
            data = base64.b64encode((base / block.path).read_bytes()).decode("ascii")
            parts.append(
                f'<figure><img alt="{html.escape(block.title)}" '
                f'src="data:image/png;base64,{data}"><figcaption>{html.escape(block.title)}'
                "</figcaption></figure>"
            )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def headline(summary: dict[str, Any]) -> str:
    """The short table summarize prints."""
    s = summary
    latency = s["latency_ms"]
    throughput = s["throughput"]
    partial = f"  (partial: {', '.join(s['partial_inputs'])})" if s["partial_inputs"] else ""
    rows = [
        ("run", f"{s['run_id']}  engine={s['engine']}  fault={s.get('fault') or 'none'}{partial}"),
        (
            "delivery",
            f"produced {count(s['produced'])}  received {count(s['received_records'])} records / "
            f"{count(s['received_unique'])} ids  malformed {count(s['malformed_records'])}",
        ),
        (
            "lost",
            f"{count(s['lost'])} ({rate(s['loss_rate'])})"
            + (f"  {lost_where_text(s)}" if lost_where_text(s) else ""),
        ),
        *([("verdict", verdict_text(s))] if s.get("verdict") else []),
        (
            "duplicates",
            f"{count(s['duplicate_records'])} records ({rate(s['duplicate_rate'])}), "
            f"{count(s['duplicated_messages'])} messages ({rate(s['duplicated_messages_rate'])})",
        ),
        (
            "latency ms",
            "  ".join(
                f"{name} {number(latency[name], 1)}"
                for name in ("p50", "p90", "p99", "p99.9", "max", "mean")
            )
            + f"  (n={count(latency['count'])}, warm-up {number(s['warmup_s'])} s)",
        ),
        (
            "throughput",
            f"produced {number(throughput['produced_per_s']['mean'], 1)}/s  "
            f"received {number(throughput['received_per_s']['mean'], 1)}/s",
        ),
    ]
    phases = s.get("latency_phases") or {}
    if s["faults"] and phases:
        before, after = phases.get("before_fault") or {}, phases.get("after_recovery") or {}
        steady_note = "" if (s.get("steady_state") or {}).get("reached") else " (not steady)"
        rows.append(
            (
                "steady ms",
                f"before fault p50 {number(before.get('p50'))} p99 {number(before.get('p99'))}"
                f"{steady_note}; after recovery "
                + (
                    f"p50 {number(after.get('p50'))} p99 {number(after.get('p99'))}"
                    if after
                    else f"– ({phases.get('after_recovery_reason')})"
                ),
            )
        )
    for number_, fault in enumerate(s["faults"], start=1):
        extra = ""
        if "detected_s" in fault:
            extra = (
                f"; detected {seconds(fault.get('detected_s'))}, first output "
                f"{seconds(fault.get('first_output_s'))}, caught up {_caught_up_text(fault)}, "
                f"replayed {seconds(fault.get('replayed_s'))} "
                f"({count(fault.get('duplicate_records'))} duplicates)"
            )
        rows.append(
            (
                f"fault {number_}",
                f"{fault.get('fault')} {fault.get('host') or ''} at "
                f"{offset_s(fault['start_ms'], s.get('first_intended_ms'))}: "
                f"stall {seconds(fault['stall_s'], 'none')}, "
                f"recovery {recovery_text(fault)} "
                f"(threshold {fault['threshold_ms']} ms, baseline {fault['baseline_messages']} "
                f"messages){extra}",
            )
        )
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {text}" for name, text in rows)


def write_reports(summary: dict[str, Any], plots: Sequence[tuple[str, str]], run_dir: Path) -> None:
    content = blocks(summary, plots)
    write_atomic(run_dir / "report.md", markdown(content))
    write_atomic(
        run_dir / "report.html", html_page(content, run_dir, f"streamlab run {summary['run_id']}")
    )
