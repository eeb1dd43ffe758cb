"""A consumer-protocol crash restart releases its own dead predecessor (``restart_state_dir``): the lock
and the recorded member ids on a temporary directory, the release seam a recording fake. What the broker
does with the release (the coordinator's member-id check, the partitions kept, a woken predecessor
fenced) is tested on a real broker in integration/test_crash_restart.py."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fakes import (
    MODERN,
    UNKNOWN_MEMBER,
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

from static_consumer._base.codes import FATAL
from static_consumer._base.errors import CommitFailedError, FatalConsumerError
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.predecessor import KEEP, RestartRecord
from static_consumer._core.seam import PollError
from static_consumer._core.seams import Seams
from static_consumer._core.shutdown import run_until_sigterm
from static_consumer.aio import AsyncStaticConsumer
from static_consumer.settings import ConsumerSettings

INSTANCE = "orders-2"
JOINED: list[Step] = [Assign((tp(0),)), rec(0, 3)]


class Numbered(FakeFactory):
    """Each client gets its own member id (``member-1``, ``member-2``, ...), as librdkafka generates one
    per client under the consumer protocol; what the record file held when each one subscribed is kept."""

    def __init__(self, record: RestartRecord, *scripts: list[Step]) -> None:
        super().__init__(*scripts)
        self.record = record
        self.at_subscribe: list[list[str]] = []

    def __call__(self, config: dict[str, Any]) -> FakeAdapter:
        adapter = super().__call__(config)
        adapter.member = f"member-{len(self.adapters)}"
        subscribe = adapter.subscribe

        def recorded_then_subscribe(*args: Any, **kwargs: Any) -> None:
            self.at_subscribe.append(self.record.member_ids())
            subscribe(*args, **kwargs)

        adapter.subscribe = recorded_then_subscribe  # type: ignore[method-assign]
        return adapter


class Releases:
    """The release seam: records each call and what had subscribed by then; answers ``answer``."""

    def __init__(self, factory: FakeFactory, answer: str | None | Exception = None) -> None:
        self.factory = factory
        self.answer = answer
        self.calls: list[tuple[str, list[str], int]] = []

    def __call__(self, settings: ConsumerSettings, instance_id: str, member_ids: Sequence[str]) -> str | None:
        subscribed = sum("subscribe" in a.calls for a in self.factory.adapters)
        self.calls.append((instance_id, list(member_ids), subscribed))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def make_settings(directory: Path, **overrides: Any) -> ConsumerSettings:
    values: dict[str, Any] = {
        "bootstrap_servers": "127.0.0.1:9092",
        "group_id": "g",
        "topics": ("t",),
        "protocol": "consumer",
        "restart_state_dir": str(directory),
    }
    return ConsumerSettings(**{**values, **overrides})


class Pod:
    """A consumer of pod ``orders-2`` with its record in ``directory``."""

    def __init__(
        self,
        directory: Path,
        *scripts: list[Step],
        answer: str | None | Exception = None,
        time: FakeTime | None = None,
        watch: FakeGroupWatch | None = None,
        **overrides: Any,
    ) -> None:
        self.record = RestartRecord(directory, "g", INSTANCE)
        self.factory = Numbered(self.record, *(scripts or (JOINED,)))
        self.releases = Releases(self.factory, answer)
        self.time = time or FakeTime()
        self.consumer = StaticConsumer(
            make_settings(directory, **overrides),
            env={"POD_NAME": INSTANCE},
            seams=Seams(
                adapter_factory=self.factory,
                probe=lambda s, **_: MODERN,
                release_member=self.releases,
                group_watch=watch or FakeGroupWatch(self.time.clock, lambda now: group_look()),
                sleep=self.time.sleep,
                clock=self.time.clock,
            ),
        )


def recorded(directory: Path, *ids: str) -> RestartRecord:
    record = RestartRecord(directory, "g", INSTANCE)
    record.ids_path.parent.mkdir(parents=True, exist_ok=True)
    record.ids_path.write_text(json.dumps({"member_ids": list(ids)}))
    return record


def test_a_first_start_releases_nothing_and_records_its_member_id_before_it_subscribes(
    tmp_path: Path,
) -> None:
    pod = Pod(tmp_path)
    with pod.consumer as c:
        assert c.consume(10, 0.1) == [rec(0, 3)]
    assert pod.releases.calls == []  # nothing recorded: no kafka-python, no broker call
    assert pod.factory.at_subscribe == [["member-1"]]


def test_a_restart_releases_the_recorded_members_before_it_joins(tmp_path: Path) -> None:
    recorded(tmp_path, "old-2", "old-1")
    pod = Pod(tmp_path, answer="old-2")
    with pod.consumer as c:
        assert c.consume(10, 0.1) == [rec(0, 3)]
    assert pod.releases.calls == [(INSTANCE, ["old-2", "old-1"], 0)]  # before any client subscribed
    assert pod.factory.at_subscribe == [["member-1", "old-2", "old-1"]]


@pytest.mark.parametrize("answer", [None, RuntimeError("kafka-python changed"), TimeoutError("unreachable")])
def test_a_restart_that_releases_nothing_joins_as_usual(
    tmp_path: Path, answer: str | None | Exception, caplog: pytest.LogCaptureFixture
) -> None:
    recorded(tmp_path, "old-1")
    pod = Pod(tmp_path, answer=answer)
    with caplog.at_level(logging.INFO, "static_consumer"), pod.consumer as c:
        assert c.consume(10, 0.1) == [rec(0, 3)]
    assert len(pod.releases.calls) == 1
    assert c.state is State.CLOSED
    if isinstance(answer, Exception):
        assert "could not release group.instance.id 'orders-2'" in caplog.text
        assert str(answer) in caplog.text
    else:
        assert "is not held by a member this pod recorded (old-1" in caplog.text


def test_a_lock_another_process_holds_releases_nothing_and_records_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other = recorded(tmp_path, "live-1")
    assert other.claim()  # another process of the pod runs (or is stopped) with this instance id
    pod = Pod(tmp_path, answer="live-1")
    try:
        with caplog.at_level(logging.WARNING, "static_consumer"), pod.consumer as c:
            assert c.consume(10, 0.1) == [rec(0, 3)]
    finally:
        other.unlock()
    assert pod.releases.calls == []
    assert other.member_ids() == ["live-1"]  # its record is left alone
    assert "another process of this pod holds" in caplog.text


def test_each_client_of_the_release_wait_is_recorded(tmp_path: Path) -> None:
    # No record of the holder (another pod's process, say): the restart waits for the broker to release
    # the id, as without the directory, and records the member id of every client it joins with.
    time = FakeTime()
    looks = FakeGroupWatch(time.clock, lambda now: group_look(holder()) if now < 30 else group_look())
    pod = Pod(tmp_path, [UNRELEASED], JOINED, time=time, watch=looks)
    with pod.consumer as c:
        c.poll(0.1)
        assert c.state is State.RUNNING
    assert pod.releases.calls == []
    assert pod.factory.at_subscribe == [["member-1"], ["member-2", "member-1"]]


def test_a_clean_close_leaves_nothing_to_release_and_frees_the_lock(tmp_path: Path) -> None:
    pod = Pod(tmp_path)
    with pod.consumer as c:
        c.consume(10, 0.1)
    record = RestartRecord(tmp_path, "g", INSTANCE)
    assert record.member_ids() == []  # the client's close sent its own static leave
    assert record.claim()  # and the next process may take over
    record.unlock()


def test_a_member_that_failed_keeps_its_record_for_the_restart(tmp_path: Path) -> None:
    dead = PollError(FATAL, "_FATAL", "Fatal error: something else", fatal=True, retriable=False)
    pod = Pod(tmp_path, [Assign((tp(0),)), dead])
    c = pod.consumer.start()
    with pytest.raises(FatalConsumerError):
        c.consume(10, 0.1)
        c.consume(10, 0.1)
    c.close()
    # A client that died this way sent no static leave: its member may still hold the id.
    record = RestartRecord(tmp_path, "g", INSTANCE)
    assert record.member_ids() == ["member-1"]
    assert record.claim()
    record.unlock()


@pytest.mark.parametrize("overrides", [{"protocol": "classic"}, {"static_policy": "dynamic"}])
def test_classic_and_dynamic_members_leave_the_directory_alone(tmp_path: Path, overrides: Any) -> None:
    recorded(tmp_path, "old-1")
    pod = Pod(tmp_path, answer="old-1", **overrides)
    with pod.consumer as c:
        c.consume(10, 0.1)
    assert pod.releases.calls == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        RestartRecord(tmp_path, "g", INSTANCE).ids_path.name
    ]


def test_an_unusable_directory_only_costs_the_fast_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    pod = Pod(not_a_directory)
    with caplog.at_level(logging.WARNING, "static_consumer"), pod.consumer as c:
        assert c.consume(10, 0.1) == [rec(0, 3)]
    assert "is unusable" in caplog.text


def test_the_record_keeps_the_newest_member_ids_and_survives_a_bad_file(tmp_path: Path) -> None:
    record = RestartRecord(tmp_path, "g", INSTANCE)
    for n in range(KEEP + 2):
        record.record(f"m{n}")
    record.record("m3")  # recorded again: moves to the front, once
    assert record.member_ids() == ["m3", "m5", "m4", "m2"][:KEEP]
    record.ids_path.write_text("{not json")
    assert record.member_ids() == []
    record.ids_path.write_text(json.dumps({"member_ids": ["ok", 7, ""]}))
    assert record.member_ids() == ["ok"]


def test_file_names_stay_in_the_directory_and_short(tmp_path: Path) -> None:
    odd = RestartRecord(tmp_path, "../team/orders", INSTANCE)
    assert odd.lock_path.parent == tmp_path and "/" not in odd.lock_path.name
    long = RestartRecord(tmp_path, "g" * 300, INSTANCE)
    assert long.lock_path.parent == tmp_path and len(long.lock_path.name) < 255
    assert RestartRecord(tmp_path, "a", "b-1").lock_path != RestartRecord(tmp_path, "a", "b-2").lock_path


def test_two_holders_of_one_lock_exclude_each_other(tmp_path: Path) -> None:
    first, second = RestartRecord(tmp_path, "g", INSTANCE), RestartRecord(tmp_path, "g", INSTANCE)
    assert first.claim() and first.claim()  # idempotent for its holder
    assert not second.claim()
    first.unlock()
    assert second.claim()
    second.unlock()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_commit_refused_for_a_dropped_member_says_what_the_next_poll_tells(
    tmp_path: Path, protocol: str
) -> None:
    # Under KIP-848 the client keeps its member id: UNKNOWN_MEMBER_ID means the broker dropped the member
    # (its session expired, or a restart released it and runs); the rejoin at the next poll tells which.
    pod = Pod(tmp_path, protocol=protocol)
    with pod.consumer as c:
        records = c.consume(10, 0.1)
        pod.factory.last.commit_failures.append(UNKNOWN_MEMBER)
        with pytest.raises(CommitFailedError) as refused:
            c.commit(records, asynchronous=False)
    told = "took over its instance id" in str(refused.value) and "FencedInstanceError" in str(refused.value)
    assert told is (protocol == "consumer")


# Every place a crashed member restarts builds its StaticConsumer from the pod's settings: the pod main
# (run_until_sigterm), a pool worker restarted in place (its own instance id `{pod}-{k}`, so its own
# files: integration/test_crash_restart.py), the asyncio consumer and the Spark runner.


def test_the_pod_main_releases_its_predecessor(tmp_path: Path) -> None:
    recorded(tmp_path, "old-1")
    pod = Pod(tmp_path, answer="old-1")
    handled: list[int] = []

    def handle(batch: list[Any]) -> None:
        handled.append(len(batch))
        pod.consumer.stop()

    run_until_sigterm(pod.consumer, handle, poll_timeout_s=0.01)
    assert handled == [1] and pod.releases.calls == [(INSTANCE, ["old-1"], 0)]


def test_the_asyncio_consumer_releases_its_predecessor(tmp_path: Path) -> None:
    recorded(tmp_path, "old-1")
    record = RestartRecord(tmp_path, "g", INSTANCE)
    factory = Numbered(record, JOINED)
    releases = Releases(factory, "old-1")

    async def main() -> list[Any]:
        async with AsyncStaticConsumer(
            make_settings(tmp_path),
            env={"POD_NAME": INSTANCE},
            seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN, release_member=releases),
        ) as consumer:
            return await consumer.consume(10, 0.1)

    assert asyncio.run(main()) == [rec(0, 3)]
    assert releases.calls == [(INSTANCE, ["old-1"], 0)]


def test_the_spark_runner_builds_its_consumer_from_the_same_settings(tmp_path: Path) -> None:
    from static_consumer.spark.runner import MicroBatchRunner

    built: list[ConsumerSettings] = []

    def consumer(settings: ConsumerSettings, listeners: Sequence[Any]) -> StaticConsumer:
        built.append(settings)
        return StaticConsumer(settings, listeners=listeners, env={"POD_NAME": INSTANCE})

    settings = make_settings(tmp_path)
    MicroBatchRunner(settings, lambda df, info: None, spark=object(), consumer_factory=consumer)
    assert built == [settings] and built[0].restart_state_dir == str(tmp_path)
