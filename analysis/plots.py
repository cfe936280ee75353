"""The run's plots (PNG, matplotlib's Agg renderer), drawn from aggregates only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
from matplotlib.axes import Axes  # noqa: E402 - after choosing the renderer
from matplotlib.figure import Figure  # noqa: E402

from analysis import histogram  # noqa: E402
from analysis.histogram import Histogram  # noqa: E402

PLOTS_DIR = "plots"
SIZE = (10, 4.5)
DPI = 110
FAULT_COLOR = "tab:red"
WARMUP_COLOR = "0.85"


@dataclass(frozen=True)
class FaultSpan:
    """A fault on the plots' time axis (seconds since the first message's intended time)."""

    label: str
    start_s: float
    end_s: float | None


@dataclass
class PlotData:
    """Everything the plots show, already aggregated."""

    latency: Histogram
    latency_figures: Mapping[str, Any]
    warmup_end_s: float
    produced_per_s: Mapping[int, int] = field(default_factory=dict)
    delivered_per_s: Mapping[int, int] = field(default_factory=dict)
    records_per_s: Mapping[int, int] = field(default_factory=dict)
    duplicates_per_s: Mapping[int, int] = field(default_factory=dict)
    latency_per_s: Sequence[Mapping[str, Any]] = ()
    faults: Sequence[FaultSpan] = ()
    # Where the steady state the run shows starts (summary.json steady_state.from_ms), and
    # whether it reached one; None for no marker.
    steady_from_s: float | None = None
    steady_reached: bool = True

    def end_s(self) -> float:
        seconds = [
            *self.produced_per_s,
            *self.records_per_s,
            *(row["second"] for row in self.latency_per_s),
        ]
        return float(max(seconds) + 1) if seconds else 1.0


def _series(counts: Mapping[int, int], first: int, last: int) -> tuple[list[int], list[int]]:
    """Every second from first to last, 0 where a bucket is empty."""
    xs = list(range(first, last + 1))
    return xs, [counts.get(x, 0) for x in xs]


def _shade(axes: Axes, data: PlotData) -> None:
    """Warm-up in grey, each fault in red from its start to its end (or the end of the plot)."""
    if data.warmup_end_s > 0:
        axes.axvspan(0, data.warmup_end_s, color=WARMUP_COLOR, alpha=0.6, lw=0, label="warm-up")
    for number, fault in enumerate(data.faults):
        end = fault.end_s if fault.end_s is not None else data.end_s()
        axes.axvspan(
            fault.start_s,
            max(end, fault.start_s + 0.2),
            color=FAULT_COLOR,
            alpha=0.15,
            lw=0,
            label="fault" if number == 0 else None,
        )
        axes.axvline(fault.start_s, color=FAULT_COLOR, lw=1)
        axes.annotate(
            fault.label,
            (fault.start_s, 1),
            xycoords=("data", "axes fraction"),
            xytext=(3, -12),
            textcoords="offset points",
            color=FAULT_COLOR,
            fontsize=8,
        )


def _save(figure: Figure, path: Path) -> None:
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)


def latency_cdf(data: PlotData, path: Path) -> bool:
    if not data.latency:
        return False
    figure = Figure(figsize=SIZE)
    axes = figure.add_subplot()
    points = histogram.cdf(data.latency)
    xs = [value for value, _ in points]
    ys = [share for _, share in points]
    axes.step(xs, ys, where="post", color="tab:blue")
    if xs[0] > 0:
        axes.set_xscale("log")
    for name in ("p50", "p99", "p99.9"):
        value = data.latency_figures.get(name)
        if value is not None:
            axes.axvline(value, color="0.4", ls=":", lw=1)
            axes.annotate(
                f"{name} {value} ms",
                (value, 0.02),
                rotation=90,
                fontsize=8,
                xytext=(3, 0),
                textcoords="offset points",
            )
    axes.set_xlabel("end-to-end latency (ms): first delivery - intended send time")
    axes.set_ylabel("share of messages")
    axes.set_ylim(0, 1.01)
    axes.set_title(f"Latency CDF ({data.latency_figures.get('count')} messages after warm-up)")
    axes.grid(True, which="both", alpha=0.3)
    _save(figure, path)
    return True


def throughput(data: PlotData, path: Path) -> bool:
    seconds = [*data.produced_per_s, *data.delivered_per_s, *data.records_per_s]
    if not seconds:
        return False
    first, last = min(seconds), max(seconds)
    figure = Figure(figsize=SIZE)
    axes = figure.add_subplot()
    _shade(axes, data)
    for counts, label, color in (
        (data.produced_per_s, "produced (acked, by send time)", "tab:blue"),
        (data.delivered_per_s, "first deliveries", "tab:green"),
        (data.records_per_s, "all records received", "tab:orange"),
    ):
        xs, ys = _series(counts, first, last)
        axes.step(xs, ys, where="post", label=label, color=color, lw=1)
    axes.set_xlabel("seconds since the first message's intended time")
    axes.set_ylabel("messages per second")
    axes.set_title("Produced vs received rate")
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(True, alpha=0.3)
    _save(figure, path)
    return True


def latency_over_time(data: PlotData, path: Path) -> bool:
    rows = [row for row in data.latency_per_s if row["max"] is not None]
    if not rows:
        return False
    figure = Figure(figsize=SIZE)
    axes = figure.add_subplot()
    _shade(axes, data)
    xs = [row["second"] for row in rows]
    for key, label, color in (
        ("p50", "p50 (approx.)", "tab:blue"),
        ("p99", "p99 (approx.)", "tab:orange"),
        ("max", "max", "tab:red"),
    ):
        axes.plot(xs, [row[key] for row in rows], label=label, color=color, lw=1)
    if data.steady_from_s is not None:
        axes.axvline(
            data.steady_from_s,
            color="tab:green",
            ls="--",
            lw=1,
            label="steady from" if data.steady_reached else "no steady state (warm-up end)",
        )
    if min(row["p50"] for row in rows) > 0:
        axes.set_yscale("log")
    axes.set_xlabel("intended send time (seconds since the first message)")
    axes.set_ylabel("latency (ms)")
    axes.set_title("Latency by intended send time (1 s buckets)")
    axes.legend(loc="upper right", fontsize=8)
    axes.grid(True, which="both", alpha=0.3)
    _save(figure, path)
    return True


def duplicates_over_time(data: PlotData, path: Path) -> bool:
    if not data.records_per_s:
        return False
    first, last = min(data.records_per_s), max(data.records_per_s)
    figure = Figure(figsize=SIZE)
    axes = figure.add_subplot()
    _shade(axes, data)
    xs, ys = _series(data.duplicates_per_s, first, last)
    axes.bar(xs, ys, width=1.0, align="edge", color="tab:purple", label="duplicate records")
    axes.set_xlabel("receive time (seconds since the first message's intended time)")
    axes.set_ylabel("duplicate records per second")
    axes.set_title(f"Duplicates over time ({sum(ys)} duplicate records)")
    axes.legend(loc="upper right", fontsize=8)
    axes.grid(True, alpha=0.3)
    _save(figure, path)
    return True


PLOTS = (
    ("latency_cdf.png", "Latency CDF", latency_cdf),
    ("throughput.png", "Produced vs received rate", throughput),
    ("latency_over_time.png", "Latency over time", latency_over_time),
    ("duplicates_over_time.png", "Duplicates over time", duplicates_over_time),
)


def draw_all(data: PlotData, directory: Path) -> list[tuple[str, str]]:
    """Draw every plot that has data into directory; (file name, title) of each drawn."""
    directory.mkdir(parents=True, exist_ok=True)
    drawn = []
    for name, title, draw in PLOTS:
        target = directory / name
        if draw(data, target):
            drawn.append((name, title))
        else:
            target.unlink(missing_ok=True)
    return drawn
