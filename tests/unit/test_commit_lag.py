"""After one late answer, commits go back to leaving when their batch was handled (``_core/ownership.py``).

A commit that does not wait has its answer read by a later client call. A commit asked for while one is
unanswered is owed; when one answer comes a ``consume()`` late (a coordinator failover, a slow broker),
the owed commit must not go out right after the next ``consume()`` returned: the handler then runs with no
client call, the next ``commit()`` finds that one unread and owes again, and every later batch would be
committed one ``consume()`` late for as long as records keep coming. It goes with the next ``commit()``,
which sends everything processed."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from fakes import MODERN, Assign, FakeAdapter, Step, rec, tp
from test_consumer_unit import POD_ENV, make_settings

from static_consumer._base.records import Record, TopicPartition
from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.seam import PollError
from static_consumer._core.seams import Seams


class AnsweringAdapter(FakeAdapter):
    """The broker answers a commit while the next ``consume()`` waits (that call serves the answer), except
    for the next ``late`` calls: an answer that comes one ``consume()`` late."""

    late: int = 0

    def consume(self, max_records: int, timeout: float) -> list[Record | PollError]:
        if self._in_flight is not None:
            if self.late:
                self.late -= 1
            else:
                self.end_commit()
        return super().consume(max_records, timeout)


class Factory:
    def __init__(self, script: Iterable[Step]) -> None:
        self._script = deque(script)
        self.adapters: list[AnsweringAdapter] = []

    def __call__(self, config: dict[str, Any]) -> AnsweringAdapter:
        adapter = AnsweringAdapter(dict(config), self._script, hold_commits=True)
        self.adapters.append(adapter)
        return adapter


def consumer(factory: Factory) -> StaticConsumer:
    seams = Seams(adapter_factory=factory, probe=lambda s, **_: MODERN)
    return StaticConsumer(make_settings(), env=POD_ENV, seams=seams)


def test_after_one_answer_comes_a_consume_late_each_batch_is_committed_when_it_was_handled() -> None:
    batches = 12
    script: list[Step] = [Assign((tp(0),))]
    for offset in range(batches):
        script += [rec(0, offset), None]  # one record per consume()
    factory = Factory(script)
    sent_at_commit: list[bool] = []
    with consumer(factory) as c:
        adapter = factory.adapters[-1]
        for offset in range(batches):
            batch = c.consume(500, 0.1)
            assert [r.offset for r in batch] == [offset]
            c.commit(batch)
            # What the client was told to commit last covers the batch just handled: it went now.
            last: Mapping[TopicPartition, int] = adapter.begun[-1]
            sent_at_commit.append(last == {tp(0): offset + 1})
            if offset == 3:
                adapter.late = 1  # the answer to this commit is served one consume() later than usual
    # Before the late answer every batch went when handled; the one handled while it was missing (4) goes
    # with the next; from then on every batch goes when handled again, never one consume() late.
    assert sent_at_commit[:4] == [True] * 4
    assert sent_at_commit[5:] == [True] * (batches - 5), sent_at_commit
    assert adapter.commits[-1] == {tp(0): batches}  # close committed everything handled


def test_an_owed_commit_held_for_the_next_commit_goes_after_the_next_client_call_without_one() -> None:
    script: list[Step] = [Assign((tp(0),))]
    for offset in range(4):
        script += [rec(0, offset), None]
    factory = Factory(script)
    with consumer(factory) as c:
        adapter = factory.adapters[-1]
        c.commit(c.consume(500, 0.1))  # {0: 1} in flight
        adapter.late = 1
        c.commit(c.consume(500, 0.1))  # {0: 2} owed: the answer to {0: 1} is late
        third = c.consume(500, 0.1)  # serves that answer; records go out: the owed commit waits
        assert adapter.begun == [{tp(0): 1}] and [r.offset for r in third] == [2]
        c.mark_processed(third[0])  # processed, but the application does not commit this time
        c.consume(500, 0.1)  # no commit() came: the owed commit goes now, with everything processed
        assert adapter.begun == [{tp(0): 1}, {tp(0): 3}]
