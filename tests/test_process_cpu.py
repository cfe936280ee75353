"""The benches' per-process CPU shares (bench/process_cpu.py), on hand-built samples."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import process_cpu  # noqa: E402


@pytest.mark.parametrize(
    ("cmdline", "kind"),
    [
        ("/usr/bin/java -Xms512m ... kafka.Kafka /etc/streamlab/kafka/server.properties", "kafka"),
        ("java ... org.apache.flink.runtime.taskexecutor.TaskManagerRunner", "flink-taskmanager"),
        ("java ... org.apache.flink.runtime.util.bash.BashJavaUtils GET_TM", "flink-taskmanager"),
        ("java -Ddaemon.name=nimbus ... org.apache.storm.daemon.nimbus.Nimbus", "storm-nimbus"),
        ("/opt/streamlab/venv/bin/python -m producer.produce --bootstrap x", "producer"),
        ("/opt/streamlab/venv/bin/python -m producer.collect --bootstrap x", "collector"),
        ("/opt/streamlab/venv/bin/python -m producer.lagsampler", "kit samplers"),
        ("/usr/sbin/sshd -D", process_cpu.OTHER),
    ],
)
def test_a_process_is_classed_by_its_command_line(cmdline, kind):
    assert process_cpu.kind_of(cmdline) == kind


def test_shares_are_of_the_machines_time_with_straddling_samples_in_proportion():
    samples = [
        {"t_ms": 1000, "machine": 400, "kinds": {"kafka": 400}},  # only the start of time
        {"t_ms": 3000, "machine": 400, "kinds": {"kafka": 100, "producer": 50}},
        {"t_ms": 5000, "machine": 400, "kinds": {"kafka": 200, "flink-taskmanager": 40}},
        {"t_ms": 7000, "machine": 400, "kinds": {"kafka": 400}},
    ]
    # (1000, 5000]: the second and third samples whole, 800 machine ticks.
    assert process_cpu.shares(samples, 1000, 5000) == {
        "kafka": 37.5,
        process_cpu.NO_PROCESS: 51.3,
        "producer": 6.2,
        "flink-taskmanager": 5.0,
    }
    # (2000, 4000]: half of each of the two: 200 + 200 machine ticks, kafka 50 + 100,
    # producer 25, the TaskManager 20.
    assert process_cpu.shares(samples, 2000, 4000) == {
        process_cpu.NO_PROCESS: 51.3,
        "kafka": 37.5,
        "producer": 6.2,
        "flink-taskmanager": 5.0,
    }
    assert process_cpu.shares(samples, 8000, 9000) == {}
    # Samples that cover less than 90 % of the window: no shares rather than a part of it.
    assert process_cpu.shares(samples, 1000, 20_000) == {}


def test_the_sampler_writes_a_line_per_interval(tmp_path):
    out = tmp_path / "cpu.jsonl"
    with process_cpu.ProcessSampler(out, interval_s=0.1):
        time.sleep(0.5)
    first, *samples = process_cpu.read_samples(out)
    assert first["start"] and samples and all(sample["machine"] > 0 for sample in samples)


def test_a_resumed_samplers_lines_join_the_earlier_ones_without_counting_the_gap(tmp_path):
    out = tmp_path / "cpu.jsonl"
    for _ in range(2):
        with process_cpu.ProcessSampler(out, interval_s=0.1, append=True):
            time.sleep(0.35)
        time.sleep(0.3)  # the study stopped, and started again
    samples = process_cpu.read_samples(out)
    starts = [n for n, sample in enumerate(samples) if sample.get("start")]
    assert len(starts) == 2 and starts[0] == 0
    gap = (samples[starts[1] - 1]["t_ms"], samples[starts[1]]["t_ms"])
    assert gap[1] - gap[0] >= 300
    # Within each start the samples cover the window; across the gap they do not.
    assert process_cpu.shares(samples, samples[0]["t_ms"], samples[starts[1] - 1]["t_ms"])
    assert process_cpu.shares(samples, samples[starts[1]]["t_ms"], samples[-1]["t_ms"])
    assert process_cpu.shares(samples, gap[0] - 50, gap[1] + 50) == {}


def test_a_line_cut_short_by_a_killed_sampler_is_left_out_not_the_file(tmp_path):
    out = tmp_path / "cpu.jsonl"
    out.write_text(
        '{"t_ms": 1000, "machine": 0, "kinds": {}, "start": true}\n'
        '{"t_ms": 3000, "machine": 400, "kinds": {"kafka": 100}}\n'
        '{"t_ms": 5000, "mach{"t_ms": 9000, "machine": 0, "kinds": {}, "start": true}\n'
        '{"t_ms": 11000, "machine": 400, "kinds": {"kafka": 200}}\n'
    )
    samples = process_cpu.read_samples(out)
    assert [s["t_ms"] for s in samples] == [1000, 3000, 11000]
    assert process_cpu.shares(samples, 1000, 3000)["kafka"] == 25.0
