"""Commits that do not wait for the broker (``_core/ownership.py``), on the fake adapter with its commits
held in flight: at most one in flight, what is asked for meanwhile goes once its result was read,
failures come back from the next call, ``commit()`` returns what it returned when every commit waited,
and everything that commits synchronously sends every processed offset on the calling thread: close,
``asynchronous=False`` and the stall check once the result of the one in flight was read (bounded), a
revoke (inside a rebalance callback, where nothing can serve that result) without waiting; the result
of a commit covered that way counts for nothing.

The real client's side (librdkafka's asynchronous commit, its result from on_commit) is
``test_confluent_adapter_*`` below; the promises on a real broker are in integration/test_commits.py."""

from __future__ import annotations

import confluent_kafka
import pytest
from fakes import (
    FENCED,
    MODERN,
    TRANSPORT_ERROR,
    Assign,
    CommitEnds,
    FakeClock,
    FakeFactory,
    Lose,
    Revoke,
    rec,
    tp,
)
from test_consumer_unit import POD_ENV, consumer, make_settings

from static_consumer._base.errors import CommitFailedError, FencedInstanceError, RetriableError
from static_consumer._core.confluent import ConfluentAdapter
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.events import CommitRefused, Fenced, MembershipListener
from static_consumer._core.seam import PollError
from static_consumer._core.seams import Seams

REBALANCING = PollError(27, "REBALANCE_IN_PROGRESS", "Broker: Group rebalance in progress", False, False)


def test_a_commit_asked_for_while_one_is_in_flight_goes_once_that_one_ended() -> None:
    c, factory, _ = consumer([Assign((tp(0), tp(1))), rec(0, 1), rec(1, 5), rec(0, 2), None, None])
    with c:
        factory.last.hold_commits = True
        first = c.consume(2, 0.1)
        assert c.commit(first) == {tp(0): 2, tp(1): 6}  # sent, not waited for
        assert factory.last.begun == [{tp(0): 2, tp(1): 6}] and factory.last.commits == []
        second = c.consume(1, 0.1)  # the first is still in flight: nothing else goes
        assert c.commit(second) == {tp(0): 3}  # owed: only what is new
        assert factory.last.begun == [{tp(0): 2, tp(1): 6}]
        factory.last.end_commit()
        assert c.consume(1, 0.1) == []  # the poll path reads the end and sends what is owed
        assert factory.last.commits == [{tp(0): 2, tp(1): 6}]
        assert factory.last.begun[1:] == [{tp(0): 3}]
        assert c.commit() == {}  # nothing new: the owed offsets are in flight
        factory.last.end_commit()
    assert factory.last.commits == [{tp(0): 2, tp(1): 6}, {tp(0): 3}]


def test_commit_returns_a_batchs_next_offsets_whether_or_not_a_commit_is_in_flight() -> None:
    # What commit(batch) returned when every commit waited: this batch's next offsets (and those of
    # records processed since the last commit), never offsets an earlier call returned and that are
    # still in flight or owed (integration/test_record_batches.py checks it on a real broker).
    script = [Assign((tp(0), tp(1))), rec(0, 1), rec(1, 5), None, rec(1, 6), None, rec(0, 2), None]
    script += [rec(1, 7), None, CommitEnds(), None]
    c, factory, _ = consumer(script)
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        assert c.commit(c.consume_batch(500, 0.1)) == {tp(0): 2, tp(1): 6}  # sent, in flight
        assert c.commit(c.consume_batch(500, 0.1)) == {tp(1): 7}  # owed
        assert c.commit(c.consume_batch(500, 0.1)) == {tp(0): 3}  # owed too; 7 is not this batch's
        assert adapter.begun == [{tp(0): 2, tp(1): 6}]
        # Synchronous, with one in flight: it sends everything processed, returns this batch's offsets.
        assert c.commit(c.consume(500, 0.1), asynchronous=False) == {tp(1): 8}
        assert adapter.commits == [{tp(0): 2, tp(1): 6}, {tp(0): 3, tp(1): 8}]
        assert c.commit() == {}
        c.mark_processed(rec(0, 3))
        assert c.commit() == {tp(0): 4}


def test_the_offsets_of_a_failed_commit_are_returned_again_by_the_commit_that_sends_them_again() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1), None, rec(0, 2), None])
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        assert c.commit(c.consume(500, 0.1)) == {tp(0): 2}
        adapter.commit_failures.append(TRANSPORT_ERROR)
        adapter.end_commit()
        assert c.consume(500, 0.1) == [rec(0, 2)]  # reads the failure
        with pytest.raises(RetriableError):  # raised after this call's offsets went
            c.commit()
        assert adapter.begun == [{tp(0): 2}, {tp(0): 2}]
        adapter.end_commit()
        assert c.commit(rec(0, 2)) == {tp(0): 3}


def test_a_synchronous_commit_waits_for_the_result_of_the_one_in_flight_before_it_is_sent() -> None:
    # librdkafka retries an OffsetCommit that met a retriable error: sent after the synchronous one, such
    # a retry could move the committed offset back. The wait drives the client, whose calls serve that
    # result; a record they return is handed out by the next call, and an owed commit is not sent apart.
    script = [Assign((tp(0),)), rec(0, 1), None, rec(0, 2), None, rec(0, 3), None, rec(0, 4), CommitEnds()]
    c, factory, _ = consumer(script)
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        c.commit(c.consume(500, 0.1))  # in flight
        c.commit(c.consume(500, 0.1))  # owed
        assert c.commit(c.consume(500, 0.1), asynchronous=False) == {tp(0): 4}
        assert adapter.calls[-3:] == ["consume", "commit", "commit"]  # the answer to {0: 2} came first
        assert adapter.commits == [{tp(0): 2}, {tp(0): 4}]
        assert adapter.begun == [{tp(0): 2}]
        served = c.consume(500, 0.1)
        assert served == [rec(0, 4)]  # served while waiting: not skipped
        assert c.commit(served) == {tp(0): 5}


def test_records_served_while_waiting_are_not_handed_out_once_their_partition_was_revoked() -> None:
    both = (tp(0), tp(1))
    script = [Assign(both), rec(0, 1), None, rec(0, 2), rec(1, 7), None, Revoke((tp(1),)), None, CommitEnds()]
    script += [None, rec(0, 3)]
    c, factory, _ = consumer(script)
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        c.commit(c.consume(500, 0.1))  # in flight
        assert c.commit(asynchronous=False) == {}  # nothing new: waits for the one in flight, sends nothing
        assert adapter.commits == [{tp(0): 2}]
        # tp(1)'s record, served before its revoke, is not handed out; tp(0)'s is, then the next one.
        assert c.consume(500, 0.1) == [rec(0, 2), rec(0, 3)]


def test_close_waits_for_the_result_of_the_commit_in_flight_before_its_last_commit() -> None:
    script = [Assign((tp(0),)), rec(0, 1), None, rec(0, 2), None, rec(0, 9), None, CommitEnds()]
    c, factory, _ = consumer(script)
    c.start()
    adapter = factory.last
    adapter.hold_commits = True
    c.commit(c.consume(500, 0.1))  # in flight
    c.commit(c.consume(500, 0.1))  # owed
    c.close()
    # Record 9, served while waiting, was never handed out: not committed (its next owner reads it).
    assert adapter.commits == [{tp(0): 2}, {tp(0): 3}]
    assert adapter.begun == [{tp(0): 2}]


def test_a_failed_commit_is_raised_by_the_next_commit_once_that_commit_sent_its_own_offsets() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1), rec(0, 2), rec(0, 3), None])
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        c.commit(c.consume(1, 0.1))
        adapter.commit_failures.append(TRANSPORT_ERROR)
        adapter.end_commit()
        batch = c.consume(1, 0.1)  # a non-fatal failure is not the poll path's to raise
        with pytest.raises(RetriableError, match=r"t\[0\]@2"):  # the failed commit's offsets, named
            c.commit(batch)
        assert adapter.begun == [{tp(0): 2}, {tp(0): 3}]  # this call's offsets went all the same
        assert c.commit(c.consume(1, 0.1)) == {tp(0): 4}  # owed, raised nothing more
        adapter.end_commit()
        assert c.consume(1, 0.1) == []  # reads it, sends what is owed
        adapter.end_commit()
    assert adapter.commits == [{tp(0): 3}, {tp(0): 4}]


def test_the_last_commit_before_a_quiet_spell_goes_out_even_when_it_raises_an_earlier_refusal() -> None:
    # A partition that receives nothing more: no later commit() would send its last offsets.
    refused: list[CommitRefused] = []

    class Refusals(MembershipListener):
        def on_commit_refused(self, event: CommitRefused) -> None:
            refused.append(event)

    factory = FakeFactory([Assign((tp(0),)), rec(0, 1), rec(0, 2), None, None])
    c = StaticConsumer(
        make_settings(),
        listeners=[Refusals()],
        env=POD_ENV,
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN),
    )
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        c.commit(c.consume(1, 0.1))
        adapter.commit_failures.append(REBALANCING)
        adapter.end_commit()
        last = c.consume(1, 0.1)  # the refusal is read here, and said at once
        assert [e.error for e in refused] == ["REBALANCE_IN_PROGRESS"]
        with pytest.raises(CommitFailedError):
            c.commit(last)
        adapter.end_commit()
        assert c.consume(1, 0.1) == [] and c.commit() == {}
    assert adapter.commits == [{tp(0): 3}]
    assert len(refused) == 1  # said once


def test_a_refused_commit_raises_commit_failed_error_from_the_next_commit() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1), rec(0, 2)])
    with c:
        factory.last.hold_commits = True
        c.commit(c.consume(1, 0.1))
        factory.last.commit_failures.append(REBALANCING)
        factory.last.end_commit()
        with pytest.raises(CommitFailedError, match="REBALANCE_IN_PROGRESS"):
            c.commit(c.consume(1, 0.1))


def test_a_fence_found_by_a_commit_in_flight_ends_the_next_consume_before_records_go_out() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1), rec(0, 2), rec(0, 3)])
    c.start()
    adapter = factory.last
    adapter.hold_commits = True
    c.commit(c.consume(1, 0.1))
    adapter.commit_failures.append(FENCED)
    adapter.end_commit()
    with pytest.raises(FencedInstanceError):
        c.consume(1, 0.1)
    assert c.state is State.FENCED
    with pytest.raises(FencedInstanceError):
        c.commit()
    c.close()
    assert adapter.commits == [] and len(adapter.begun) == 1  # nothing sent after the fence


def test_a_revoke_commits_everything_processed_at_once_and_the_commit_in_flight_counts_for_nothing() -> None:
    both = (tp(0), tp(1))
    script = [Assign(both), rec(0, 1), rec(1, 1), Revoke(both), None, Assign((tp(0),)), rec(0, 2)]
    c, factory, _ = consumer(script)
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        batch = c.consume(2, 0.1)
        c.commit(batch[:1])  # in flight: nothing serves its result inside the revoke callback
        c.mark_processed(batch[1])  # processed, not committed yet: the revoke commits it
        c.consume(1, 0.1)  # runs the revoke: no wait, a synchronous commit of both
        assert adapter.commits == [{tp(0): 2, tp(1): 2}]
        assert c.assignment == frozenset()
        again = c.consume(1, 0.1)
        c.commit(again)  # owed: nothing more goes while the first one's result was not read
        assert adapter.begun == [{tp(0): 2}]
        adapter.commit_failures.append(REBALANCING)
        adapter.end_commit()  # its result (a failure) counts for nothing: the revoke's commit covered it
        assert c.consume(1, 0.1) == []  # reads it and sends what is owed
        assert adapter.begun == [{tp(0): 2}, {tp(0): 3}]
        adapter.end_commit()
        assert c.commit() == {}


def test_a_commit_in_flight_when_its_partition_is_lost_does_not_count_for_it_once_assigned_again() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 10), Lose((tp(0),)), Assign((tp(0),)), rec(0, 5)])
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        c.commit(c.consume(1, 0.1))  # commits 11, in flight
        again = c.consume(1, 0.1)  # lost (nothing waits for the commit), assigned again from offset 5
        adapter.end_commit()  # the broker took 11 (or refused it): it no longer counts here
        assert [r.offset for r in again] == [5]
        c.mark_processed(rec(0, 10))  # processed up to 11 again: the late answer must not hide it
        assert c.commit(again) == {tp(0): 11}  # sent: the late answer did not mark 11 as committed
        adapter.end_commit()
    assert adapter.commits == [{tp(0): 11}, {tp(0): 11}]


def test_close_commits_everything_processed_even_when_the_commit_in_flight_never_ends() -> None:
    c, factory, _ = consumer([Assign((tp(0), tp(1))), rec(0, 1), rec(1, 1), rec(0, 2)])
    c.start()
    adapter = factory.last
    adapter.hold_commits = True
    c.commit(c.consume(2, 0.1))
    c.commit(c.consume(1, 0.1))  # owed
    c.close()
    assert adapter.commits == [{tp(0): 3, tp(1): 2}]  # the one in flight never ended: covered anyway


def test_a_synchronous_commit_covers_the_one_in_flight_and_waits_for_its_own_answer() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1), rec(0, 2), None])
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        c.commit(c.consume(1, 0.1))
        assert c.commit(c.consume(1, 0.1), asynchronous=False) == {tp(0): 3}
        assert adapter.commits == [{tp(0): 3}]
        adapter.commit_failures.append(TRANSPORT_ERROR)
        adapter.end_commit()  # the covered commit failed: not raised, its offsets are committed already
        assert c.consume(1, 0.1) == []
        assert c.commit() == {}
        adapter.commit_failures.append(REBALANCING)
        c.mark_processed(rec(0, 3))
        with pytest.raises(CommitFailedError):
            c.commit(asynchronous=False)


def test_explicit_offsets_while_a_commit_is_in_flight_are_sent_synchronously_as_given() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 7)])
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        c.commit(c.consume(1, 0.1))
        assert c.commit({tp(0): 3}) == {tp(0): 3}  # lower on purpose (a rewind): after 8, on one connection
        assert adapter.commits == [{tp(0): 3}] and adapter.begun == [{tp(0): 8}]


def test_a_commit_whose_result_never_comes_blocks_no_synchronous_commit_and_no_close() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1), rec(0, 2), rec(0, 3)])
    c.start()
    adapter = factory.last
    adapter.hold_commits = True
    c.commit(c.consume(1, 0.1))
    assert c.commit(c.consume(1, 0.1), asynchronous=False) == {tp(0): 3}
    c.commit(c.consume(1, 0.1))  # owed: still one in flight
    c.close()
    assert adapter.begun == [{tp(0): 2}]
    assert adapter.commits == [{tp(0): 3}, {tp(0): 4}]


def test_a_commit_after_a_stall_with_one_in_flight_does_not_serve_the_client_and_raises_its_refusal() -> None:
    # Serving the client first would report the loss (a Lose step here) and hide the refusal.
    clock = FakeClock()
    script = [Assign((tp(0),)), rec(0, 1), None, rec(0, 2), None, Lose((tp(0),)), CommitEnds()]
    c, factory, _ = consumer(script, clock=clock)
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        c.commit(c.consume(500, 0.1))  # in flight
        batch = c.consume(500, 0.1)
        clock.advance(30.0)  # a handler that blocked past the threshold
        calls = len(adapter.calls)
        adapter.commit_failures.append(REBALANCING)
        with pytest.raises(CommitFailedError):
            c.commit(batch)
        assert adapter.calls[calls:] == ["commit"]  # no consume: the loss is not served first


def test_a_commit_longer_than_the_stall_threshold_after_the_last_call_waits_for_the_broker() -> None:
    clock = FakeClock()
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1), rec(0, 2)], clock=clock)
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        c.commit(c.consume(1, 0.1))
        adapter.end_commit()
        batch = c.consume(1, 0.1)
        clock.advance(30.0)  # a handler that blocked far past the threshold (half the session at most)
        adapter.commit_failures.append(REBALANCING)
        with pytest.raises(CommitFailedError):  # the partitions may have moved: said by this commit
            c.commit(batch)
        assert adapter.begun == [{tp(0): 2}]  # not begun: committed synchronously, and refused


def test_a_commit_refused_as_fenced_by_the_clients_own_lost_session_is_refused_by_the_next_commit() -> None:
    c, factory, recorder = consumer([Assign((tp(0),)), rec(0, 1), None], [Assign((tp(0),)), rec(0, 1)])
    with c:
        first = factory.last
        first.hold_commits = True
        c.commit(c.consume(1, 0.1))
        first.member = None  # librdkafka's local session timeout reset the member id
        first.commit_failures.append(FENCED)
        first.end_commit()
        assert c.consume(1, 0.1) == []  # the poll path replaced the client instead of dying
        assert len(factory.adapters) == 2 and recorder.of(Fenced) == []
        with pytest.raises(CommitFailedError, match=r"t\[0\]@2"):
            c.commit()
        assert [r.offset for r in c.consume(1, 0.1)] == [1]  # redelivered by the new client


# -- the real client: librdkafka's asynchronous commit, its result from on_commit -------------------------


class _Commits:
    """Stands in for the client's commit only (no broker: a real one would wait for a coordinator)."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[tuple[str, int, int]], bool]] = []

    def commit(self, *, offsets: list[confluent_kafka.TopicPartition], asynchronous: bool) -> None:
        self.calls.append(([(p.topic, p.partition, p.offset) for p in offsets], asynchronous))


def test_confluent_adapter_commits_asynchronously_and_reads_the_result_from_on_commit_once() -> None:
    adapter = ConfluentAdapter({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "log_level": 0})
    client, commits = adapter._consumer, _Commits()
    adapter._consumer = commits  # type: ignore[assignment]
    try:
        adapter.begin_commit({tp(0): 2})
        assert commits.calls == [([("t", 0, 2)], True)]
        assert adapter.commit_result() is None  # under way: no poll served it yet
        adapter._on_commit(None, [confluent_kafka.TopicPartition("t", 0, 2)])  # as a poll serves it
        done = adapter.commit_result()
        assert done is not None and done.offsets == {tp(0): 2} and done.error is None
        assert adapter.commit_result() is None  # read once
        adapter._on_commit(None, [])  # no commit of ours in flight: ignored
        assert adapter.commit_result() is None
        adapter.begin_commit({tp(0): 3})
        adapter._on_commit(confluent_kafka.KafkaError(27), [confluent_kafka.TopicPartition("t", 0, 3)])
        failed = adapter.commit_result()
        assert failed is not None and failed.offsets == {tp(0): 3}
        assert failed.error is not None and failed.error.name == "REBALANCE_IN_PROGRESS"
    finally:
        client.close()
