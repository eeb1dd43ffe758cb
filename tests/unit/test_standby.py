"""duplicate_policy='wait': a member whose instance id a live process holds stands by, without a
client and unready, until the id is free, then joins; under 'exit' it ends with FencedInstanceError (82).
On a fake client, a scripted group and an instant clock; bench/bench_duplicate_restarts.py runs the same
loop on a broker, with Kubernetes-style restarts."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import confluent_kafka
import pytest
from fakes import (
    FENCED,
    MODERN,
    UNRELEASED,
    Assign,
    FakeAdapter,
    FakeFactory,
    FakeGroupWatch,
    FakeTime,
    Step,
    group_look,
    holder,
    rec,
    tp,
)

from static_consumer._base.errors import EXIT_FENCED, CommitFailedError, FencedInstanceError
from static_consumer._core.confluent import poll_error
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.events import Fenced, Lost, MembershipEvent, MembershipListener, StandingBy
from static_consumer._core.seams import Seams
from static_consumer._core.standby import LOOK_S, TRY_S
from static_consumer._kafka.groups import GroupDescription
from static_consumer.settings import ConsumerSettings

Looks = Callable[[float], GroupDescription | None]


class Events(MembershipListener):
    def __init__(self) -> None:
        self.seen: list[MembershipEvent] = []

    def on_lost(self, event: Lost) -> None:
        self.seen.append(event)

    def on_standing_by(self, event: StandingBy) -> None:
        self.seen.append(event)

    def on_fenced(self, event: Fenced) -> None:
        self.seen.append(event)


def held_until(until: float, member: str = "twin-7") -> Looks:
    """The other process holds the id until ``until`` (it stopped, or its session expired)."""
    return lambda now: group_look(holder(member)) if now < until else group_look()


class TimedFactory(FakeFactory):
    """KIP-848: every join is refused (UNRELEASED_INSTANCE_ID) while the other process holds the id, until
    ``until``; then ``joined``'s script."""

    def __init__(self, time: FakeTime, until: float, joined: list[Step]) -> None:
        super().__init__()
        self.time, self.until, self.joined = time, until, joined

    def __call__(self, config: dict[str, Any]) -> FakeAdapter:
        self._scripts.append(deque([UNRELEASED] if self.time.now < self.until else self.joined))
        return super().__call__(config)


def consumer(
    looks: Looks,
    *scripts: list[Step],
    time: FakeTime,
    offsets: Any = lambda now: {},
    factory: FakeFactory | None = None,
    **overrides: Any,
) -> tuple[StaticConsumer, FakeFactory, FakeGroupWatch, Events]:
    values: dict[str, Any] = {
        "bootstrap_servers": "127.0.0.1:9092",
        "group_id": "g",
        "topics": ("t",),
        "duplicate_policy": "wait",
    }
    factory = factory or FakeFactory(*scripts)
    watch = FakeGroupWatch(time.clock, looks, offsets)
    events = Events()
    c = StaticConsumer(
        ConsumerSettings(**{**values, **overrides}),
        listeners=[events],
        env={"POD_NAME": "orders-2"},
        seams=Seams(
            adapter_factory=factory,
            probe=lambda s, **_: MODERN,
            group_watch=watch,
            sleep=time.sleep,
            clock=time.clock,
        ),
    )
    return c, factory, watch, events


def test_a_classic_member_fenced_by_a_live_process_stands_by_and_joins_once_the_id_is_free() -> None:
    time = FakeTime()
    first: list[Step] = [Assign((tp(0),)), rec(0, 5), FENCED]
    c, factory, watch, events = consumer(
        held_until(30.0), first, [Assign((tp(0),)), rec(0, 9)], time=time, protocol="classic"
    )
    with c.start():
        record = c.poll(0.1)
        assert record == rec(0, 5)
        c.mark_processed(record)
        assert c.poll(0.1) is None  # the fence: stood by inside this call, then joined again
        assert c.state is State.RUNNING
        assert 30.0 <= time.now <= 30.0 + LOOK_S
        assert c.poll(0.1) == rec(0, 9)
    kinds = [type(e).__name__ for e in events.seen]
    assert kinds == ["Lost", "StandingBy"], kinds  # no Fenced: it did not end
    assert "FENCED_INSTANCE_ID" in events.seen[1].reason  # type: ignore[attr-defined]
    fenced_client, new_client = factory.adapters
    assert fenced_client.commits == []  # the partition was another's: offset 5 never committed by it
    assert fenced_client.calls.count("close") == 1 and len(factory.adapters) == 2
    assert watch.opened == watch.closed == 1


@pytest.mark.parametrize(
    ("listed_until", "joined_at"),
    [
        (120.0, 120.0),  # the holder crashed: joined once its session ended and it was no longer listed
        (10_000.0, 120.0),  # the holder left statically at 120 s but is listed until its session ends
    ],
)
def test_a_kip848_newcomer_that_proves_the_holder_alive_stands_by_instead_of_exiting(
    listed_until: float, joined_at: float
) -> None:
    time = FakeTime()
    factory = TimedFactory(time, joined_at, [Assign((tp(0),)), rec(0, 3)])
    c, _, _, events = consumer(
        held_until(listed_until),
        time=time,
        factory=factory,
        offsets=lambda now: {tp(0): 100 + int(now * 10)},  # the holder commits: alive
        protocol="consumer",
    )
    with c.start():
        assert c.poll(0.1) is None
        assert c.state is State.RUNNING and joined_at <= time.now <= joined_at + TRY_S + LOOK_S
        assert c.poll(0.1) == rec(0, 3)
    assert [type(e).__name__ for e in events.seen] == ["StandingBy"]
    assert "alive" in events.seen[0].reason  # type: ignore[attr-defined]
    # The refused first client, a refused join every TRY_S while standing by, the one that joined.
    assert len(factory.adapters) <= 2 + joined_at / TRY_S


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_standing_by_is_bounded_by_duplicate_max_wait_s(protocol: str) -> None:
    time = FakeTime()
    first: list[Step] = [Assign((tp(0),)), FENCED]
    c, factory, _, events = consumer(
        held_until(10_000.0),
        first,
        time=time,
        factory=TimedFactory(time, 10_000.0, []) if protocol == "consumer" else None,
        offsets=lambda now: {tp(0): int(now)},
        protocol=protocol,
        duplicate_max_wait_s=60.0,
    )
    with c.start():
        with pytest.raises(FencedInstanceError, match="duplicate_max_wait_s=60") as raised:
            for _ in range(3):
                c.poll(0.1)
        assert raised.value.exit_code == EXIT_FENCED and c.state is State.FENCED
    assert isinstance(events.seen[-1], Fenced)
    # Never joined: the other process held the id throughout (classic: no join at all while it is listed).
    assert len(factory.adapters) == (1 if protocol == "classic" else 1 + int(60 / TRY_S))


def test_under_exit_the_fenced_classic_member_ends_at_once() -> None:
    time = FakeTime()
    c, factory, watch, events = consumer(
        held_until(30.0), [Assign((tp(0),)), FENCED], time=time, protocol="classic", duplicate_policy="exit"
    )
    with c.start():
        with pytest.raises(FencedInstanceError):
            for _ in range(3):
                c.poll(0.1)
    assert watch.opened == 0 and time.now == 0.0
    assert not any(isinstance(e, StandingBy) for e in events.seen)


def test_a_fence_found_by_a_commit_stands_by_then_that_commit_is_refused() -> None:
    # A refused commit (code 82 from the broker) is how a committing member usually learns of the fence.
    fenced = poll_error(confluent_kafka.KafkaError(82))  # what the adapter makes of it: fatal
    time = FakeTime()
    c, factory, _, events = consumer(
        held_until(30.0),
        [Assign((tp(0),)), rec(0, 5)],
        [Assign((tp(0),)), rec(0, 9)],
        time=time,
        protocol="classic",
    )
    with c.start():
        record = c.poll(0.1)
        assert record is not None
        factory.adapters[0].commit_failures.append(fenced)
        with pytest.raises(CommitFailedError):  # not committed: t[0] was the other process's
            c.commit(record)
        assert c.state is State.RUNNING and 30.0 <= time.now <= 30.0 + LOOK_S
        assert [type(e).__name__ for e in events.seen] == ["Lost", "StandingBy"]
        assert c.poll(0.1) == rec(0, 9)
