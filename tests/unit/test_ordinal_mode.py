"""assignment_mode='ordinal' on the fake adapter: the slice, start offsets, no join, growth, errors."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from fakes import MODERN, OLD, TRANSPORT_ERROR, UNKNOWN_MEMBER, FakeAdapter, Recorder, Step, rec, tp

from assignors import ordinal_plan_all
from static_consumer._base.errors import (
    AuthorizationError,
    CommitFailedError,
    ConfigurationError,
    RetriableError,
)
from static_consumer._base.records import TopicPartition
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.events import Assigned, Closed, Revoked
from static_consumer._core.seam import PollError
from static_consumer._core.seams import Seams
from static_consumer.settings import ConsumerSettings


def settings(**overrides: Any) -> ConsumerSettings:
    values: dict[str, Any] = {
        "bootstrap_servers": "127.0.0.1:9092",
        "group_id": "g",
        "topics": ("t",),
        "assignment_mode": "ordinal",
        "replicas": 3,
    }
    values.update(overrides)
    return ConsumerSettings(**values)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Factory:
    """One FakeAdapter per call, seeded with topic metadata and the group's committed offsets."""

    def __init__(
        self,
        counts: dict[str, int | None],
        stored: dict[TopicPartition, int] | None = None,
        script: Iterable[Step] = (),
    ) -> None:
        self.counts, self.stored, self.script = counts, stored or {}, list(script)
        self.adapters: list[FakeAdapter] = []

    def __call__(self, config: dict[str, Any]) -> FakeAdapter:
        adapter = FakeAdapter(
            dict(config), deque(self.script), partition_count=self.counts, stored=dict(self.stored)
        )
        self.adapters.append(adapter)
        return adapter

    @property
    def last(self) -> FakeAdapter:
        return self.adapters[-1]


def ordinal_consumer(
    pod: str,
    factory: Factory,
    *,
    clock: Callable[[], float] | None = None,
    probe: Any = MODERN,
    **overrides: Any,
) -> tuple[StaticConsumer, Recorder]:
    recorder = Recorder()
    c = StaticConsumer(
        settings(**overrides),
        listeners=[recorder],
        env={"POD_NAME": pod},
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: probe, clock=clock or Clock()),
    )
    return c, recorder


# -- the slice -----------------------------------------------------------------------------------------


def test_three_pods_cover_every_partition_exactly_once_without_joining() -> None:
    counts: dict[str, int | None] = {"a": 7, "b": 2}
    slices: dict[int, frozenset[TopicPartition]] = {}
    for ordinal in range(3):
        factory = Factory(counts)
        c, recorder = ordinal_consumer(f"app-{ordinal}", factory, topics=("a", "b"))
        with c:
            adapter = factory.last
            assert not any(call.startswith("subscribe") for call in adapter.calls)
            assert adapter.calls[:2] == ["metadata", "assign"]
            slices[ordinal] = c.assignment
            assert set(adapter.starts[0]) == c.assignment
            [event] = recorder.of(Assigned)
            assert frozenset(event.partitions) == c.assignment
            assert list(event.partitions) == sorted(event.partitions)
    every = [tp for s in slices.values() for tp in s]
    assert sorted(every) == [tp(p, "a") for p in range(7)] + [tp(p, "b") for p in range(2)]
    # The same plan the pure planner gives for the whole StatefulSet.
    plan = ordinal_plan_all(3, {"a": 7, "b": 2})
    assert {k: sorted(v) for k, v in slices.items()} == {
        k: sorted(TopicPartition(p.topic, p.partition) for p in v) for k, v in plan.items()
    }


def test_no_group_instance_id_is_sent_and_the_consumer_is_not_static() -> None:
    factory = Factory({"t": 3})
    c, _ = ordinal_consumer("app-1", factory, instance_id_template="{statefulset}-{ordinal}")
    with c:
        config = factory.last.config
        assert "group.instance.id" not in config
        assert config["group.id"] == "g"
        assert not c.static and c.instance_id is None
        assert c.plan is not None and c.plan.identity is not None and c.plan.identity.ordinal == 1


def test_old_broker_without_static_membership_is_fine_under_policy_require() -> None:
    factory = Factory({"t": 3})
    c, _ = ordinal_consumer("app-0", factory, probe=OLD, static_policy="require")
    with c:
        assert c.state is State.RUNNING and c.assignment


def test_starts_from_committed_offsets_and_leaves_the_rest_to_auto_offset_reset() -> None:
    factory = Factory({"t": 3}, stored={tp(0): 42, tp(2): 7})
    c, _ = ordinal_consumer("app-0", factory, replicas=1)
    with c:
        assert factory.last.starts[0] == {tp(0): 42, tp(1): None, tp(2): 7}


def test_processed_offsets_are_committed_under_the_group_and_on_close() -> None:
    factory = Factory({"t": 1}, script=[rec(0, 5), rec(0, 6), None])
    c, recorder = ordinal_consumer("app-0", factory, replicas=1)
    c.start()
    first = c.poll(0.1)
    assert first is not None
    assert c.commit(first) == {tp(0): 6}
    second = c.poll(0.1)
    assert second is not None
    c.mark_processed(second)
    c.close()
    assert factory.last.commits == [{tp(0): 6}, {tp(0): 7}]
    [closed] = recorder.of(Closed)
    assert closed.left_group is False  # never a member, and nobody takes the partitions over


def test_leave_group_only_closes() -> None:
    factory = Factory({"t": 1})
    c, _ = ordinal_consumer("app-0", factory, replicas=1)
    c.start()
    assert c.leave_group() is False
    assert "unsubscribe" not in factory.last.calls and factory.last.calls[-1] == "close"


def test_a_pod_beyond_the_partition_count_owns_nothing_but_runs() -> None:
    [idle] = [k for k, parts in ordinal_plan_all(3, {"t": 2}).items() if not parts]
    factory = Factory({"t": 2})
    c, recorder = ordinal_consumer(f"app-{idle}", factory)
    with c:
        assert c.assignment == frozenset()
        [event] = recorder.of(Assigned)
        assert event.partitions == ()


# -- configuration errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "overrides", "message"),
    [
        ({"POD_NAME": "app-3"}, {}, "ordinal 3, but replicas=3"),
        ({"POD_NAME": "app-0"}, {"topics": ()}, "topics is empty"),
        ({}, {"instance_id": "fixed"}, "needs a StatefulSet pod name"),
        ({"POD_NAME": "web"}, {"allow_unstable_instance_id": True}, "needs a StatefulSet pod name"),
        # librdkafka takes "1.5" (as 1); "soon" is refused when the settings are built (test_bad_input.py)
        ({"POD_NAME": "app-0"}, {"librdkafka": {"topic.metadata.refresh.interval.ms": "1.5"}}, "integer"),
    ],
)
def test_configuration_errors_say_what_to_change(
    env: dict[str, str], overrides: dict[str, Any], message: str
) -> None:
    factory = Factory({"t": 3})
    c = StaticConsumer(
        settings(**overrides), env=env, seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN)
    )
    with pytest.raises(ConfigurationError, match=message):
        c.start()
    assert c.state is State.NEW
    assert all(a.calls[-1] == "close" for a in factory.adapters), "a failed start left a client open"


def test_regex_topics_and_missing_replicas_are_refused_by_the_settings() -> None:
    with pytest.raises(ConfigurationError, match="regex"):
        settings(topics=("^orders-.*",))
    with pytest.raises(ConfigurationError, match="needs replicas"):
        settings(replicas=None)


def _failing_start(failures: list[PollError], clock: Clock) -> tuple[StaticConsumer, Factory, list[float]]:
    factory = Factory({"t": 3})
    slept: list[float] = []

    def make(config: dict[str, Any]) -> FakeAdapter:
        adapter = factory(config)
        adapter.metadata_failures.extend(failures)
        return adapter

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    c = StaticConsumer(
        settings(connect_timeout_s=10.0),
        env={"POD_NAME": "app-0"},
        seams=Seams(adapter_factory=make, probe=lambda s, **_: MODERN, sleep=sleep, clock=clock),
    )
    return c, factory, slept


def test_a_transient_metadata_error_at_start_is_retried() -> None:
    # A new cluster answers NOT_COORDINATOR / connection errors for a moment.
    c, factory, slept = _failing_start([TRANSPORT_ERROR, TRANSPORT_ERROR], Clock())
    with c:
        assert c.assignment and len(slept) == 2
        assert factory.last.calls.count("metadata") == 3


def test_metadata_unreadable_for_connect_timeout_is_retriable_and_closes_the_client() -> None:
    clock = Clock()
    c, factory, slept = _failing_start([TRANSPORT_ERROR] * 1000, clock)
    began = clock.now
    with pytest.raises(RetriableError, match="partition counts"):
        c.start()
    assert clock.now - began <= 10.0 and slept
    assert factory.last.calls[-1] == "close"
    assert c.state is State.NEW


def test_a_refused_metadata_read_is_fatal_at_once() -> None:
    denied = PollError(29, "TOPIC_AUTHORIZATION_FAILED", "Broker: Topic authorization failed", False, False)
    c, factory, slept = _failing_start([denied], Clock())
    with pytest.raises(AuthorizationError, match="TOPIC_AUTHORIZATION_FAILED.*grant DESCRIBE on Topic 't'"):
        c.start()
    assert slept == [] and factory.last.calls[-1] == "close"


def test_commit_refused_because_the_group_has_members_names_the_cause() -> None:
    factory = Factory({"t": 1}, script=[rec(0, 0)])
    c, _ = ordinal_consumer("app-0", factory, replicas=1)
    with c:
        record = c.poll(0.1)
        assert record is not None
        factory.last.commit_failures.append(UNKNOWN_MEMBER)
        with pytest.raises(CommitFailedError, match="group id of their own"):
            c.commit(record)


# -- partition counts changing ---------------------------------------------------------------------------


def _refresh_settings(ms: int) -> dict[str, Any]:
    return {"librdkafka": {"topic.metadata.refresh.interval.ms": ms}}


def test_added_partitions_are_picked_up_after_the_refresh_interval(caplog: pytest.LogCaptureFixture) -> None:
    counts: dict[str, int | None] = {"t": 2}
    clock = Clock()
    factory = Factory(counts, stored={tp(5): 11})
    c, recorder = ordinal_consumer("app-0", factory, clock=clock, replicas=2, **_refresh_settings(10_000))
    with c:
        before = c.assignment
        counts["t"] = 6
        clock.now += 9.0
        c.poll(0.0)
        assert c.assignment == before, "re-planned before the refresh interval"
        clock.now += 1.0
        with caplog.at_level(logging.WARNING, "static_consumer._core.consumer"):
            c.poll(0.0)
        expected = {TopicPartition(p.topic, p.partition) for p in ordinal_plan_all(2, {"t": 6})[0]}
        assert c.assignment == expected
        assert "partition counts changed" in caplog.text
        added = expected - before
        assert factory.last.starts[-1] == {p: (11 if p == tp(5) else None) for p in added}
        assert frozenset(recorder.of(Assigned)[-1].partitions) == added
        assert factory.last.owned == expected


def test_partitions_moving_away_are_committed_then_unassigned() -> None:
    counts: dict[str, int | None] = {"t": 3}
    clock = Clock()
    factory = Factory(counts, script=[rec(p, 9) for p in range(3)])
    c, recorder = ordinal_consumer("app-1", factory, clock=clock, replicas=2, **_refresh_settings(1000))
    with c:
        old = c.assignment
        new = {TopicPartition(p.topic, p.partition) for p in ordinal_plan_all(2, {"t": 4})[1]}
        moving = old - new
        assert moving, "the example needs a partition that moves when t grows to 4 partitions"
        for _ in range(3):
            record = c.poll(0.0)
            if record is not None:
                c.mark_processed(record)
        counts["t"] = 4
        clock.now += 1.0
        c.poll(0.0)
        adapter = factory.last
        revoked = recorder.of(Revoked)
        assert [frozenset(r.partitions) for r in revoked] == [moving]
        # Committed while still owned, then unassigned.
        assert {p: 10 for p in moving}.items() <= adapter.commits[-1].items()
        assert adapter.calls.index("incremental_unassign") > adapter.calls.index("commit")
        assert c.assignment == new and adapter.owned == new


def test_a_failed_refresh_keeps_the_assignment_and_retries_later() -> None:
    counts: dict[str, int | None] = {"t": 2}
    clock = Clock()
    factory = Factory(counts)
    c, _ = ordinal_consumer("app-0", factory, clock=clock, replicas=1, **_refresh_settings(1000))
    with c:
        counts["t"] = 3
        factory.last.metadata_failures.append(TRANSPORT_ERROR)
        clock.now += 1.0
        assert c.poll(0.0) is None
        assert c.assignment == {tp(0), tp(1)}
        clock.now += 1.0
        c.poll(0.0)
        assert c.assignment == {tp(0), tp(1), tp(2)}


def test_a_missing_topic_is_planned_once_it_exists() -> None:
    counts: dict[str, int | None] = {"t": 1, "later": None}
    clock = Clock()
    factory = Factory(counts)
    c, _ = ordinal_consumer(
        "app-0", factory, clock=clock, replicas=1, topics=("t", "later"), **_refresh_settings(1000)
    )
    with c:
        assert c.assignment == {tp(0)}
        counts["later"] = 2
        clock.now += 1.0
        c.poll(0.0)
        assert c.assignment == {tp(0), tp(0, "later"), tp(1, "later")}


def test_refresh_interval_minus_one_turns_the_check_off() -> None:
    counts: dict[str, int | None] = {"t": 1}
    clock = Clock()
    factory = Factory(counts)
    c, _ = ordinal_consumer("app-0", factory, clock=clock, replicas=1, **_refresh_settings(-1))
    with c:
        counts["t"] = 4
        clock.now += 1e6
        c.poll(0.0)
        assert c.assignment == {tp(0)}
        assert factory.last.calls.count("metadata") == 1
