"""Commits that do not wait for the broker (``_core/ownership.py``), on the fake adapter with its commits
held in flight: at most one in flight, what is asked for meanwhile goes when it ended, failures come back
from the next call, and everything that commits synchronously waits for the one in flight first.

The real client's side (a thread of its own committing one at a time) is ``test_committer_thread``
below; the promises on a real broker are in integration/test_commits.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import pytest
from fakes import FENCED, TRANSPORT_ERROR, Assign, FakeClock, Lose, Revoke, rec, tp
from test_consumer_unit import consumer

from static_consumer._core.confluent import _Committer
from static_consumer._core.seam import AdapterError, PollError
from static_consumer.consumer import State
from static_consumer.errors import CommitFailedError, FencedInstanceError, RetriableError
from static_consumer.events import Fenced
from static_consumer.types import TopicPartition

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


def test_a_failed_commit_is_raised_by_the_next_commit_and_its_offsets_go_with_a_later_one() -> None:
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
        assert adapter.begun == [{tp(0): 2}]  # nothing sent with the failure
        assert c.commit(c.consume(1, 0.1)) == {tp(0): 4}  # the next commit carries everything processed
        adapter.end_commit()
    assert adapter.commits == [{tp(0): 4}]


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


def test_a_revoke_waits_for_the_commit_in_flight_before_it_commits_the_revoked_partitions() -> None:
    c, factory, _ = consumer([Assign((tp(0), tp(1))), rec(0, 1), rec(1, 1), Revoke((tp(0), tp(1))), None])
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        batch = c.consume(2, 0.1)
        c.commit(batch[:1])
        c.mark_processed(batch[1])  # processed, not committed yet: the revoke commits it
        c.consume(1, 0.1)  # runs the revoke
        assert adapter.commits == [{tp(0): 2}, {tp(1): 2}]  # the one in flight ended first
        assert c.assignment == frozenset()


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


def test_close_waits_for_the_commit_in_flight_and_commits_everything_processed() -> None:
    c, factory, recorder = consumer([Assign((tp(0), tp(1))), rec(0, 1), rec(1, 1), rec(0, 2)])
    c.start()
    adapter = factory.last
    adapter.hold_commits = True
    c.commit(c.consume(2, 0.1))
    c.commit(c.consume(1, 0.1))  # owed
    c.close()
    assert adapter.commits == [{tp(0): 2, tp(1): 2}, {tp(0): 3}]


def test_a_synchronous_commit_waits_for_the_one_in_flight_and_for_its_own_answer() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1), rec(0, 2)])
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        c.commit(c.consume(1, 0.1))
        assert c.commit(c.consume(1, 0.1), asynchronous=False) == {tp(0): 3}
        assert adapter.commits == [{tp(0): 2}, {tp(0): 3}]
        adapter.commit_failures.append(REBALANCING)
        c.mark_processed(rec(0, 3))
        with pytest.raises(CommitFailedError):
            c.commit(asynchronous=False)


def test_explicit_offsets_are_sent_as_given_after_the_commit_in_flight() -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 7)])
    with c:
        adapter = factory.last
        adapter.hold_commits = True
        c.commit(c.consume(1, 0.1))
        assert c.commit({tp(0): 3}) == {tp(0): 3}  # lower on purpose (a rewind): it goes after 8
        adapter.end_commit()
        assert adapter.commits == [{tp(0): 8}, {tp(0): 3}]


def test_a_commit_that_never_ends_keeps_the_synchronous_ones_from_overtaking_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c, factory, _ = consumer([Assign((tp(0),)), rec(0, 1), rec(0, 2)], settings=None, clock=time.monotonic)
    c.start()
    adapter = factory.last
    adapter.hold_commits = adapter.stuck_commits = True
    c.commit(c.consume(1, 0.1))
    with pytest.raises(RetriableError, match="has not ended"):
        c.commit(c.consume(1, 0.1), asynchronous=False)
    c.close(timeout_s=0.01)
    assert adapter.commits == []  # close did not commit past the stuck one
    assert "not committing processed offsets on close" in caplog.text


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


# -- the real client's committer: a thread of its own, one commit at a time --------------------------------


def test_committer_thread_commits_off_the_calling_thread_and_reports_each_result_once() -> None:
    release = threading.Event()
    seen: list[tuple[str, Mapping[TopicPartition, int]]] = []

    def commit(offsets: Mapping[TopicPartition, int]) -> None:
        release.wait(5)
        seen.append((threading.current_thread().name, offsets))
        if offsets.get(tp(0)) == 3:
            raise AdapterError(REBALANCING)

    committer = _Committer(commit)
    try:
        committer.begin({tp(0): 2})
        assert committer.result(0.0) is None  # under way
        assert committer.result(0.05) is None  # still under way after a bounded wait
        release.set()
        done = committer.result(5.0)
        assert done is not None and done.offsets == {tp(0): 2} and done.error is None
        assert committer.result(0.0) is None  # read once
        committer.begin({tp(0): 3})
        failed = committer.result(5.0)
        assert failed is not None and failed.error == REBALANCING
    finally:
        committer.stop()
    assert [name for name, _ in seen] == ["static-consumer-commit"] * 2
