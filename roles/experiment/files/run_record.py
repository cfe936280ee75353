#!/usr/bin/env python3
"""Write a run's run.json, faults.jsonl and first-summary.json from what the playbook gathered.

    run_record.py --result-dir RESULTS/RUN_ID < facts.json

facts.json (one JSON object, built by roles/experiment/tasks/record.yml): the run's identity and
parameters, hosts and their facts, clock readings at the start and the end, the readiness probe,
the faults injected, component links per host, the driver's wheel versions, exit codes, and the
failures of the playbook's steps, and the tail of each engine host's daemon logs (written to
engine/logs/<host>.log). The program also reads the producer's and the collector's
summaries and the engine's read-back configuration from the result directory. It prints the
summary lines the playbook shows. Files are replaced atomically, so a second call (after a later
step failed) leaves a consistent directory. docs/results.md describes every field.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

SETTINGS_PREFIX = "streamlab."


def write_atomically(path: Path, text: str) -> None:
    part = path.with_name(path.name + ".part")
    part.write_text(text, encoding="utf-8")
    os.replace(part, path)


def read_json_document(path: Path) -> Any:
    """The JSON document at path (an object, a list...), or None when missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from path, or None when it is missing, unreadable or not an object."""
    data = read_json_document(path)
    return data if isinstance(data, dict) else None


def installed_components(links: Mapping[str, Sequence[str]]) -> dict[str, dict[str, str]]:
    """host -> component -> installed directory, from `component directory` lines per host."""
    return {
        host: dict(line.split(" ", 1) for line in lines if " " in line)
        for host, lines in links.items()
    }


def component_versions(installed: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """component -> version, from the first host running it (<name>-<version>-<source>-<hash>)."""
    versions: dict[str, str] = {}
    for components in installed.values():
        for name, directory in components.items():
            parts = directory.split("-")
            if name not in versions and len(parts) > 1:
                versions[name] = parts[1]
    return versions


def clock_reading(raw: str | None) -> dict[str, Any]:
    """The clock probe's JSON line, or {} when the host did not answer."""
    if not raw:
        return {}
    try:
        reading = json.loads(raw.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}
    return reading if isinstance(reading, dict) else {}


def java_version(release_base64: str | None) -> str | None:
    """JAVA_VERSION from a JDK's `release` file (base64, as slurp returns it); None if unknown."""
    try:
        text = base64.b64decode(release_base64 or "", validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "JAVA_VERSION":
            return value.strip().strip('"') or None
    return None


def host_entries(facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    host_facts = facts["hosts"]
    clocks = facts.get("clocks") or {}
    java_releases = facts.get("java_release") or {}
    entries = []
    for name in sorted(host_facts["address"]):
        start = clock_reading((clocks.get("start") or {}).get(name))
        end = clock_reading((clocks.get("end") or {}).get(name))
        entries.append(
            {
                "name": name,
                "address": host_facts["address"][name],
                "os": " ".join(
                    (host_facts["distribution"][name], host_facts["distribution_version"][name])
                ),
                "os_family": host_facts["os_family"][name],
                "arch": host_facts["architecture"][name],
                "java": java_version(java_releases.get(name)),
                "roles": host_facts["groups"][name],
                "clock_offset_ms": start.get("offset_ms"),
                "clock_offset_error_ms": half(start.get("rtt_ms")),
                "clock_offset_end_ms": end.get("offset_ms"),
                "clock_offset_end_error_ms": half(end.get("rtt_ms")),
            }
        )
    return entries


def half(value: float | None) -> float | None:
    return None if value is None else round(value / 2, 3)


def prefixed_settings(config: Any) -> dict[str, Any]:
    """Every `streamlab.<name>` key anywhere in the engine's configuration, as name -> value."""
    found: dict[str, Any] = {}
    if isinstance(config, dict):
        for key, value in config.items():
            if isinstance(key, str) and key.startswith(SETTINGS_PREFIX):
                found[key[len(SETTINGS_PREFIX) :]] = typed(value)
            else:
                found.update(prefixed_settings(value))
    elif isinstance(config, list):
        for value in config:
            found.update(prefixed_settings(value))
    return found


def typed(value: Any) -> Any:
    """Configuration values often come back as strings: give numbers and booleans their type."""
    if not isinstance(value, str):
        return value
    if value in ("true", "false"):
        return value == "true"
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def lookup(data: Any, keys: Iterable[Any]) -> Any:
    """data[k1][k2]...; None where a key or index is missing. A name looked up in a list of
    {"key": ..., "value": ...} entries (an engine's configuration list) is that entry's value."""
    for key in keys:
        if isinstance(data, dict):
            data = data.get(key)
        elif isinstance(data, list) and isinstance(key, int) and -len(data) <= key < len(data):
            data = data[key]
        elif isinstance(data, list) and isinstance(key, str):
            entries = [e for e in data if isinstance(e, dict) and e.get("key") == key]
            if not entries:
                return None
            data = entries[0].get("value")
        else:
            return None
    return data


def engine_settings(
    engine_dir: Path, settings_file: str | None, readback: Mapping[str, Sequence[Any]]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings the job ran with: its own streamlab.* account, overridden by what the engine
    itself reports (readback: name -> [file in engine/, key, key, ...]). Returns the settings
    and, per name, where its value was read."""
    settings: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if settings_file:
        config = read_json(engine_dir / settings_file)
        for name, value in prefixed_settings(config).items():
            settings[name] = value
            sources[name] = f"{settings_file} ({SETTINGS_PREFIX}{name})"
    for name, path in readback.items():
        file_name, *keys = path
        value = lookup(read_json_document(engine_dir / file_name), keys)
        if value is not None:
            settings[name] = typed(value)
            sources[name] = f"{file_name} {'/'.join(str(k) for k in keys)}"
    return settings, sources


def incomplete_reasons(
    result_dir: Path, facts: Mapping[str, Any], received: Mapping[str, Any] | None
) -> list[str]:
    """Why the run is not complete; empty when it is."""
    reasons = list(facts.get("failures") or [])
    if not (result_dir / "produced.jsonl").exists():
        part = (result_dir / "produced.jsonl.part").exists()
        reasons.append(
            "the producer did not finish (only produced.jsonl.part)"
            if part
            else "the producer left no record"
        )
    if received is None:
        reasons.append("the collector left no summary")
    elif received.get("stop_reason") != "complete":
        reasons.append(
            f"the collector stopped with {received.get('stop_reason')}: "
            f"{received.get('incomplete_reason') or received.get('error') or 'no reason given'}"
        )
    return reasons


# What each delivery guarantee forbids: loss of an acknowledged message, a second delivery, or both.
GUARANTEE_FORBIDS = {
    "at_most_once": ("duplicates",),
    "at_least_once": ("loss",),
    "exactly_once": ("loss", "duplicates"),
}


def verdict(guarantee: str, status: str, received: Mapping[str, Any] | None) -> dict[str, Any]:
    """Whether the run kept its delivery guarantee, from the collector's exact tally.

    holds is None when the run is incomplete (nothing measured to judge) or the guarantee is
    unknown; a run whose guarantee did not hold is still complete and counted like any other."""
    received = received or {}
    lost, duplicates = received.get("missing"), received.get("duplicates")
    acknowledged = received.get("acked")
    name = guarantee.replace("_", "-")
    base = {"guarantee": guarantee, "lost": lost, "duplicate_records": duplicates}
    forbids = GUARANTEE_FORBIDS.get(guarantee)
    if forbids is None:
        return base | {"holds": None, "reason": f"{guarantee} is not a guarantee the kit judges"}
    if status != "complete" or not isinstance(lost, int) or not isinstance(duplicates, int):
        return base | {"holds": None, "reason": f"{name} not judged: the run is incomplete"}
    broken = []
    if "loss" in forbids and lost:
        broken.append(f"{lost:,} of {figure(acknowledged)} acknowledged messages lost")
    if "duplicates" in forbids and duplicates:
        broken.append(f"{duplicates:,} duplicate records")
    if broken:
        return base | {"holds": False, "reason": f"{name} violated: " + "; ".join(broken)}
    kept = []
    if "loss" in forbids:
        kept.append(f"0 of {figure(acknowledged)} acknowledged messages lost")
    if "duplicates" in forbids:
        kept.append("0 duplicate records")
    return base | {"holds": True, "reason": f"{name} held: " + "; ".join(kept)}


# How far the wall clock may move against the producer's and collector's clocks during a run
# before the run's cross-clock figures are called off: the bound the lab tests hold the hosts'
# measured clock offsets to.
CLOCK_MOVED_LIMIT_MS = 50.0


def wall_clock(produced: Mapping[str, Any] | None, received: Mapping[str, Any] | None) -> dict:
    """How far the wall clock moved against the producer's and the collector's clocks while each
    ran. Both run on a clock anchored to the wall clock once; the engine's timestamps, a fault's
    and the phases are wall-clock ones, so comparing them with the ledger's is off by this much
    (and latencies by up to the difference of the two). moved is None when either did not say."""
    figures = {
        "producer_ms": (produced or {}).get("wall_clock_moved_ms"),
        "collector_ms": (received or {}).get("wall_clock_moved_ms"),
    }
    known = [abs(v) for v in figures.values() if isinstance(v, (int, float))]
    moved = max(known) if len(known) == len(figures) else None
    return figures | {
        "largest_ms": moved,
        "limit_ms": CLOCK_MOVED_LIMIT_MS,
        "moved": None if moved is None else moved > CLOCK_MOVED_LIMIT_MS,
    }


def first_summary(
    record: Mapping[str, Any],
    produced: Mapping[str, Any] | None,
    received: Mapping[str, Any] | None,
) -> dict[str, Any]:
    produced = produced or {}
    received = received or {}
    return {
        "run_id": record["run_id"],
        "engine": record["engine"],
        "fault": record["fault"],
        "status": record["status"],
        "incomplete_reasons": record["incomplete_reasons"],
        "verdict": record.get("verdict"),
        "acknowledged": produced.get("acked"),
        "received": received.get("received"),
        "unique": received.get("unique"),
        "missing": received.get("missing"),
        "duplicates": received.get("duplicates"),
        "send_lag_ms": produced.get("send_lag_ms"),
        "achieved_rate": produced.get("achieved_rate"),
        "latency_ms": received.get("latency_ms"),
        "output_rate": received.get("output_rate"),
        "overload": received.get("overload"),
        "wall_clock": record.get("wall_clock"),
        "time": run_time(record.get("phases") or [], produced),
    }


def run_time(
    phases_: Sequence[Mapping[str, Any]], produced: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The run's wall time from its phases, the producer's own sending time (its first
    message's slot to its last acknowledgement, driver clock) and the difference: the time the
    run spent around producing."""
    if not phases_:
        return None
    total_s = (phases_[-1]["end_ms"] - phases_[0]["start_ms"]) / 1000
    sending = [produced.get("start_ms"), produced.get("end_ms")]
    producing_s = (
        (sending[1] - sending[0]) / 1000 if all(isinstance(v, int) for v in sending) else None
    )
    longest = sorted(phases_, key=lambda p: p["start_ms"] - p["end_ms"])[:3]
    return {
        "total_s": total_s,
        "producing_s": producing_s,
        "around_producing_s": None if producing_s is None else total_s - producing_s,
        "longest": [
            {"name": p["name"], "s": (p["end_ms"] - p["start_ms"]) / 1000} for p in longest
        ],
    }


def figure(value: Any, unit: str = "") -> str:
    if value is None:
        return "?"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value}{unit}"


def summary_lines(summary: Mapping[str, Any], result_dir: Path) -> list[str]:
    judged = summary.get("verdict") or {}
    # A violated guarantee is shouted: it is the finding a run exists to show.
    reason = judged.get("reason") or ""
    verdict_text = (
        f", {reason.upper() if judged.get('holds') is False else reason}" if reason else ""
    )
    lines = [
        f"run {summary['run_id']} ({summary['engine']}, fault={summary['fault']}): "
        f"{summary['status']}{verdict_text} - {result_dir}"
    ]
    lines += [f"  incomplete: {reason}" for reason in summary["incomplete_reasons"]]
    lines.append(
        " ".join(
            f"{name}={figure(summary[name])}"
            for name in ("acknowledged", "received", "unique", "missing", "duplicates")
        )
    )
    latency = summary.get("latency_ms") or {}
    if latency:
        lines.append(
            f"steady-state latency (intended send -> first receipt, after the first "
            f"{latency.get('warmup_s')} s, {figure(latency.get('messages'))} messages): "
            f"p50={figure(latency.get('p50'))} p99={figure(latency.get('p99'))} "
            f"max={figure(latency.get('max'))} ms"
        )
    lag = summary.get("send_lag_ms") or {}
    rate = (summary.get("output_rate") or {}).get("messages_per_s")
    lines.append(
        f"producer send lag p50={figure(lag.get('p50'))} p99={figure(lag.get('p99'))} "
        f"max={figure(lag.get('max'))} ms; output {figure(rate)} msg/s"
    )
    spent = summary.get("time")
    if spent:
        lines.append(
            f"time: {figure(spent['total_s'])} s from the playbook's start, producing "
            f"{figure(spent['producing_s'])} s, around it {figure(spent['around_producing_s'])} s "
            "(longest phases: "
            + ", ".join(f"{p['name']} {figure(p['s'])} s" for p in spent["longest"])
            + ")"
        )
    clock = summary.get("wall_clock") or {}
    if clock.get("moved"):
        # Shouted like a violation: the run's cross-clock figures cannot be taken as measured.
        lines.append(
            f"WALL CLOCK MOVED {figure(clock['largest_ms'])} ms against the run's clocks "
            f"(producer {figure(clock['producer_ms'])} ms, collector "
            f"{figure(clock['collector_ms'])} ms; limit {figure(clock['limit_ms'])} ms): "
            "latencies and the engine's, the faults' and the phases' times are off by up to that"
        )
    overload = summary.get("overload") or {}
    if overload:
        verdict = {True: "OVERLOADED", False: "not overloaded", None: "overload unknown"}[
            overload.get("overloaded")
        ]
        lines.append(
            f"{verdict}: backlog slope {figure(overload.get('backlog_slope_per_s'))} msg/s "
            f"(threshold {figure(overload.get('threshold_per_s'))}), "
            f"backlog max {figure(overload.get('backlog_max'))}"
            + (f" - {overload['reason']}" if overload.get("reason") else "")
        )
    return lines


def phases(marks: Sequence[Mapping[str, Any]], end_ms: int) -> list[dict[str, Any]]:
    """run.json `phases` from the playbook's marks (each the start of a phase, in order, on the
    control node's clock): each phase ends where the next one starts, the last when this record
    is written, so they never overlap. A mark earlier than the end before it (the clock stepped
    back) starts at that end instead."""
    phases_: list[dict[str, Any]] = []
    given = [int(mark["ms"]) for mark in marks]
    for index, mark in enumerate(marks):
        start = max(given[index], phases_[-1]["end_ms"]) if phases_ else given[index]
        following = given[index + 1] if index + 1 < len(marks) else end_ms
        phases_.append(
            {"name": str(mark["name"]), "start_ms": start, "end_ms": max(start, following)}
        )
    return phases_


# The roles an engine's manifest may give one of its settings (docs/extending.md).
SETTING_ROLES = ("replay_bound", "commits_offsets")


def setting_roles(spec: Mapping[str, Any]) -> dict[str, str]:
    """Role -> the engine setting its manifest marks with it, so that the analysis finds which
    parameter bounds replay from run.json alone."""
    return {
        role: str(name)
        for name, setting in spec.items()
        for role in SETTING_ROLES
        if isinstance(setting, Mapping) and setting.get(role)
    }


def build_record(
    result_dir: Path, facts: Mapping[str, Any], now_ms: int | None = None
) -> dict[str, Any]:
    received = read_json(result_dir / "received.summary.json")
    installed = installed_components(facts.get("installed") or {})
    settings, sources = engine_settings(
        result_dir / "engine", facts.get("settings_file"), facts.get("readback") or {}
    )
    versions: dict[str, Any] = {
        **component_versions(installed),
        "engine": facts.get("engine_version"),
        **(facts.get("wheels") or {}),
    }
    for name in ("connector_version", "kafka_clients_version"):
        if name in settings:
            versions[f"{facts['engine']}_{name.removesuffix('_version')}"] = str(settings[name])
    reasons = incomplete_reasons(result_dir, facts, received)
    status = "incomplete" if reasons else "complete"
    produced = read_json(result_dir / "produced.summary.json")
    guarantee = str((facts.get("parameters") or {}).get("guarantee") or "at_least_once")
    return {
        "run_id": facts["run_id"],
        "engine": facts["engine"],
        "fault": facts["fault"],
        "status": status,
        "incomplete_reasons": reasons,
        "verdict": verdict(guarantee, status, received),
        "parameters": facts["parameters"],
        "setting_roles": setting_roles(facts.get("engine_settings_spec") or {}),
        "settings": settings,
        "settings_read_from": sources,
        "job_id": facts.get("job_id"),
        "probe": facts.get("probe"),
        "produce_start_ms": facts.get("produce_start_ms"),
        "recovery": facts.get("recovery"),
        "versions": versions,
        "installed": installed,
        "kit_commit": facts["kit_commit"],
        "kit_dirty": facts["kit_dirty"],
        "driver": facts["driver"],
        "hosts": host_entries(facts),
        "start_utc": facts["start_utc"],
        "end_utc": facts["end_utc"],
        "start_ms": facts["start_ms"],
        "end_ms": facts["end_ms"],
        "phases": phases(
            facts.get("phase_marks") or [], int(time.time() * 1000) if now_ms is None else now_ms
        ),
        "producer_exit": facts.get("producer_exit"),
        "collector_exit": facts.get("collector_exit"),
        "wall_clock": wall_clock(produced, received),
        "drain": {
            "stop_reason": (received or {}).get("stop_reason"),
            "incomplete_reason": (received or {}).get("incomplete_reason"),
        },
    }


# What engine/logs/<host>.log says of a host that could not be read.
UNREACHABLE_LOG = "(host unreachable when the run was recorded)"


def write_log_tails(result_dir: Path, tails: Mapping[str, str | None]) -> None:
    """engine/logs/<host>.log: each engine host's log tail (None: the host was not reached)."""
    logs = result_dir / "engine" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for host, text in tails.items():
        write_atomically(logs / f"{host}.log", f"{UNREACHABLE_LOG if text is None else text}\n")


def write_run(result_dir: Path, facts: Mapping[str, Any]) -> list[str]:
    """Write run.json, faults.jsonl, first-summary.json and the engine log tails; returns the
    summary lines."""
    write_log_tails(result_dir, facts.get("log_tails") or {})
    record = build_record(result_dir, facts)
    faults = "".join(json.dumps(one, sort_keys=True) + "\n" for one in facts.get("faults") or [])
    write_atomically(result_dir / "faults.jsonl", faults)
    write_atomically(result_dir / "run.json", json.dumps(record, indent=2) + "\n")
    summary = first_summary(
        record,
        read_json(result_dir / "produced.summary.json"),
        read_json(result_dir / "received.summary.json"),
    )
    write_atomically(result_dir / "first-summary.json", json.dumps(summary, indent=2) + "\n")
    return summary_lines(summary, result_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--result-dir", required=True, type=Path)
    args = parser.parse_args(argv)
    if not args.result_dir.is_dir():
        parser.error(f"--result-dir {args.result_dir} is not a directory")
    try:
        facts = json.load(sys.stdin)
    except ValueError as error:
        parser.error(f"standard input is not one JSON object: {error}")
    for line in write_run(args.result_dir, facts):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
