"""The drain rule with a consumer group: committed offsets, acked ids and quiet, at one check."""

from __future__ import annotations

from dataclasses import replace

import pytest

from producer.drain import DrainSettings, DrainView, Stop, decide, shortfalls
from producer.lagsampler import LagSample

SECOND = 1_000_000_000
GROUP, TOPIC = "streamlab-run-7", "run-7-in"
SETTINGS = DrainSettings(
    quiet_s=10, timeout_s=900, drain_timeout_s=300, group=GROUP, input_topic=TOPIC
)
DONE_S = 100  # the producer finished at 100 s
LOST_WAIT_SETTINGS = replace(SETTINGS, lost_wait_s=20)


def sample(t_s, ends=(500, 400, 300), committed=(500, 400, 300), result_end=(1200,)):
    return LagSample(
        int(t_s * 1000), tuple(range(len(ends))), tuple(ends), tuple(committed), result_end
    )


def view(sample=None, missing=0, quiet_since_s=DONE_S, error=None, done_s=DONE_S):
    done = None if done_s is None else done_s * SECOND
    return DrainView(0, done, quiet_since_s * SECOND, missing, sample, error)


def test_all_committed_all_arrived_and_quiet_stops_complete():
    assert decide(view(sample(105)), 110 * SECOND, SETTINGS) == Stop("complete")


def test_committed_short_of_the_end_keeps_waiting_however_quiet_it_is():
    short = sample(150, committed=(500, 350, 300))
    assert decide(view(short), 200 * SECOND, SETTINGS) is None
    assert shortfalls(view(short), 200 * SECOND, SETTINGS) == [
        f"group {GROUP} has committed 50 records short of the end of {TOPIC} on partitions [1]"
    ]


def test_a_partition_the_group_never_committed_keeps_waiting():
    none = sample(150, committed=(500, None, 300))
    assert decide(view(none), 200 * SECOND, SETTINGS) is None
    assert shortfalls(view(none), 200 * SECOND, SETTINGS) == [
        f"group {GROUP} has committed nothing on {TOPIC} partitions [1]"
    ]


def test_a_sample_taken_before_the_producer_finished_does_not_count():
    early = sample(DONE_S - 0.5)  # committed == end then, but more input may have come since
    assert decide(view(early), 200 * SECOND, SETTINGS) is None
    failing = view(early, error="KafkaTimeoutError: timed out")
    assert shortfalls(failing, 200 * SECOND, SETTINGS) == [
        f"no offset sample of group {GROUP} succeeded after the producer finished "
        "(last error: KafkaTimeoutError: timed out)"
    ]


@pytest.mark.parametrize(
    "state,now_s",
    [
        (view(sample(105), quiet_since_s=105), 114.9),  # a record came 9.9 s ago
        (view(sample(105), missing=1), 119),  # an acked id has not arrived, within lost_wait_s
        (view(None, done_s=None, quiet_since_s=0), 200),  # the producer is still running
    ],
)
def test_any_single_shortfall_keeps_waiting(state, now_s):
    assert decide(state, int(now_s * SECOND), SETTINGS) is None


def test_at_the_drain_timeout_the_run_is_incomplete_with_every_reason():
    short = sample(390, ends=(500, 1400, 300), committed=(400, 300, 300))
    stop = decide(view(short, missing=3), (DONE_S + 300) * SECOND, SETTINGS)
    assert stop == Stop(
        "drain_timeout",
        f"3 acknowledged ids never arrived; group {GROUP} has committed 1,200 records short of "
        f"the end of {TOPIC} on partitions [0, 1]",
    )
    assert decide(view(short, missing=3), (DONE_S + 299) * SECOND, SETTINGS) is None


def test_still_arriving_at_the_drain_timeout_is_named_too():
    busy = view(sample(395), quiet_since_s=398)
    stop = decide(busy, 400 * SECOND, SETTINGS)
    assert stop == Stop(
        "drain_timeout", "records were still arriving (2.0 s without one, quiet_s is 10 s)"
    )


def test_the_absolute_timeout_caps_a_producer_that_never_finishes():
    stop = decide(view(None, done_s=None, quiet_since_s=0), 900 * SECOND, SETTINGS)
    assert stop == Stop("timeout", "the producer never finished (produced.jsonl did not appear)")


def test_without_a_group_committed_offsets_are_not_asked_for():
    settings = DrainSettings(quiet_s=10, timeout_s=900, drain_timeout_s=300)
    assert decide(view(None), 110 * SECOND, settings) == Stop("complete")


def test_missing_ids_keep_a_committed_quiet_run_open_only_for_lost_wait_s():
    settings = LOST_WAIT_SETTINGS
    lossy = view(sample(105), missing=7)
    assert decide(lossy, int(119.9 * SECOND), settings) is None
    assert shortfalls(lossy, int(119.9 * SECOND), settings) == ["7 acknowledged ids never arrived"]
    # Nothing came for lost_wait_s after the group committed the end: the 7 are lost, and the
    # run is complete (measured), in normal time rather than at the drain timeout.
    assert decide(lossy, 120 * SECOND, settings) == Stop("complete")


def test_missing_ids_never_end_a_run_whose_group_has_not_committed_the_end():
    settings = LOST_WAIT_SETTINGS
    behind = view(sample(150, committed=(500, 350, 300)), missing=7)
    assert decide(behind, 250 * SECOND, settings) is None
    stop = decide(behind, (DONE_S + 300) * SECOND, settings)
    assert stop == Stop(
        "drain_timeout",
        f"7 acknowledged ids never arrived; group {GROUP} has committed 50 records short of "
        f"the end of {TOPIC} on partitions [1]",
    )
