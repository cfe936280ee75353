"""Producer: pacing on a simulated clock, message schema, reproducible content, produced.jsonl."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from fractions import Fraction

import pytest
from kafka.errors import KafkaTimeoutError, NotLeaderForPartitionError
from kafka.future import Future

from producer import produce
from producer.clock import NS_PER_MS, NS_PER_S, SimulatedClock, SystemClock
from producer.delivery import UNRESOLVED_ERROR, DeliveryLog
from producer.messages import SensorMessages
from producer.produce import ProduceSettings, run_producer, send_on_schedule
from producer.progress import Progress
from producer.schedule import Schedule
from producer.signals import StopSignals
from producer.stats import MicrosecondHistogram, lag_summary_ms

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MS = 1_000_000
SECOND = 1_000_000_000


class FakeSender:
    """Mimics KafkaProducer: send() returns a real kafka-python Future, resolved at flush().

    outcome(msg_id) picks what happens to a message: "ack", "ack-at-once" (resolved
    before send() returns), "fail" (errback at flush), "raise" (send() raises), "never"
    (still unresolved at close). cost(msg_id) is how long send() takes on the clock.
    """

    def __init__(self, clock, cost=lambda msg_id: 0, outcome=lambda msg_id: "ack", on_send=None):
        self.clock = clock
        self.cost = cost
        self.outcome = outcome
        self.on_send = on_send
        self.sent = []  # (topic, msg_id, value, clock at the call)
        self.pending = []
        self.flushed = self.closed = False

    def send(self, topic, value):  # no key: the producer relies on sticky partitioning
        msg_id = json.loads(value)["msg_id"]
        self.sent.append((topic, msg_id, value, self.clock.now_ns()))
        self.clock.advance(self.cost(msg_id))
        if self.on_send is not None:
            self.on_send(msg_id)
        outcome = self.outcome(msg_id)
        if outcome == "raise":
            raise KafkaTimeoutError("Failed to update metadata after 30.0 secs.")
        future = Future()
        if outcome == "ack-at-once":
            future.success({"offset": msg_id})
        elif outcome != "never":
            self.pending.append((future, outcome, msg_id))
        return future

    def flush(self, timeout=None):
        for future, outcome, msg_id in self.pending:
            if outcome == "fail":
                future.failure(NotLeaderForPartitionError("leader moved"))
            else:
                future.success({"offset": msg_id})
        self.flushed = True

    def close(self, timeout=None):
        self.closed = True


def quiet_progress(total=None):
    return Progress("test", total, 2.0, stream=io.StringIO(), tty=False)


def paced_log(rate, count, cost=lambda msg_id: 0, stop=None):
    """Send count messages at rate on a simulated clock; returns (schedule, log, sender)."""
    clock = SimulatedClock()
    sender = FakeSender(clock, cost=cost)
    schedule = Schedule(clock.now_ns(), rate)
    log = DeliveryLog(count)
    settings = ProduceSettings("in", count, Fraction(rate), seed=1)
    send_on_schedule(
        sender, settings, schedule, log, clock, quiet_progress(), stop or StopSignals()
    )
    return schedule, log, sender


def produce_to(tmp_path, count=50, rate=100, seed=7, **sender_options):
    clock = SimulatedClock()
    sender = FakeSender(clock, **sender_options)
    out = tmp_path / "produced.jsonl"
    settings = ProduceSettings("sensors", count, Fraction(rate), seed)
    stop = StopSignals()
    summary = run_producer(settings, sender, out, clock, quiet_progress(count), stop)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return summary, rows, sender, stop


# --- schedule ---------------------------------------------------------------------------


def test_rate_3_slots_are_a_third_of_a_second_apart_without_drift_over_a_million_slots():
    start = 1_700_000_000 * SECOND
    schedule = Schedule(start, 3)
    gaps = set()
    previous = schedule.slot_ns(1)
    for msg_id in range(2, 1_000_002):
        slot = schedule.slot_ns(msg_id)
        gaps.add(slot - previous)
        previous = slot
    assert gaps == {333_333_333, 333_333_334}
    # Slot 1 + 3k is exactly k seconds after slot 1; a float step would be off by now.
    assert schedule.slot_ns(1_000_000 * 3 + 1) == start + 1_000_000 * SECOND
    assert schedule.slot_ns(1_000_001) == start + 1_000_000 * SECOND // 3


@pytest.mark.parametrize(
    "rate,msg_id,offset_ns",
    [("0.1", 11, 100 * SECOND), ("2.5", 6, 2 * SECOND), (20_000, 20_001, SECOND), ("7", 8, SECOND)],
)
def test_slots_are_exact_for_decimal_rates(rate, msg_id, offset_ns):
    assert Schedule(5, rate).slot_ns(msg_id) == 5 + offset_ns


@pytest.mark.parametrize("rate", ["2.7", "3", "12345.6", "0.3"])
def test_slots_stay_exact_where_float_arithmetic_would_be_off(rate):
    # A billion messages on: offsets near 10**18 ns, where a float has no nanoseconds left.
    msg_id = 10**9 + 1
    exact = int(Fraction(10**9) * (msg_id - 1) / Fraction(rate))  # floor of the exact offset
    assert Schedule(0, rate).slot_ns(msg_id) == exact


@pytest.mark.parametrize("rate", [0, -1, "0.0"])
def test_schedule_rejects_a_rate_that_is_not_positive(rate):
    with pytest.raises(ValueError, match="rate must be > 0"):
        Schedule(0, rate)


# --- pacing on the simulated clock ------------------------------------------------------


def test_each_message_is_sent_exactly_at_its_slot_when_the_sender_keeps_up():
    # 3000 msg/s: slots 333,333.3 ns apart, so rounding must not accumulate.
    schedule, log, sender = paced_log(rate=3000, count=30_000, cost=lambda msg_id: 100_000)
    assert [msg_id for _, msg_id, _, _ in sender.sent] == list(range(1, 30_001))
    start = schedule.start_ns
    assert all(log.sent_ns(i) == start + (i - 1) * SECOND // 3000 for i in range(1, 30_001))
    assert log.sent_ns(29_998) - start == 9_999_000_000  # 29,997 slots of 1/3000 s
    achieved = 29_999 * SECOND / (log.sent_ns(30_000) - log.sent_ns(1))
    assert achieved == pytest.approx(3000, rel=0.01)


def test_achieved_rate_is_within_one_percent_with_a_jittery_sender(tmp_path):
    # Every 10th send takes 1.5 slots: the producer falls behind and must catch up.
    summary, rows, _, _ = produce_to(
        tmp_path, count=20_000, rate=2000, cost=lambda i: 750_000 if i % 10 == 0 else 100_000
    )
    assert summary["achieved_rate"] == pytest.approx(2000, rel=0.01)
    assert [row["msg_id"] for row in rows] == list(range(1, 20_001))
    # A 0.75 ms send delays the next message by 0.25 ms; a 0.1 ms send then catches up.
    assert summary["send_lag_ms"] == {"p50": 0.0, "p99": 0.25, "max": 0.25}


def test_a_stalled_sender_falls_behind_catches_up_and_never_skips_an_id():
    rate, count, stall_at = 1000, 3000, 100
    cost_ns = 100_000  # 0.1 ms per send: 0.9 ms of the 1 ms slot is regained per message

    def cost(msg_id):
        return SECOND if msg_id == stall_at else cost_ns

    schedule, log, sender = paced_log(rate, count, cost=cost)
    assert [msg_id for _, msg_id, _, _ in sender.sent] == list(range(1, count + 1))
    # Intended times never move, whatever the sender does.
    assert schedule.slot_ns(count) == schedule.start_ns + (count - 1) * MS
    lags = [log.sent_ns(i) - schedule.slot_ns(i) for i in range(1, count + 1)]
    assert lags[:stall_at] == [0] * stall_at
    # Right after the stall: 1 s late minus the one slot that passed during it.
    assert lags[stall_at] == SECOND - MS
    # Behind schedule, messages go back to back (no sleeping), so the lag shrinks steadily...
    behind = [i for i in range(stall_at + 1, count + 1) if lags[i - 1] > 0]
    assert all(log.sent_ns(i + 1) - log.sent_ns(i) == cost_ns for i in behind[:-1])
    steps = zip(lags[stall_at:-1], lags[stall_at + 1 :], strict=True)
    assert all(earlier - later == MS - cost_ns for earlier, later in steps if later > 0)
    # ... until it is back on schedule for good (about 1 s / 0.9 ms = 1111 messages later).
    caught_up = behind[-1] + 1
    assert caught_up == stall_at + 1 + (SECOND - MS) // (MS - cost_ns)
    assert lags[caught_up - 1 :] == [0] * (count - caught_up + 1)


@pytest.mark.realtime  # wakes within 50 ms, on the wall clock
def test_system_clock_sleeps_until_the_deadline_and_returns_at_once_when_it_passed():
    clock = SystemClock()
    deadline = clock.now_ns() + 20 * MS
    clock.sleep_until(deadline)
    woke = clock.now_ns()
    assert deadline <= woke < deadline + 50 * MS  # generous: CI machines are noisy
    clock.sleep_until(woke - SECOND)
    assert clock.now_ns() - woke < 50 * MS


# --- message schema and content ---------------------------------------------------------

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$")


def test_messages_have_the_documented_shape_types_and_ranges(tmp_path):
    _, rows, sender, _ = produce_to(tmp_path, count=400, rate=300)
    intended = {row["msg_id"]: row["intended_ms"] for row in rows}
    assert sorted(intended) == list(range(1, 401))
    for topic, sent_id, value, _ in sender.sent:
        assert topic == "sensors"
        message = json.loads(value)
        assert value == json.dumps(message, separators=(",", ":")).encode()  # compact
        assert list(message) == ["msg_id", "content", "timestamp", "sent_ms"]
        assert list(message["content"]) == ["temperature", "humidity", "timestamp"]
        msg_id, content = message["msg_id"], message["content"]
        assert type(msg_id) is int and msg_id == sent_id
        assert type(content["temperature"]) is float and 20.0 <= content["temperature"] <= 35.0
        assert type(content["humidity"]) is float and 30.0 <= content["humidity"] <= 80.0
        assert round(content["temperature"], 2) == content["temperature"]
        assert round(content["humidity"], 2) == content["humidity"]
        assert message["sent_ms"] == intended[msg_id]
        assert content["timestamp"] == intended[msg_id] // 1000
        assert TIMESTAMP.match(message["timestamp"])
        local = datetime.fromtimestamp(intended[msg_id] / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")
        assert message["timestamp"] == local[:-3]


def test_local_time_text_carries_milliseconds_across_second_boundaries():
    messages = SensorMessages(seed=1)
    base = 1_734_258_123_000
    texts = [messages.local_time_text(base + offset) for offset in (998, 999, 1000, 1001, 5)]
    assert [text[-4:] for text in texts] == [".998", ".999", ".000", ".001", ".005"]
    assert texts[0][:-4] == texts[4][:-4] != texts[2][:-4]


def readings(seed, n=1000):
    messages = SensorMessages(seed)
    return [messages.next_reading() for _ in range(n)]


def test_same_seed_gives_the_same_readings_and_another_seed_different_ones():
    assert readings(42) == readings(42)
    assert readings(42) != readings(43)
    assert len(set(readings(42))) > 990


def test_content_depends_on_the_seed_only_not_on_rate_or_timing(tmp_path):
    def contents(directory, rate, seed):
        directory.mkdir()
        _, _, sender, _ = produce_to(directory, count=200, rate=rate, seed=seed)
        return [json.loads(value)["content"] for _, _, value, _ in sender.sent]

    slow, fast = contents(tmp_path / "a", 10, 5), contents(tmp_path / "b", 5000, 5)
    assert [(c["temperature"], c["humidity"]) for c in slow] == [
        (c["temperature"], c["humidity"]) for c in fast
    ]
    assert contents(tmp_path / "c", 10, 6) != slow


# --- produced.jsonl and the summary -----------------------------------------------------


def test_produced_jsonl_records_every_outcome_with_the_documented_fields(tmp_path):
    outcomes = {3: "fail", 5: "raise", 8: "never", 9: "ack-at-once"}
    summary, rows, sender, stop = produce_to(
        tmp_path, count=10, rate=100, outcome=lambda i: outcomes.get(i, "ack")
    )
    assert sender.flushed and sender.closed
    # Lines come in the order outcomes arrived: 5 failed in send(), 9 was acked at once, the
    # rest resolved at flush, and 8 never did (its line is written after close).
    assert [row["msg_id"] for row in rows] == [5, 9, 1, 2, 3, 4, 6, 7, 10, 8]
    first_slot = summary["start_ms"]
    for row in rows:
        assert row["intended_ms"] == first_slot + (row["msg_id"] - 1) * 10
        assert row["sent_ms"] == row["intended_ms"]
        if row["msg_id"] in (3, 5, 8):
            assert set(row) == {"msg_id", "intended_ms", "sent_ms", "acked", "error"}
            assert row["acked"] is False
        else:
            assert set(row) == {"msg_id", "intended_ms", "sent_ms", "acked"}
            assert row["acked"] is True
    errors = {row["msg_id"]: row["error"] for row in rows if "error" in row}
    assert errors[3].startswith("NotLeaderForPartitionError")
    assert errors[5].startswith("KafkaTimeoutError")
    assert errors[8] == UNRESOLVED_ERROR
    assert (summary["sent"], summary["acked"], summary["errors"]) == (10, 7, 3)
    assert produce.exit_code(summary, stop) == produce.EXIT_UNACKED
    assert not (tmp_path / "produced.jsonl.part").exists()


def test_summary_reports_the_run_and_is_written_beside_produced_jsonl(tmp_path):
    summary, rows, _, stop = produce_to(tmp_path, count=1000, rate=500, seed=3)
    on_disk = json.loads((tmp_path / "produced.summary.json").read_text())
    assert {k: v for k, v in on_disk.items() if k != "client"} == {
        "topic": "sensors",
        "count": 1000,
        "rate": 500.0,
        "seed": 3,
        "start_ms": rows[0]["intended_ms"],
        "end_ms": rows[-1]["sent_ms"],
        "sent": 1000,
        "acked": 1000,
        "errors": 0,
        "first_error": None,
        "achieved_rate": 500.0,
        "send_lag_ms": {"p50": 0.0, "p99": 0.0, "max": 0.0},
        "stopped_by": None,
        "wall_clock_moved_ms": 0.0,
    }
    assert summary == on_disk
    assert produce.exit_code(summary, stop) == produce.EXIT_OK


def test_the_summary_says_how_far_the_wall_clock_moved_against_the_runs_clock(tmp_path):
    clock = SimulatedClock()
    clock.step_wall(6_512_300_000)  # as a VM's clock set from its host would
    settings = ProduceSettings("sensors", 10, Fraction(100), 7)
    out = tmp_path / "produced.jsonl"
    summary = run_producer(
        settings, FakeSender(clock), out, clock, quiet_progress(10), StopSignals()
    )
    assert summary["wall_clock_moved_ms"] == 6512.3


def test_the_system_clock_sees_a_step_of_the_wall_clock_and_does_not_follow_it(monkeypatch):
    clock = SystemClock()
    before = clock.now_ns()
    wall = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: wall() + 5 * SECOND)
    assert 5 * SECOND - SECOND // 10 <= clock.wall_moved_ns() <= 5 * SECOND + SECOND // 10
    assert clock.now_ns() - before < SECOND


def test_a_stop_signal_ends_the_run_with_the_messages_sent_so_far(tmp_path):
    stop = StopSignals()

    def signal_at_40(msg_id):
        if msg_id == 40:
            stop.received = signal.SIGTERM

    clock = SimulatedClock()
    sender = FakeSender(clock, on_send=signal_at_40)
    out = tmp_path / "produced.jsonl"
    settings = ProduceSettings("sensors", 100, Fraction(10), 1)
    summary = run_producer(settings, sender, out, clock, quiet_progress(100), stop)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["msg_id"] for row in rows] == list(range(1, 41))
    assert all(row["acked"] for row in rows)
    assert summary["stopped_by"] == "SIGTERM" and summary["sent"] == 40
    assert produce.exit_code(summary, stop) == 128 + signal.SIGTERM


def test_stop_signals_turns_sigterm_into_a_flag_and_restores_the_handler():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.received == signal.SIGTERM
        assert stop.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) == before


def test_lag_percentiles_are_nearest_rank_to_the_microsecond():
    lags = [i * 1000 for i in range(1, 101)]  # 1..100 us
    assert lag_summary_ms(lags) == {"p50": 0.05, "p99": 0.099, "max": 0.1}
    assert lag_summary_ms([]) == {"p50": None, "p99": None, "max": None}
    histogram = MicrosecondHistogram()
    for lag in (5_999, 5_000, 2_000_000):
        histogram.add_ns(lag)
    assert [histogram.percentile_us(f) for f in (0.3, 0.66, 0.67, 1.0)] == [5, 5, 2000, 2000]


# --- progress -------------------------------------------------------------------------


def test_progress_in_a_log_prints_a_status_line_every_interval():
    now = [100.0]
    stream = io.StringIO()
    progress = Progress("produce", 50, 2.0, stream=stream, tty=False, monotonic=lambda: now[0])
    described = []

    def describe():
        described.append(now[0])
        return f"sent={int(now[0])}"

    for step in range(20):  # a quarter of a second apart: 100.0 .. 104.75
        now[0] = 100.0 + step / 4
        progress.update(step + 1, describe)
    now[0] = 105.0
    progress.close(50, "done")
    assert stream.getvalue().splitlines() == [
        "[produce] 2.0s 9/50 sent=102",
        "[produce] 4.0s 17/50 sent=104",
        "[produce] 5.0s 50/50 done",
    ]
    assert described == [102.0, 104.0]  # the status text is built only when shown


def test_progress_on_a_terminal_draws_a_tqdm_bar_with_the_status():
    stream = io.StringIO()
    progress = Progress("produce", 10, 2.0, stream=stream, tty=True)
    progress.close(10, "acked=10 errors=0")
    assert "10/10" in stream.getvalue()
    assert "acked=10 errors=0" in stream.getvalue()


# --- command line -----------------------------------------------------------------------


def cli_error(capsys, args):
    with pytest.raises(SystemExit) as exit_info:
        produce.main(args)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def base_args(tmp_path, **overrides):
    values = {
        "--bootstrap": "127.0.0.1:9092",
        "--topic": "in",
        "--count": "10",
        "--rate": "5",
        "--seed": "1",
        "--out": str(tmp_path / "produced.jsonl"),
    } | overrides
    return [item for pair in values.items() for item in pair]


@pytest.mark.parametrize(
    "override,message",
    [
        ({"--count": "0"}, "argument --count: must be a positive integer"),
        ({"--count": "1.5"}, "argument --count: must be a positive integer"),
        ({"--rate": "0"}, "argument --rate: must be a number of messages per second > 0"),
        ({"--rate": "fast"}, "argument --rate: must be a number of messages per second > 0"),
        ({"--seed": "x"}, "argument --seed: invalid int value"),
        ({"--bootstrap": "broker"}, "'broker' is not HOST:PORT"),
        (
            {"--progress-interval": "0"},
            "argument --progress-interval: must be a number of seconds > 0",
        ),
        ({"--topic": " "}, "argument --topic: must not be empty"),
    ],
)
def test_bad_arguments_are_refused_with_the_problem_and_the_fix(
    tmp_path, capsys, override, message
):
    assert message in cli_error(capsys, base_args(tmp_path, **override))


def test_the_output_directory_must_exist(tmp_path, capsys):
    error = cli_error(capsys, base_args(tmp_path, **{"--out": str(tmp_path / "no" / "p.jsonl")}))
    assert f"directory {tmp_path / 'no'} does not exist; create it first" in error


def test_an_existing_result_is_never_overwritten(tmp_path, capsys):
    (tmp_path / "produced.jsonl").write_text("earlier run\n")
    error = cli_error(capsys, base_args(tmp_path))
    assert "produced.jsonl already exists; results are never overwritten" in error
    assert (tmp_path / "produced.jsonl").read_text() == "earlier run\n"


def test_the_package_runs_from_a_bare_copy_without_the_repository(tmp_path):
    copy = tmp_path / "host"
    shutil.copytree(os.path.join(REPO, "producer"), copy / "producer")
    env = {**os.environ, "PYTHONPATH": str(copy)}
    probe = textwrap.dedent(
        f"""
        import sys
        import producer, producer.produce, producer.collect, producer.probe, producer.topics
        assert producer.__file__.startswith({str(copy)!r}), producer.__file__
        def from_repo(module):
            path = getattr(module, "__file__", None) or ""
            return path.startswith({REPO + os.sep!r}) and not path.startswith(sys.prefix)
        stray = sorted(name for name, module in sys.modules.items() if from_repo(module))
        assert not stray, stray
        """
    )
    subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, check=True)
    for module in ("producer.produce", "producer.collect", "producer.probe", "producer.topics"):
        run = subprocess.run(
            [sys.executable, "-m", module, "--help"], cwd=tmp_path, env=env, capture_output=True
        )
        assert run.returncode == 0 and b"--bootstrap" in run.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "producer.produce", *base_args(tmp_path, **{"--count": "-3"})],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "must be a positive integer" in bad.stderr


def test_a_given_start_time_fixes_when_the_first_message_is_due(tmp_path):
    """--start-at-ms: message 1 is due then (not at once), so faults can share the instant."""
    clock = SimulatedClock()
    start_ns = clock.now_ns() + 3 * NS_PER_S
    sender = FakeSender(clock)
    settings = ProduceSettings("in", 3, Fraction(10), 1, start_ns)
    summary = run_producer(
        settings, sender, tmp_path / "produced.jsonl", clock, quiet_progress(), StopSignals()
    )
    assert [at for _, _, _, at in sender.sent] == [start_ns + i * NS_PER_S // 10 for i in range(3)]
    assert summary["start_ms"] == start_ns // NS_PER_MS


def test_the_start_time_option_takes_epoch_milliseconds(tmp_path):
    common = ["--bootstrap", "h:9092", "--topic", "t", "--count", "1", "--rate", "1", "--seed", "1"]
    args = produce.parse_args([*common, "--out", str(tmp_path / "p"), "--start-at-ms", "17955158"])
    assert args.start_at_ms == 17955158
    assert produce.parse_args([*common, "--out", str(tmp_path / "p")]).start_at_ms is None
