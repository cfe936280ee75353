"""When the collector stops: the drain rule as a pure function of what it has seen so far.

A run is complete when, at one check, all of these hold: the producer finished (its
produced.jsonl appeared), the job's consumer group has committed every input partition up to
its end (read in one lag sample taken after the producer finished), and no record came for
quiet_s (counted from the producer's end at the earliest). Without a group the committed-offset
condition is left out. Acknowledged ids that have not arrived keep a run that is otherwise
complete open only until nothing has come for lost_wait_s: the engine has then consumed and
committed its whole input, so they are lost, and the run is complete with them counted as lost
(completeness says the run was measured; whether the guarantee held is the verdict's question).
Otherwise the run ends drain_timeout_s after the producer finished, or timeout_s after the
collector started, with a sentence naming what was short.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from producer.clock import NS_PER_MS, NS_PER_S
from producer.lagsampler import LagSample


@dataclass(frozen=True)
class DrainSettings:
    quiet_s: float
    timeout_s: float
    drain_timeout_s: float
    group: str | None = None
    input_topic: str | None = None
    lost_wait_s: float = 20.0


@dataclass(frozen=True)
class DrainView:
    """What the collector knows at a check (times in driver-clock ns)."""

    started_ns: int
    producer_done_ns: int | None  # when produced.jsonl was fully read; None while it runs
    quiet_since_ns: int  # last record, or the producer's end if later
    missing: int  # acknowledged ids not received yet (meaningful once the producer is done)
    sample: LagSample | None = None  # the latest successful lag sample
    sample_error: str | None = None  # the error of the latest sample, if it failed


@dataclass(frozen=True)
class Stop:
    reason: str  # complete, drain_timeout or timeout
    incomplete_reason: str | None = None


def shortfalls(view: DrainView, now_ns: int, settings: DrainSettings) -> list[str]:
    """What keeps the run from being complete now, one phrase each; [] when it is complete.

    Missing ids are named among them only while lost_wait_s has not passed (missing_shortfall)."""
    short = measured_shortfalls(view, now_ns, settings)
    if view.producer_done_ns is None:
        return short
    return missing_shortfall(view, now_ns, settings) + short


def missing_shortfall(view: DrainView, now_ns: int, settings: DrainSettings) -> list[str]:
    """Acknowledged ids still missing, while the drain still waits for them."""
    quiet_ns = now_ns - view.quiet_since_ns
    if not view.missing or quiet_ns >= settings.lost_wait_s * NS_PER_S:
        return []
    ids = "id never arrived" if view.missing == 1 else "ids never arrived"
    return [f"{view.missing:,} acknowledged {ids}"]


def measured_shortfalls(view: DrainView, now_ns: int, settings: DrainSettings) -> list[str]:
    """What keeps the engine's consumption from being known complete: everything but missing ids."""
    done_ns = view.producer_done_ns
    if done_ns is None:
        return ["the producer never finished (produced.jsonl did not appear)"]
    short = []
    if settings.group is not None:
        short += committed_shortfall(view, done_ns, settings.group, settings.input_topic or "?")
    quiet_ns = now_ns - view.quiet_since_ns
    if quiet_ns < settings.quiet_s * NS_PER_S:
        short.append(
            f"records were still arriving ({quiet_ns / NS_PER_S:.1f} s without one, "
            f"quiet_s is {settings.quiet_s:g} s)"
        )
    return short


def committed_shortfall(view: DrainView, done_ns: int, group: str, topic: str) -> list[str]:
    """Why the group's committed offsets do not (yet) show the whole input consumed.

    Only a sample that started after the producer finished (done_ns) can show that: before,
    more input may have come after it was read."""
    sample = view.sample
    if sample is None or sample.t_ms * NS_PER_MS < done_ns:
        error = f" (last error: {view.sample_error})" if view.sample_error else ""
        return [f"no offset sample of group {group} succeeded after the producer finished{error}"]
    short = sample.short_of_end()
    phrases = []
    uncommitted = sorted(p for p, records in short.items() if records is None)
    behind = {p: records for p, records in short.items() if records is not None}
    if behind:
        records = sum(behind.values())
        phrases.append(
            f"group {group} has committed {records:,} record{'s' if records != 1 else ''} short "
            f"of the end of {topic} on partitions {sorted(behind)}"
        )
    if uncommitted:
        phrases.append(f"group {group} has committed nothing on {topic} partitions {uncommitted}")
    return phrases


def decide(view: DrainView, now_ns: int, settings: DrainSettings) -> Stop | None:
    """Stop('complete'), Stop('timeout' | 'drain_timeout', why), or None to keep collecting."""
    if not shortfalls(view, now_ns, settings):
        return Stop("complete")
    done_ns = view.producer_done_ns
    timed_out = None
    if now_ns - view.started_ns >= settings.timeout_s * NS_PER_S:
        timed_out = "timeout"
    elif done_ns is not None and now_ns - done_ns >= settings.drain_timeout_s * NS_PER_S:
        timed_out = "drain_timeout"
    if timed_out is None:
        return None
    # The reason names missing ids whether or not the drain still waited for them.
    everything = replace(settings, lost_wait_s=float("inf"))
    return Stop(timed_out, "; ".join(shortfalls(view, now_ns, everything)))
