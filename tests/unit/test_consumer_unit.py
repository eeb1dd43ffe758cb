"""StaticConsumer on the fake adapter: gate, fencing, commits, close/leave, listeners (the KIP-848 wait for a
held instance id: test_rejoin.py)."""

from __future__ import annotations

import gc
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from fakes import (
    FENCED,
    MAX_POLL,
    MODERN,
    OLD,
    TRANSPORT_ERROR,
    UNRELEASED,
    Assign,
    CommitEnds,
    FakeFactory,
    Lose,
    OutOfBand,
    Recorder,
    Revoke,
    Step,
    rec,
    tp,
)

from static_consumer._base.errors import (
    EXIT_FENCED,
    CommitFailedError,
    ConsumerClosedError,
    FatalConsumerError,
    FencedInstanceError,
    InvalidInstanceIdError,
    RetriableError,
    StaticMembershipUnsupportedError,
)
from static_consumer._base.records import RecordBatch
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.events import (
    Assigned,
    Closed,
    FatalError,
    Fenced,
    Lost,
    MembershipListener,
    Revoked,
)
from static_consumer._core.seam import PollError
from static_consumer._core.seams import Seams
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer.settings import ConsumerSettings

POD_ENV = {"POD_NAME": "orders-2"}


def make_settings(**overrides: Any) -> ConsumerSettings:
    values: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "g", "topics": ("t",)}
    values.update(overrides)
    return ConsumerSettings(**values)


class Removals:
    """Stands in for the admin removal of a static member; records the instance ids."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def __call__(self, settings: ConsumerSettings, instance_id: str) -> bool:
        self.ids.append(instance_id)
        return True


def consumer(
    *scripts: Sequence[Step], settings: ConsumerSettings | None = None, **kw: Any
) -> tuple[StaticConsumer, FakeFactory, Recorder]:
    factory = FakeFactory(*scripts)
    recorder = Recorder()
    env = kw.pop("env", POD_ENV)
    kw.setdefault("probe", lambda s, **_: MODERN)
    c = StaticConsumer(
        settings or make_settings(), listeners=[recorder], env=env, seams=Seams(adapter_factory=factory, **kw)
    )
    return c, factory, recorder


# -- start: identity and capability gate ---------------------------------------------------------------


def test_static_member_uses_instance_id_from_pod_name() -> None:
    c, factory, _ = consumer([])
    with c:
        assert factory.last.config["group.instance.id"] == "orders-2"
        assert c.static and c.instance_id == "orders-2"
        assert factory.last.calls[0] == "subscribe t"


def test_gate_runs_before_the_client_subscribes() -> None:
    probed: list[list[str]] = []

    def probe(settings: ConsumerSettings, **_: object) -> BrokerCapabilities:
        probed.append(list(factory.last.calls))  # the client is built while the gate runs
        return OLD

    c, factory, _ = consumer([], probe=probe)
    with pytest.raises(StaticMembershipUnsupportedError):
        c.start()
    assert probed == [[]]  # built, not subscribed, when the gate asked the broker
    [early] = factory.adapters
    assert early.calls == ["close"]  # never subscribed: nothing joined the group; closed


def test_the_client_built_while_the_gate_runs_is_the_one_that_joins_when_the_plan_agrees() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1)])
    with c:
        assert len(factory.adapters) == 1 and factory.last.calls[0] == "subscribe t"
    warn, warn_factory, _ = consumer(
        [],
        [],
        settings=make_settings(static_policy="warn", session_timeout_ms=10000),
        probe=lambda s, **_: OLD,
    )
    with warn:  # the gate decided dynamic: the early (static) client is closed, another one joins
        early, joined = warn_factory.adapters
        assert early.calls == ["close"] and "group.instance.id" in early.config
        assert "group.instance.id" not in joined.config and joined.calls[0] == "subscribe t"


def test_policy_warn_falls_back_to_dynamic_member(caplog: pytest.LogCaptureFixture) -> None:
    c, factory, _ = consumer(
        [], settings=make_settings(static_policy="warn", session_timeout_ms=10000), probe=lambda s, **_: OLD
    )
    with caplog.at_level(logging.WARNING), c:
        assert "group.instance.id" not in factory.last.config
        assert not c.static
    assert any("dynamic member" in r.getMessage() for r in caplog.records)


def test_dynamic_policy_needs_no_pod_name() -> None:
    c, factory, _ = consumer([], settings=make_settings(static_policy="dynamic"), env={})
    with c:
        assert "group.instance.id" not in factory.last.config


def test_missing_identity_fails_before_probing() -> None:
    probed: list[ConsumerSettings] = []

    def probe(settings: ConsumerSettings, **_: object) -> BrokerCapabilities:
        probed.append(settings)
        return MODERN

    c, factory, _ = consumer([], env={}, probe=probe)
    with pytest.raises(InvalidInstanceIdError):
        c.start()
    assert probed == [] and factory.adapters == []


def test_env_is_read_once_at_construction() -> None:
    env = dict(POD_ENV)
    c, factory, _ = consumer([], env=env)
    env["POD_NAME"] = "orders-7"
    with c:
        assert factory.last.config["group.instance.id"] == "orders-2"


# -- polling and events --------------------------------------------------------------------------------


def test_poll_returns_records_and_fires_assigned() -> None:
    c, _, recorder = consumer([Assign((tp(0), tp(1))), rec(0, 5), rec(1, 7)])
    with c:
        assert c.poll(0.1) == rec(0, 5)
        assert c.poll(0.1) == rec(1, 7)
        assert c.assignment == frozenset({tp(0), tp(1)})
        (event,) = recorder.of(Assigned)
        assert event.partitions == (tp(0), tp(1))
        assert (event.group_id, event.instance_id, event.member_id) == ("g", "orders-2", "member-1")


def test_non_fatal_errors_are_logged_rate_limited_and_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    timed_out = PollError(7, "REQUEST_TIMED_OUT", "Broker: Request timed out", fatal=False, retriable=True)
    c, _, _ = consumer([timed_out, timed_out, OutOfBand(timed_out), rec(0, 1)])
    with caplog.at_level(logging.WARNING, logger="static_consumer"), c:
        results = [c.poll(0.1) for _ in range(4)]
    assert results == [None, None, None, rec(0, 1)]
    assert sum("REQUEST_TIMED_OUT" in r.getMessage() for r in caplog.records) == 1


def test_a_failed_broker_connection_is_left_to_the_connection_log(caplog: pytest.LogCaptureFixture) -> None:
    """librdkafka reports a failed connection twice, as an error and as a log line; the log line is what
    static_consumer.connections tells (the first at WARNING, then summaries), so the error is at DEBUG."""
    c, _, _ = consumer([TRANSPORT_ERROR, OutOfBand(TRANSPORT_ERROR), rec(0, 1)])
    with caplog.at_level(logging.DEBUG, logger="static_consumer"), c:
        results = [c.poll(0.1) for _ in range(3)]
    assert results == [None, None, rec(0, 1)]
    transport = [r.levelname for r in caplog.records if "_TRANSPORT" in r.getMessage()]
    assert transport == ["DEBUG", "DEBUG"]


def test_listener_exception_is_reraised_from_poll_and_record_not_lost() -> None:
    class Boom(MembershipListener):
        def on_assigned(self, event: Assigned) -> None:
            raise RuntimeError("listener failed")

    factory = FakeFactory([Assign((tp(0),)), rec(0, 3)])
    recorder = Recorder()
    c = StaticConsumer(
        make_settings(),
        listeners=[Boom(), recorder],
        env=POD_ENV,
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN),
    )
    with c:
        with pytest.raises(RuntimeError, match="listener failed"):
            c.poll(0.1)
        assert len(recorder.of(Assigned)) == 1  # the other listener still got the event
        assert c.poll(0.1) == rec(0, 3)  # the record polled alongside is handed out next


# -- fencing and fatal errors ----------------------------------------------------------------------------


def test_fencing_raises_fenced_and_never_commits_afterwards() -> None:
    c, factory, recorder = consumer([Assign((tp(0),)), rec(0, 10), FENCED])
    c.start()
    c.mark_processed(c.poll(0.1) or pytest.fail("no record"))
    with pytest.raises(FencedInstanceError) as info:
        c.poll(0.1)
    assert info.value.exit_code == EXIT_FENCED == 82
    assert "orders-2" in str(info.value)
    assert c.state is State.FENCED
    (fenced,) = recorder.of(Fenced)
    assert "fenced" in fenced.error
    with pytest.raises(FencedInstanceError):
        c.poll(0.1)
    with pytest.raises(FencedInstanceError):
        c.commit()
    c.close()
    assert factory.last.commits == []  # not even the processed offset
    assert "unsubscribe" not in factory.last.calls
    assert recorder.of(Closed)[0].left_group is False


def test_fencing_is_recognised_from_the_text_alone() -> None:
    # Another librdkafka version's wording: the adapter still finds the broker cause in the text.
    import confluent_kafka

    from static_consumer._core.confluent import poll_error

    text = "Fatal error: Broker: this static instance was fenced by a newer member"
    error = poll_error(confluent_kafka.KafkaError(confluent_kafka.KafkaError._FATAL, text))
    c, _, _ = consumer([error])
    with c, pytest.raises(FencedInstanceError):
        c.poll(0.1)


def test_other_fatal_error_raises_fatal_consumer_error() -> None:
    fatal = PollError(-150, "_FATAL", "Fatal error: something else", fatal=True, retriable=False)
    c, _, recorder = consumer([fatal])
    with c:
        with pytest.raises(FatalConsumerError) as info:
            c.poll(0.1)
        assert not isinstance(info.value, FencedInstanceError)
        assert len(recorder.of(FatalError)) == 1


def test_consume_drops_the_batch_when_fenced() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1), rec(0, 2), FENCED])
    with c:
        with pytest.raises(FencedInstanceError):
            c.consume(10, 0.1)
        with pytest.raises(FencedInstanceError):
            c.consume(10, 0.1)
    assert factory.last.commits == []


def test_fatal_commit_error_is_fencing_when_text_says_so() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1)])
    with c:
        record = c.poll(0.1)
        assert record is not None
        factory.last.commit_failures.append(FENCED)
        with pytest.raises(FencedInstanceError):
            c.commit(record)


def test_a_classic_fence_after_the_client_lost_its_own_session_rejoins_instead_of_dying() -> None:
    # librdkafka reset its member id (session lost locally) and a commit sent meanwhile was refused as
    # fenced by this process's own earlier member: no duplicate exists, so a new client rejoins.
    c, factory, recorder = consumer([Assign((tp(0),)), rec(0, 1)], [Assign((tp(0),)), rec(0, 1)])
    with c:
        record = c.poll(0.1)
        assert record is not None
        factory.last.member = None  # what memberid() returns after librdkafka's local session timeout
        factory.last.commit_failures.append(FENCED)
        with pytest.raises(CommitFailedError):
            c.commit(record)
        assert len(factory.adapters) == 2 and c.state is State.JOINING
        assert [e.partitions for e in recorder.of(Lost)] == [(tp(0),)]
        assert recorder.of(Fenced) == []
        assert c.poll(0.1) == rec(0, 1)  # redelivered by the new client, which joined again
        assert c.state is State.RUNNING
    assert factory.adapters[0].commits == []


@pytest.mark.parametrize("call", ["consume", "consume_batch"])
def test_one_lost_session_reported_by_the_commit_and_by_the_batch_rejoins_once(call: str) -> None:
    # librdkafka reports one fence twice in one call: the commit in flight's result (served during the
    # call) and the fatal error as an item of the batch. The first report replaced the client; the second
    # and the dead client's records must not be judged against the new one (a coordinator failover
    # longer than the session ended members with 82 that way, in a seeded chaos run).
    c, factory, _ = consumer(
        [Assign((tp(0),)), rec(0, 1), CommitEnds(), rec(0, 2), FENCED, rec(0, 3)],
        [Assign((tp(0),)), rec(0, 2), rec(0, 3)],
    )
    with c:
        first = c.consume(1, 0.1)
        assert first == [rec(0, 1)]
        factory.last.hold_commits = True
        c.commit(first)  # in flight
        factory.last.member = None  # librdkafka's own session timer fired: member id reset
        factory.last.commit_failures.append(FENCED)  # the commit in flight is refused as fenced
        got = getattr(c, call)(10, 0.1)  # serves that result; the batch carries the fence again
        assert list(got) == []  # nothing of the dead client's goes out
        assert c.state is State.JOINING and len(factory.adapters) == 2
        assert list(getattr(c, call)(10, 0.1)) == [rec(0, 2), rec(0, 3)]  # from the new client
        assert c.state is State.RUNNING
    assert factory.adapters[0].commits == []


def test_a_poll_whose_commit_result_replaced_the_client_returns_nothing_of_the_dead_one() -> None:
    c, factory, _ = consumer(
        [Assign((tp(0),)), rec(0, 1), CommitEnds(), rec(0, 2)], [Assign((tp(0),)), rec(0, 2)]
    )
    with c:
        record = c.poll(0.1)
        assert record == rec(0, 1)
        factory.last.hold_commits = True
        c.commit(record)
        factory.last.member = None
        factory.last.commit_failures.append(FENCED)
        assert c.poll(0.1) is None  # rec(0, 2) came from the replaced client
        assert len(factory.adapters) == 2
        assert c.poll(0.1) == rec(0, 2)


def test_the_same_fence_from_poll_rejoins_too_but_not_with_a_member_id_or_under_kip848() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), FENCED], [Assign((tp(0),)), rec(0, 3)])
    with c:
        factory.last.member = None
        assert c.poll(0.1) is None  # the fence was handled; the new client joins
        assert c.poll(0.1) == rec(0, 3)
    with_member, _, _ = consumer([Assign((tp(0),)), FENCED])
    with with_member, pytest.raises(FencedInstanceError):  # a member id: another process took the id
        with_member.poll(0.1)
    kip848, factory848, _ = consumer([Assign((tp(0),)), FENCED], settings=make_settings(protocol="consumer"))
    with kip848, pytest.raises(FencedInstanceError):
        factory848.last.member = None
        kip848.poll(0.1)


# -- losing partitions -----------------------------------------------------------------------------------


def test_max_poll_exceeded_then_lost_warns_and_does_not_commit(caplog: pytest.LogCaptureFixture) -> None:
    c, factory, recorder = consumer([Assign((tp(0),)), rec(0, 4), MAX_POLL, Lose((tp(0),)), Assign((tp(0),))])
    with caplog.at_level(logging.WARNING, logger="static_consumer"), c:
        c.mark_processed(c.poll(0.1) or pytest.fail("no record"))
        assert c.poll(0.1) is None
        assert c.poll(0.1) is None
        assert recorder.of(Lost)[0].partitions == (tp(0),)
        assert c.assignment == frozenset({tp(0)})  # reassigned after the rejoin
        assert c.commit() == {}  # the processed offset died with the lost assignment
    assert factory.last.commits == []
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "max_poll_interval_ms" in text and "lost t[0]" in text


# -- committing ------------------------------------------------------------------------------------------


def test_commit_record_commits_next_offset() -> None:
    c, factory, _ = consumer([Assign((tp(0), tp(1))), rec(0, 41), rec(1, 7)])
    with c:
        first, second = c.poll(0.1), c.poll(0.1)
        assert first is not None and second is not None
        assert c.commit(first) == {tp(0): 42}
        assert c.commit() == {}  # nothing new processed
        assert c.commit([second]) == {tp(1): 8}
        assert c.commit({tp(0): 100}) == {tp(0): 100}
    assert factory.last.commits == [{tp(0): 42}, {tp(1): 8}, {tp(0): 100}]


def test_commit_keeps_highest_processed_offset() -> None:
    c, factory, _ = consumer([Assign((tp(0),))])
    with c:
        c.poll(0.1)
        c.mark_processed(rec(0, 9))
        c.mark_processed(rec(0, 3))
        assert c.commit() == {tp(0): 10}


def test_processed_records_of_unassigned_partitions_are_ignored() -> None:
    c, factory, _ = consumer([Assign((tp(0),))])
    with c:
        c.poll(0.1)
        c.mark_processed(rec(5, 9))
        assert c.commit() == {}


def test_refused_commit_raises_commit_failed_error() -> None:
    rebalancing = PollError(27, "REBALANCE_IN_PROGRESS", "Broker: Group rebalance in progress", False, False)
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1)])
    with c:
        record = c.poll(0.1)
        factory.last.commit_failures.append(rebalancing)
        with pytest.raises(CommitFailedError) as info:
            c.commit(record)
        assert not info.value.retriable
        factory.last.commit_failures.append(TRANSPORT_ERROR)
        with pytest.raises(RetriableError) as retry:
            c.commit()
        assert retry.value.retriable
        assert c.commit() == {tp(0): 2}  # still pending, so the next commit sends it


def test_revoke_commits_processed_offsets_after_listeners() -> None:
    class Flusher(MembershipListener):
        def on_revoked(self, event: Revoked) -> None:
            c.mark_processed(rec(1, 20))  # e.g. a listener flushing a buffer before the commit

    factory = FakeFactory([Assign((tp(0), tp(1))), rec(0, 5), Revoke((tp(0), tp(1))), Assign((tp(1),))])
    c = StaticConsumer(
        make_settings(),
        listeners=[Flusher()],
        env=POD_ENV,
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN),
    )
    with c:
        c.mark_processed(c.poll(0.1) or pytest.fail("no record"))
        assert c.poll(0.1) is None
        assert factory.last.commits == [{tp(0): 6, tp(1): 21}]
        assert c.assignment == frozenset({tp(1)})
        assert c.commit() == {}  # revoked offsets are not committed again


# -- close and leave -------------------------------------------------------------------------------------


def test_close_commits_without_leaving_and_is_idempotent() -> None:
    c, factory, recorder = consumer([Assign((tp(0),)), rec(0, 8)])
    c.start()
    c.mark_processed(c.poll(0.1) or pytest.fail("no record"))
    c.close()
    c.close()
    adapter = factory.last
    assert adapter.commits == [{tp(0): 9}]
    assert "unsubscribe" not in adapter.calls
    assert adapter.calls.count("close") == 1
    (closed,) = recorder.of(Closed)
    assert closed.left_group is False and closed.member_id == "member-1"
    with pytest.raises(ConsumerClosedError):
        c.poll(0.1)


def test_close_runs_in_the_closing_state_and_commits_what_on_revoked_marks() -> None:
    """The revoke callback that close() runs sees CLOSING (not ready: the pod is going), and a record a
    listener marks processed there is still committed; the consumer is CLOSED afterwards."""
    seen: list[tuple[State, bool]] = []

    class Flusher(MembershipListener):
        def on_revoked(self, event: Revoked) -> None:
            seen.append((c.state, c.status().ready))
            c.mark_processed(rec(0, 11))

    factory = FakeFactory([Assign((tp(0),)), rec(0, 10)])
    c = StaticConsumer(
        make_settings(),
        listeners=[Flusher()],
        env=POD_ENV,
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN),
    )
    c.start()
    c.mark_processed(c.poll(0.1) or pytest.fail("no record"))
    assert (c.state, c.status().ready) == (State.RUNNING, True)
    c.close()
    assert seen == [(State.CLOSING, False)]
    assert factory.last.commits == [{tp(0): 11}, {tp(0): 12}]  # before close(), then in its revoke
    assert c.state is State.CLOSED


def test_leave_group_classic_unsubscribes_before_close() -> None:
    removed = Removals()
    c, factory, recorder = consumer([Assign((tp(0),)), rec(0, 2)], remove_member=removed)
    c.start()
    c.mark_processed(c.poll(0.1) or pytest.fail("no record"))
    assert c.leave_group() is True
    calls = factory.last.calls
    assert calls.index("commit") < calls.index("unsubscribe") < calls.index("close")
    assert calls[calls.index("unsubscribe") + 1] == "poll"  # the revoke is served before close()
    assert removed.ids == []
    assert recorder.of(Closed)[0].left_group is True


def test_leave_group_consumer_protocol_removes_member_by_instance_id() -> None:
    removed = Removals()
    c, factory, recorder = consumer(
        [Assign((tp(0),))],
        settings=make_settings(protocol="consumer"),
        remove_member=removed,
    )
    c.start()
    c.poll(0.1)
    assert c.leave_group() is True
    assert "unsubscribe" not in factory.last.calls
    assert removed.ids == ["orders-2"]
    assert recorder.of(Closed)[0].left_group is True


def test_leave_group_reports_failed_removal() -> None:
    def fail(settings: ConsumerSettings, instance_id: str) -> bool:
        raise RetriableError("coordinator not available")

    c, _, recorder = consumer([], settings=make_settings(protocol="consumer"), remove_member=fail)
    c.start()
    assert c.leave_group() is False
    assert recorder.of(Closed)[0].left_group is False


def test_fenced_member_never_removes_the_instance_id() -> None:
    removed = Removals()
    c, factory, _ = consumer(
        [FENCED],
        settings=make_settings(protocol="consumer"),
        remove_member=removed,
    )
    c.start()
    with pytest.raises(FencedInstanceError):
        c.poll(0.1)
    assert c.leave_group() is False
    assert removed.ids == []  # the id now belongs to the process that fenced us


def test_garbage_collected_without_close_warns() -> None:
    c, _, _ = consumer([])
    c.start()
    with pytest.warns(ResourceWarning, match="without close"):
        del c
        gc.collect()


def test_poll_before_start_raises() -> None:
    c, _, _ = consumer([])
    with pytest.raises(ConsumerClosedError, match="not started"):
        c.poll(0.1)


# -- iteration -------------------------------------------------------------------------------------------


def test_iteration_marks_a_record_processed_once_the_body_finished() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 0), rec(0, 1), rec(0, 2)])
    seen = []
    with c:
        for record in c:
            seen.append(record.offset)
            if record.offset == 1:
                c.stop()
        assert c.commit() == {tp(0): 2}  # offset 1 counted as processed when the loop resumed
    assert seen == [0, 1]


def test_break_does_not_mark_the_current_record() -> None:
    c, _, _ = consumer([Assign((tp(0),)), rec(0, 0), rec(0, 1)])
    with c:
        for record in c:
            if record.offset == 1:
                break
        assert c.commit() == {tp(0): 1}


# -- the adapter's reading of librdkafka errors (no broker needed) ----------------------------------------


@pytest.mark.parametrize(
    ("text", "cause"),
    [(FENCED.reason, 82), (UNRELEASED.reason, 111), ("Fatal error: Local: something else", None)],
)
def test_adapter_reads_the_broker_cause_of_a_fatal_error(text: str, cause: int | None) -> None:
    import confluent_kafka

    from static_consumer._core.confluent import poll_error

    # As observed on Kafka 4.3: fencing arrives with code _FATAL and fatal() False.
    error = poll_error(confluent_kafka.KafkaError(confluent_kafka.KafkaError._FATAL, text, fatal=False))
    assert error.fatal and error.code == -150 and error.cause == cause
    transient = poll_error(confluent_kafka.KafkaError(confluent_kafka.KafkaError._TRANSPORT, "down"))
    assert not transient.fatal and transient.cause is None


def test_a_commit_refused_with_fenced_instance_id_is_a_fatal_fence() -> None:
    # A commit that reaches the broker after the fence raises code 82 itself, with fatal() False.
    import confluent_kafka

    from static_consumer._core.confluent import poll_error

    error = poll_error(confluent_kafka.KafkaError(82, "Commit failed: Broker: Static consumer fenced"))
    assert error.fatal and error.cause == 82
    assert not poll_error(confluent_kafka.KafkaError(27, "rebalance in progress")).fatal


# -- record batches -------------------------------------------------------------------------------------


def test_consume_batch_hands_out_columns_and_commit_of_the_batch_commits_the_next_offsets() -> None:
    c, factory, _ = consumer([Assign((tp(0), tp(1))), rec(0, 5), rec(1, 7), rec(0, 6), None, rec(1, 8)])
    with c:
        batch = c.consume_batch(10, 0.1)
        assert isinstance(batch, RecordBatch)
        assert batch.records() == [rec(0, 5), rec(1, 7), rec(0, 6)]
        assert c.commit(batch) == {tp(0): 7, tp(1): 8}
        assert c.consume_batch(10, 0.1).records() == [rec(1, 8)]
    assert factory.last.commits[0] == {tp(0): 7, tp(1): 8}


def test_consume_batch_raises_fencing_and_commits_nothing() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1), rec(0, 2), FENCED])
    with c:
        with pytest.raises(FencedInstanceError):
            c.consume_batch(10, 0.1)
        with pytest.raises(FencedInstanceError):
            c.commit()
    assert factory.last.commits == []


def test_consume_batch_gives_the_records_back_after_a_listener_error() -> None:
    class Boom(MembershipListener):
        def on_assigned(self, event: Assigned) -> None:
            raise RuntimeError("listener failed")

    factory = FakeFactory([Assign((tp(0),)), rec(0, 3), rec(0, 4)])
    c = StaticConsumer(
        make_settings(),
        listeners=[Boom()],
        env=POD_ENV,
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN),
    )
    with c:
        with pytest.raises(RuntimeError, match="listener failed"):
            c.consume_batch(10, 0.1)
        assert c.consume_batch(10, 0.1).records() == [rec(0, 3), rec(0, 4)]


def test_status_says_what_the_consumer_is_doing_and_is_ready_only_when_running() -> None:
    c, _, _ = consumer([Assign((tp(1), tp(0))), rec(0, 0), None, FENCED])
    assert (c.status().state, c.status().ready) == (State.NEW, False)
    c.start()
    assert (c.status().state, c.status().ready) == (State.JOINING, False)
    c.consume(10, 0.0)
    status = c.status()
    assert (status.state, status.ready, status.assignment) == (State.RUNNING, True, (tp(0), tp(1)))
    assert (status.group_id, status.instance_id, status.member_id) == ("g", "orders-2", "member-1")
    c.stop()
    assert c.status().stopping
    with pytest.raises(FencedInstanceError):
        c.consume(10, 0.0)
    fenced = c.status()
    assert (fenced.state, fenced.ready) == (State.FENCED, False) and "fenced" in (fenced.error or "")
    c.close()
