"""Membership events and their delivery to listeners."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from static_consumer._base.records import TopicPartition
from static_consumer._core.events import (
    Assigned,
    Closed,
    Dispatcher,
    FatalError,
    Fenced,
    Lost,
    MembershipEvent,
    MembershipListener,
    Revoked,
)

FIELDS: dict[str, Any] = {"group_id": "g", "instance_id": "app-0", "member_id": "m-1"}
PARTS = (TopicPartition("t", 0), TopicPartition("t", 1))

ALL_EVENTS: list[MembershipEvent] = [
    Assigned(**FIELDS, partitions=PARTS),
    Revoked(**FIELDS, partitions=PARTS),
    Lost(**FIELDS, partitions=PARTS),
    Fenced(**FIELDS, error="fenced"),
    FatalError(**FIELDS, error="boom"),
    Closed(**FIELDS, left_group=False),
]


class Recorder(MembershipListener):
    def __init__(self) -> None:
        self.got: list[tuple[str, MembershipEvent]] = []

    def on_assigned(self, event: Assigned) -> None:
        self.got.append(("on_assigned", event))

    def on_revoked(self, event: Revoked) -> None:
        self.got.append(("on_revoked", event))

    def on_lost(self, event: Lost) -> None:
        self.got.append(("on_lost", event))

    def on_fenced(self, event: Fenced) -> None:
        self.got.append(("on_fenced", event))

    def on_fatal(self, event: FatalError) -> None:
        self.got.append(("on_fatal", event))

    def on_closed(self, event: Closed) -> None:
        self.got.append(("on_closed", event))


def test_each_event_reaches_its_own_method() -> None:
    recorder = Recorder()
    dispatcher = Dispatcher([recorder])
    for event in ALL_EVENTS:
        dispatcher.emit(event)
    assert [name for name, _ in recorder.got] == [
        "on_assigned",
        "on_revoked",
        "on_lost",
        "on_fenced",
        "on_fatal",
        "on_closed",
    ]
    assert [event for _, event in recorder.got] == ALL_EVENTS


def test_base_listener_ignores_every_event() -> None:
    dispatcher = Dispatcher([MembershipListener()])
    for event in ALL_EVENTS:
        dispatcher.emit(event)
    dispatcher.raise_pending()  # nothing was raised


@pytest.mark.parametrize("event", ALL_EVENTS, ids=lambda e: type(e).__name__)
def test_events_are_frozen_and_carry_membership_fields(event: MembershipEvent) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.group_id = "other"  # type: ignore[misc]
    assert (event.group_id, event.instance_id, event.member_id, event.generation) == (
        "g",
        "app-0",
        "m-1",
        None,
    )
    assert event.at <= time.time()  # stamped when it happened (these were made at collection)


def test_an_event_is_stamped_with_the_wall_clock_when_made() -> None:
    before = time.time()
    event = Lost(group_id="g", instance_id="app-0", member_id="m-1", partitions=())
    assert before <= event.at <= time.time()


def test_a_listener_can_take_every_event_in_one_method() -> None:
    class Everything(MembershipListener):
        def __init__(self) -> None:
            self.got: list[MembershipEvent] = []

        def on_event(self, event: MembershipEvent) -> None:
            self.got.append(event)

    everything = Everything()
    dispatcher = Dispatcher([everything])
    for event in ALL_EVENTS:
        dispatcher.emit(event)
    assert everything.got == ALL_EVENTS


def test_every_event_names_a_method_of_the_listener() -> None:
    import static_consumer._core.events as events

    kinds = [c for c in vars(events).values() if isinstance(c, type) and issubclass(c, MembershipEvent)]
    concrete = [c for c in kinds if c is not MembershipEvent]
    assert len(concrete) >= 11
    for kind in concrete:
        assert callable(getattr(MembershipListener, kind.hook, None)), kind.__name__


def test_listener_exception_is_kept_until_raise_pending_and_others_still_run() -> None:
    class Boom(MembershipListener):
        def on_lost(self, event: Lost) -> None:
            raise ValueError("first")

    class Bang(MembershipListener):
        def on_lost(self, event: Lost) -> None:
            raise KeyError("second")

    recorder = Recorder()
    dispatcher = Dispatcher([Boom(), recorder, Bang()])
    dispatcher.emit(Lost(**FIELDS, partitions=PARTS))  # does not raise inside the (client) callback
    assert [name for name, _ in recorder.got] == ["on_lost"]
    with pytest.raises(ValueError, match="first") as info:
        dispatcher.raise_pending()
    assert any("second" in note for note in info.value.__notes__)
    dispatcher.raise_pending()  # cleared


def test_events_compare_by_value() -> None:
    a = Closed(**FIELDS, left_group=True, at=1.0)
    assert a == Closed(**FIELDS, left_group=True, at=1.0)
    assert a != Closed(**FIELDS, left_group=False, at=1.0)
