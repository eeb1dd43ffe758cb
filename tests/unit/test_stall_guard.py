"""The stall guard on the fake adapter: after a gap longer than the threshold between client
calls, no record goes out before membership was checked; nothing of a partition still owned is skipped.

Time is a fake clock: a ``Freeze`` step in a script is the process stopped inside that client call.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fakes import (
    MODERN,
    UNKNOWN_MEMBER,
    Assign,
    FakeAdapter,
    FakeClock,
    FakeFactory,
    Freeze,
    Lose,
    Revoke,
    Step,
    rec,
    tp,
)

from static_consumer._base.codes import FENCED_INSTANCE_ID
from static_consumer._base.errors import FencedInstanceError
from static_consumer._base.records import Record, RecordBatch
from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.events import MembershipEvent, MembershipListener, Stalled
from static_consumer._core.seam import PollError
from static_consumer._core.seams import Seams
from static_consumer._core.stall import UNKNOWN_SESSION_MS
from static_consumer.settings import ConsumerSettings

STALE_EPOCH = PollError(113, "STALE_MEMBER_EPOCH", "Commit failed: Broker: Stale member epoch", False, False)
FENCED_COMMIT = PollError(FENCED_INSTANCE_ID, "FENCED_INSTANCE_ID", "Broker: fenced", True, False)
# Classic, session 6 s, heartbeats 0.5 s: threshold min(6 / 2, 0.75 * 5.5) = 3 s; the consumer
# protocol's broker session is 6 s too (a group override the probe read).
THRESHOLD_S = 3.0
CAPS = replace(MODERN, consumer_session_timeout_ms=6000)
P0, P1 = tp(0), tp(1)


class Events(MembershipListener):
    def __init__(self) -> None:
        self.seen: list[MembershipEvent] = []

    def _add(self, event: Any) -> None:
        self.seen.append(event)

    on_assigned = on_revoked = on_lost = on_fenced = on_stalled = _add

    def stalls(self) -> list[Stalled]:
        return [e for e in self.seen if isinstance(e, Stalled)]


def settings(**overrides: Any) -> ConsumerSettings:
    values: dict[str, Any] = {
        "bootstrap_servers": "127.0.0.1:9092",
        "group_id": "g",
        "topics": ("t",),
        "instance_id": "app-0",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500,
    }
    values.update(overrides)
    if values.get("protocol") == "consumer":  # the broker decides the session under KIP-848
        del values["session_timeout_ms"], values["heartbeat_interval_ms"]
    return ConsumerSettings(**values)


def started(
    script: list[Step], probe: Any = CAPS, **overrides: Any
) -> tuple[StaticConsumer, FakeAdapter, Events, FakeClock]:
    clock, events = FakeClock(), Events()
    factory = FakeFactory(script, freeze=clock.advance)
    c = StaticConsumer(
        settings(**overrides),
        listeners=[events],
        env={},
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: probe, clock=clock),
    )
    c.start()
    return c, factory.last, events, clock


def owned_then_committed(c: StaticConsumer, first: list[Record]) -> None:
    """The first batch is processed and committed, so the guard has offsets to probe with."""
    assert c.consume(10, 0.1) == first
    c.commit(first)


# -- thresholds --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "caps_session_ms", "expected_s"),
    [
        ({}, None, THRESHOLD_S),
        ({"session_timeout_ms": 45000, "heartbeat_interval_ms": None}, None, 22.5),  # heartbeat 3 s
        ({"session_timeout_ms": 10000, "heartbeat_interval_ms": 8000}, None, 1.5),  # 0.75 * (10 - 8)
        ({"protocol": "consumer"}, 4000, 2.0),
        ({"protocol": "consumer"}, None, UNKNOWN_SESSION_MS / 2000),
    ],
)
def test_threshold_derives_from_the_session_timeout(
    overrides: dict[str, Any], caps_session_ms: int | None, expected_s: float
) -> None:
    caps = replace(MODERN, consumer_session_timeout_ms=caps_session_ms)
    c, _, _, _ = started([], probe=caps, **overrides)
    assert c._session.stall.threshold_s == pytest.approx(expected_s)
    c.close()


# -- verdicts ----------------------------------------------------------------------------------------


def test_a_gap_below_the_threshold_is_not_checked() -> None:
    c, adapter, events, _ = started([Assign((P0,)), rec(0, 0), None, Freeze(THRESHOLD_S - 0.1), rec(0, 1)])
    owned_then_committed(c, [rec(0, 0)])
    assert c.consume(10, 0.1) == [rec(0, 1)]
    assert adapter.calls.count("commit") == 1 and events.stalls() == []
    c.close()


def test_still_the_owner_after_a_long_gap_gets_its_batch_after_one_commit() -> None:
    c, adapter, events, _ = started([Assign((P0,)), rec(0, 0), None, Freeze(5.0), rec(0, 1), rec(0, 2)])
    owned_then_committed(c, [rec(0, 0)])
    consumes = adapter.calls.count("consume")
    assert c.consume(10, 0.1) == [rec(0, 1), rec(0, 2)]
    assert adapter.commits == [{P0: 1}, {P0: 1}]  # the probe sent the last commit again
    assert adapter.calls.count("consume") == consumes + 1  # no waiting
    (stall,) = events.stalls()
    assert (stall.verdict, stall.dropped, stall.rewound) == ("ok", 0, ())
    assert stall.gap_s == pytest.approx(5.0) and stall.threshold_s == THRESHOLD_S
    c.close()


def test_the_probe_commits_processed_offsets_first() -> None:
    c, adapter, events, _ = started([Assign((P0,)), rec(0, 0), rec(0, 1), None, Freeze(5.0), rec(0, 2)])
    assert c.consume(10, 0.1) == [rec(0, 0), rec(0, 1)]
    c.mark_processed(rec(0, 1))  # processed, not committed yet
    assert c.consume(10, 0.1) == [rec(0, 2)]
    assert adapter.commits == [{P0: 2}]
    assert c.commit() == {}  # nothing pending any more
    c.close()


def test_member_gone_hands_out_nothing_and_waits_for_the_loss() -> None:
    script: list[Step] = [Assign((P0, P1)), rec(0, 0), rec(1, 0), None, Freeze(9.0), rec(0, 1), rec(1, 1)]
    script += [None, None, Lose((P0, P1)), None, Assign((P1,)), rec(1, 0)]
    c, adapter, events, _ = started(script)
    owned_then_committed(c, [rec(0, 0), rec(1, 0)])
    adapter.commit_failures.append(UNKNOWN_MEMBER)
    assert c.consume(10, 0.1) == []  # the stale batch is dropped, the loss was served
    (stall,) = events.stalls()
    assert (stall.verdict, stall.dropped) == ("gone", 2)
    assert c.assignment == frozenset()
    assert c.consume(10, 0.1) == [rec(1, 0)]  # re-assigned: from the committed offset
    assert adapter.seeks == []  # the re-assignment restarts from the committed offset
    assert len(events.stalls()) == 1
    c.close()


def test_member_gone_waits_for_the_loss_past_a_revoke_of_some_partitions() -> None:
    script: list[Step] = [Assign((P0, P1)), rec(0, 0), rec(1, 0), None, Freeze(9.0), rec(0, 1), rec(1, 1)]
    script += [None, Revoke((P1,)), None, rec(0, 2), None, Lose((P0,)), None]
    c, adapter, events, _ = started(script, protocol="consumer")
    owned_then_committed(c, [rec(0, 0), rec(1, 0)])
    adapter.commit_failures.append(UNKNOWN_MEMBER)
    assert c.consume(10, 0.1) == []  # P0 was still owned after the revoke, but the broker said gone
    assert [(s.verdict, s.dropped) for s in events.stalls()] == [("gone", 3)]
    c.close()


def test_loss_reported_in_the_same_call_needs_no_probe() -> None:
    c, adapter, events, _ = started([Assign((P0,)), rec(0, 0), None, Freeze(9.0), Lose((P0,)), rec(0, 1)])
    owned_then_committed(c, [rec(0, 0)])
    assert c.consume(10, 0.1) == []
    assert adapter.calls.count("commit") == 1  # only the application's
    assert [s.verdict for s in events.stalls()] == ["lost"]
    c.close()


def test_classic_member_id_cleared_by_librdkafka_means_gone_without_a_probe() -> None:
    script: list[Step] = [Assign((P0,)), rec(0, 0), None, Freeze(9.0), rec(0, 1), None, Lose((P0,))]
    c, adapter, events, _ = started(script)
    owned_then_committed(c, [rec(0, 0)])
    adapter.member = None  # librdkafka's own session check fired on wake-up
    assert c.consume(10, 0.1) == []
    assert adapter.calls.count("commit") == 1
    assert [s.verdict for s in events.stalls()] == ["gone"]
    c.close()


def test_a_fence_found_by_the_probe_raises_and_hands_out_nothing() -> None:
    c, adapter, events, _ = started([Assign((P0,)), rec(0, 0), None, Freeze(9.0), rec(0, 1)])
    owned_then_committed(c, [rec(0, 0)])
    adapter.commit_failures.append(FENCED_COMMIT)
    with pytest.raises(FencedInstanceError):
        c.consume(10, 0.1)
    assert events.stalls() == [] and not c._session.buffer
    c.close()


def test_no_answer_waits_a_little_then_hands_out_records_of_partitions_still_owned() -> None:
    script: list[Step] = [Assign((P0,)), rec(0, 0), None, Freeze(9.0), rec(0, 1)]
    c, adapter, events, _ = started(script, protocol="consumer")
    c.consume(10, 0.1)  # nothing committed: nothing to probe with
    before = adapter.calls.count("consume")
    assert c.consume(10, 0.1) == [rec(0, 1)]
    assert adapter.calls.count("commit") == 0
    assert adapter.calls.count("consume") > before + 1  # served callbacks for a while (bounded)
    assert [s.verdict for s in events.stalls()] == ["unknown"]
    c.close()


def test_stale_member_epoch_is_no_verdict_of_gone() -> None:
    c, adapter, events, _ = started([Assign((P0,)), rec(0, 0), None, Freeze(9.0), rec(0, 1)])
    owned_then_committed(c, [rec(0, 0)])
    adapter.commit_failures.append(STALE_EPOCH)
    assert c.consume(10, 0.1) == [rec(0, 1)]
    assert [s.verdict for s in events.stalls()] == ["unknown"]
    c.close()


def test_a_gap_ending_in_no_records_checks_the_next_records() -> None:
    c, adapter, events, _ = started([Assign((P0,)), rec(0, 0), None, Freeze(9.0), None, rec(0, 1)])
    owned_then_committed(c, [rec(0, 0)])
    assert c.consume(10, 0.1) == []  # the gap ends in an empty call
    assert events.stalls() == []
    assert c.consume(10, 0.1) == [rec(0, 1)]
    assert [s.verdict for s in events.stalls()] == ["ok"] and adapter.calls.count("commit") == 2
    c.close()


def test_a_loss_served_after_the_gap_but_before_the_records_needs_no_probe() -> None:
    script: list[Step] = [Assign((P0,)), rec(0, 0), None, Freeze(9.0), Lose((P0,)), None]
    script += [Assign((P0,)), rec(0, 5)]
    c, adapter, events, _ = started(script)
    owned_then_committed(c, [rec(0, 0)])
    assert c.consume(10, 0.1) == []
    assert c.consume(10, 0.1) == [rec(0, 5)]  # fetched after the re-assignment
    assert [s.verdict for s in events.stalls()] == ["lost"] and adapter.calls.count("commit") == 1
    c.close()


# -- records of earlier ownerships, disowned partitions, rewinds ----------------------------------------


def test_records_fetched_before_a_reassignment_are_dropped_and_later_ones_kept() -> None:
    # KIP-848 style: gone, then lost and assigned again while the guard serves callbacks.
    script: list[Step] = [Assign((P0,)), rec(0, 0), None, Freeze(9.0), rec(0, 1), rec(0, 2), None]
    script += [Lose((P0,)), Assign((P0,)), rec(0, 1), None]
    c, adapter, events, _ = started(script, protocol="consumer")
    owned_then_committed(c, [rec(0, 0)])
    adapter.commit_failures.append(UNKNOWN_MEMBER)
    assert c.consume(10, 0.1) == [rec(0, 1)]  # only the record fetched after the re-assignment
    (stall,) = events.stalls()
    assert (stall.verdict, stall.dropped) == ("gone", 2) and adapter.seeks == []
    c.close()


def test_disowned_partitions_stay_filtered_until_the_loss_and_are_rewound_if_it_never_comes() -> None:
    script: list[Step] = [Assign((P0, P1)), rec(0, 0), rec(1, 0), None, Freeze(9.0), rec(0, 1), rec(1, 1)]
    script += [None] * 700  # no loss while the guard waits (at most 3 s / 5 ms calls)
    script += [rec(0, 2), rec(1, 2), None, Freeze(20.0), None]
    c, adapter, events, _ = started(script)
    owned_then_committed(c, [rec(0, 0), rec(1, 0)])
    adapter.commit_failures.append(UNKNOWN_MEMBER)
    assert c.consume(10, 0.1) == []
    assert [s.verdict for s in events.stalls()] == ["gone"]
    while adapter.script[0] is None:
        assert c.consume(10, 0.1) == []
    assert c.consume(10, 0.1) == []  # still disowned: dropped, remembered from offset 1
    assert c.consume(10, 0.1) == []  # 20 s later (more than a session): rewound, not skipped
    assert sorted(adapter.seeks) == [(P0, 1), (P1, 1)]
    expired = events.stalls()[-1]
    assert expired.verdict == "expired" and sorted(expired.rewound) == [(P0, 1), (P1, 1)]
    assert not c._session.stall.gone
    c.close()


def test_records_handed_back_after_a_listener_error_are_not_handed_out_once_revoked() -> None:
    class Raises(MembershipListener):
        def on_assigned(self, event: Any) -> None:
            if event.partitions == (P1,):
                raise RuntimeError("listener bug")

    factory = FakeFactory([Assign((P0,)), rec(0, 0), Assign((P1,)), rec(1, 0), None, Revoke((P0,)), None])
    c = StaticConsumer(
        settings(),
        listeners=[Raises()],
        env={},
        seams=Seams(adapter_factory=factory, probe=lambda _, **__: CAPS),
    )
    c.start()
    with pytest.raises(RuntimeError):
        c.consume(10, 0.1)  # both records handed back
    assert c.consume(10, 0.1) == [rec(1, 0)]  # P0 was revoked in the call that follows
    c.close()


# -- the other consume paths ---------------------------------------------------------------------------


def test_consume_batch_drops_stale_records_too() -> None:
    script: list[Step] = [Assign((P0,)), rec(0, 0), None, Freeze(9.0), rec(0, 1), rec(0, 2), None]
    c, adapter, events, _ = started([*script, Lose((P0,))])
    batch = c.consume_batch(10, 0.1)
    c.commit(batch)
    adapter.commit_failures.append(UNKNOWN_MEMBER)
    got = c.consume_batch(10, 0.1)
    assert isinstance(got, RecordBatch) and len(got) == 0
    assert [(s.verdict, s.dropped) for s in events.stalls()] == [("gone", 2)]
    c.close()


def test_poll_keeps_extra_records_for_the_next_calls() -> None:
    script: list[Step] = [Assign((P0,)), rec(0, 0), None, Freeze(9.0), rec(0, 1), rec(0, 2), None]
    c, adapter, events, _ = started(script, protocol="consumer")
    assert c.poll(0.1) == rec(0, 0)
    assert c.poll(0.1) is None
    assert c.poll(0.1) == rec(0, 1)  # nothing to probe with: unknown, a short wait, then handed out
    assert c.poll(0.1) == rec(0, 2)
    assert [s.verdict for s in events.stalls()] == ["unknown"]
    c.close()


# -- records handed back earlier, and when the check ran ---------------------------------------------


class RaisesOnce(MembershipListener):
    """A listener bug on the first assignment: that call's records are handed back to the buffer."""

    def __init__(self) -> None:
        self.raised = False

    def on_assigned(self, event: Any) -> None:
        if not self.raised:
            self.raised = True
            raise RuntimeError("listener bug")


def handed_back(script: list[Step]) -> tuple[StaticConsumer, FakeAdapter, Events, FakeClock]:
    """Records rec(0, 0) and rec(0, 1) handed back; rec(0, 0) then processed and committed."""
    clock, events = FakeClock(), Events()
    factory = FakeFactory([Assign((P0,)), rec(0, 0), rec(0, 1), None, *script], freeze=clock.advance)
    c = StaticConsumer(
        settings(),
        listeners=[events, RaisesOnce()],
        env={},
        seams=Seams(adapter_factory=factory, probe=lambda _, **__: CAPS, clock=clock),
    )
    c.start()
    with pytest.raises(RuntimeError):
        c.consume(10, 0.1)
    assert c.consume(1, 0.1) == [rec(0, 0)]  # from the buffer, no client call
    c.commit([rec(0, 0)])
    return c, factory.last, events, clock


@pytest.mark.parametrize("call", ["consume", "poll", "consume_batch"])
def test_records_handed_back_before_a_freeze_are_checked_when_they_go_out_without_a_client_call(
    call: str,
) -> None:
    # Frozen while rec(0, 1) waited in the buffer; the next call hands it out without asking the
    # client (consume() has max_records of them): the gap is measured there too.
    c, adapter, events, clock = handed_back([None, Lose((P0,)), None])
    clock.advance(9.0)
    adapter.commit_failures.append(UNKNOWN_MEMBER)
    got = {"consume": lambda: c.consume(1, 0.1), "poll": lambda: c.poll(0.1)}.get(
        call, lambda: list(c.consume_batch(1, 0.1))
    )()
    assert not got  # the broker said gone; the loss was served, the record dropped
    assert [(s.verdict, s.dropped, s.gap_s) for s in events.stalls()] == [("gone", 1, 9.0)]
    c.close()


def test_records_handed_back_go_out_unchecked_within_the_threshold() -> None:
    c, adapter, events, clock = handed_back([])
    clock.advance(THRESHOLD_S - 0.1)
    assert c.consume(1, 0.1) == [rec(0, 1)]
    assert adapter.calls.count("commit") == 1 and events.stalls() == []
    c.close()


def test_checked_at_is_after_the_client_returned_and_before_the_hand_over() -> None:
    c, _, events, clock = started([Assign((P0,)), rec(0, 0), None, Freeze(THRESHOLD_S - 0.1), rec(0, 1)])
    assert c.checked_at == 0.0
    owned_then_committed(c, [rec(0, 0)])
    before = clock.now
    assert c.checked_at == before
    assert c.consume(10, 0.1) == [rec(0, 1)]  # frozen inside the client call, under the threshold
    assert c.checked_at == before + THRESHOLD_S - 0.1 and events.stalls() == []
    c.close()
