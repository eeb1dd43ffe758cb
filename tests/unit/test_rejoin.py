"""The KIP-848 wait for a held instance id (UNRELEASED_INSTANCE_ID), on a fake client, a scripted group and
an instant clock. With the fakes' capabilities the group's session is 45 s, so with the default 5 s margin a
holder listed 50 s after it was first seen is alive."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest
from fakes import (
    MODERN,
    UNRELEASED,
    Assign,
    FakeFactory,
    FakeGroupWatch,
    FakeTime,
    Lose,
    Step,
    group_look,
    holder,
    rec,
    tp,
)

from static_consumer._base.errors import (
    EXIT_FENCED,
    EXIT_TEMPFAIL,
    ConfigurationError,
    FencedInstanceError,
    UnreleasedInstanceIdError,
)
from static_consumer._base.records import Record, TopicPartition
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.events import Fenced, MembershipEvent, MembershipListener, Stalled
from static_consumer._core.rejoin import LOOK_S, release_budget
from static_consumer._core.seams import Seams
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer._kafka.groups import GroupDescription
from static_consumer.settings import ConsumerSettings

BOUND_S = 45 + 5  # session + release_margin_s
Looks = Callable[[float], GroupDescription | None]


def make_settings(**overrides: Any) -> ConsumerSettings:
    values: dict[str, Any] = {
        "bootstrap_servers": "127.0.0.1:9092",
        "group_id": "g",
        "topics": ("t",),
        "protocol": "consumer",
    }
    return ConsumerSettings(**{**values, **overrides})


class Events(MembershipListener):
    def __init__(self) -> None:
        self.seen: list[MembershipEvent] = []

    def on_fenced(self, event: Fenced) -> None:
        self.seen.append(event)


class Wait:
    """A consumer whose first join is refused, the group it watches and the fake time."""

    def __init__(
        self,
        looks: Looks,
        *scripts: list[Step],
        offsets: Callable[[float], Mapping[TopicPartition, int] | None] = lambda now: {},
        settings: ConsumerSettings | None = None,
        caps: BrokerCapabilities = MODERN,
        session: Callable[[float], int | None] = lambda now: None,
        time: FakeTime | None = None,
        listeners: Sequence[MembershipListener] = (),
    ) -> None:
        self.time = time or FakeTime()
        self.factory = FakeFactory([UNRELEASED], *scripts)
        self.watch = FakeGroupWatch(self.time.clock, looks, offsets, session)
        self.events = Events()
        self.consumer = StaticConsumer(
            settings or make_settings(),
            listeners=[self.events, *listeners],
            env={"POD_NAME": "orders-2"},
            seams=Seams(
                adapter_factory=self.factory,
                probe=lambda s, **_: caps,
                group_watch=self.watch,
                sleep=self.time.sleep,
                clock=self.time.clock,
            ),
        )
        self.consumer.start()

    @property
    def joins(self) -> int:
        """Clients created after the first one, i.e. join attempts of the wait."""
        return len(self.factory.adapters) - 1


def listed_until(until: float, *, member: str = "dead-1") -> Looks:
    return lambda now: group_look(holder(member)) if now < until else group_look()


REFUSED: list[Step] = [UNRELEASED]
JOINED: list[Step] = [Assign((tp(0),)), rec(0, 3)]


def test_the_restart_joins_as_soon_as_the_holder_is_gone() -> None:
    wait = Wait(listed_until(27.3), JOINED)
    with wait.consumer as c:
        assert c.poll(0.1) is None  # the refusal: the wait ran inside this call
        assert c.state is State.RUNNING
        assert c.poll(0.1) == rec(0, 3)
    assert wait.joins == 1  # no blind retries: one join, once the holder was gone
    assert 27.3 <= wait.time.now <= 27.3 + LOOK_S
    assert wait.watch.opened == wait.watch.closed == 1
    assert all(a.calls.count("close") == 1 for a in wait.factory.adapters)


@pytest.mark.parametrize("gone_at", [BOUND_S - 1, BOUND_S - LOOK_S])
def test_never_gives_up_while_the_old_member_can_still_be_expiring(gone_at: float) -> None:
    wait = Wait(listed_until(gone_at), JOINED)
    with wait.consumer as c:
        c.poll(0.1)
        assert c.state is State.RUNNING
    assert wait.joins == 1


def test_a_holder_listed_past_session_plus_margin_is_alive_exit_75() -> None:
    wait = Wait(lambda now: group_look(holder("twin-7", host="10.1.2.3")))
    c = wait.consumer
    with pytest.raises(UnreleasedInstanceIdError) as info:
        c.poll(0.1)
    assert info.value.exit_code == EXIT_TEMPFAIL
    assert BOUND_S < wait.time.now <= BOUND_S + 2 * LOOK_S
    assert "twin-7" in str(info.value) and "10.1.2.3" in str(info.value)
    assert "release_margin_s" in str(info.value)
    assert wait.joins == 0  # never joined blindly while the holder was listed
    assert c.state is State.FAILED
    with pytest.raises(UnreleasedInstanceIdError):
        c.poll(0.1)
    c.close()
    assert wait.watch.closed == 1


def test_committed_offsets_that_advance_prove_a_live_duplicate_exit_82() -> None:
    wait = Wait(lambda now: group_look(holder("twin-7")), offsets=lambda now: {tp(0): 100 + int(now * 10)})
    c = wait.consumer
    with pytest.raises(FencedInstanceError) as info:
        c.poll(0.1)
    assert info.value.exit_code == EXIT_FENCED
    assert wait.time.now <= 2.0  # two readings a second apart
    assert "twin-7" in str(info.value) and "committing" in str(info.value)
    assert c.state is State.FENCED
    assert len(wait.events.seen) == 1 and isinstance(wait.events.seen[0], Fenced)
    assert wait.joins == 0
    with pytest.raises(FencedInstanceError):
        c.commit()
    c.close()


def test_the_first_commit_of_a_live_holder_counts_as_proof() -> None:
    wait = Wait(lambda now: group_look(holder("twin-7")), offsets=lambda now: {} if now < 3 else {tp(0): 5})
    with pytest.raises(FencedInstanceError):
        wait.consumer.poll(0.1)
    assert 3 <= wait.time.now <= 4.5


def test_offsets_that_do_not_move_prove_nothing() -> None:
    wait = Wait(lambda now: group_look(holder()), offsets=lambda now: {tp(0): 42})
    with pytest.raises(UnreleasedInstanceIdError):
        wait.consumer.poll(0.1)
    assert wait.time.now > BOUND_S


def test_a_holder_without_partitions_is_judged_by_time_alone() -> None:
    looks: Looks = lambda now: group_look(holder(partitions=()))  # noqa: E731
    wait = Wait(looks, offsets=lambda now: pytest.fail("no partitions: nothing to read"))
    with pytest.raises(UnreleasedInstanceIdError):
        wait.consumer.poll(0.1)


def test_unanswered_looks_restart_the_clock_and_joins_are_tried_blind() -> None:
    # Listed all along, but the group could not be described from 30 s to 40 s (e.g. a coordinator
    # reload, which restarts the old member's session): the verdict comes a full bound after 40 s.
    def looks(now: float) -> GroupDescription | None:
        return None if 30 <= now < 40 else group_look(holder())

    wait = Wait(looks, *([REFUSED] * 10))
    with pytest.raises(UnreleasedInstanceIdError):
        wait.consumer.poll(0.1)
    assert 40 + BOUND_S < wait.time.now <= 40 + BOUND_S + 2 * LOOK_S
    assert wait.joins == 2  # at 30 s and 35 s: every 5 s while blind


def test_a_blind_join_that_is_not_refused_ends_the_wait() -> None:
    wait = Wait(lambda now: None, REFUSED, JOINED)
    with wait.consumer as c:
        c.poll(0.1)
        assert c.state is State.RUNNING
    assert wait.joins == 2 and 10 <= wait.time.now <= 10 + 2 * LOOK_S


def test_a_new_coordinator_restarts_the_clock() -> None:
    def looks(now: float) -> GroupDescription:
        return group_look(holder(), coordinator=1 if now < 30 else 2)

    wait = Wait(looks)
    with pytest.raises(UnreleasedInstanceIdError):
        wait.consumer.poll(0.1)
    assert 30 + BOUND_S < wait.time.now <= 30 + BOUND_S + 2 * LOOK_S


@pytest.mark.parametrize(("max_wait", "ends_at"), [(None, 3 * BOUND_S), (80.0, 80.0)])
def test_release_max_wait_bounds_a_wait_that_cannot_see(max_wait: float | None, ends_at: float) -> None:
    wait = Wait(lambda now: None, *([REFUSED] * 40), settings=make_settings(release_max_wait_s=max_wait))
    with pytest.raises(UnreleasedInstanceIdError, match="release_max_wait_s"):
        wait.consumer.poll(0.1)
    assert ends_at < wait.time.now <= ends_at + 2 * LOOK_S


def test_release_max_wait_never_cuts_a_visible_holder_short() -> None:
    # Blind for 40 s (7 blind joins refused), then the dead member is listed until 89 s: seen at 40 s,
    # before the 60 s bound ran out, it keeps its whole session + margin (until 90 s), and its release
    # is joined at once, past the bound.
    def looks(now: float) -> GroupDescription | None:
        return None if now < 40 else group_look(holder()) if now < 89 else group_look()

    wait = Wait(looks, *([REFUSED] * 7), JOINED, settings=make_settings(release_max_wait_s=60))
    with wait.consumer as c:
        c.poll(0.1)
        assert c.state is State.RUNNING
    assert 89 <= wait.time.now <= 89 + LOOK_S


def test_a_coordinator_that_keeps_moving_ends_at_the_bound() -> None:
    # Every move restarts the holder's session, so it could be held forever: a holder first seen after
    # the 60 s bound ran out (the move at 90 s) ends the wait. At most bound + session + margin.
    looks: Looks = lambda now: group_look(holder(), coordinator=int(now // 30))  # noqa: E731
    wait = Wait(looks, settings=make_settings(release_max_wait_s=60))
    with pytest.raises(UnreleasedInstanceIdError, match="release_max_wait_s"):
        wait.consumer.poll(0.1)
    assert 90 <= wait.time.now <= 90 + LOOK_S
    assert wait.joins == 0


def test_release_max_wait_below_session_plus_margin_is_refused_at_start() -> None:
    settings = make_settings(release_max_wait_s=20)
    with pytest.raises(ConfigurationError, match=r"release_max_wait_s .* 20s, below .* \(45s\) \+ "):
        StaticConsumer(
            settings, env={"POD_NAME": "orders-2"}, seams=Seams(probe=lambda s, **_: MODERN)
        ).start()
    caps = replace(MODERN, consumer_session_timeout_ms=10000)
    wait = Wait(lambda now: group_look(holder()), settings=settings, caps=caps)  # 20 >= 10 + 5: accepted
    with pytest.raises(UnreleasedInstanceIdError):
        wait.consumer.poll(0.1)
    assert 15 < wait.time.now <= 15 + 2 * LOOK_S


def test_a_session_raised_since_start_counts_when_the_join_is_refused() -> None:
    # Probed at start(): 10 s; read again when refused: 30 s. The dead member is listed until 33 s.
    caps = replace(MODERN, consumer_session_timeout_ms=10000)
    wait = Wait(listed_until(33), JOINED, caps=caps, session=lambda now: 30000)
    with wait.consumer as c:
        c.poll(0.1)
        assert c.state is State.RUNNING
    assert wait.watch.session_reads == [0.0]  # once, when the wait began


def test_a_session_lowered_since_start_does_not_shorten_the_wait() -> None:
    # The old member's timer was armed with the 45 s in force at its last heartbeat; an override of 10 s
    # set since then does not re-arm it, so the wait still allows 45 s + margin.
    wait = Wait(listed_until(48), JOINED, session=lambda now: 10000)
    with wait.consumer as c:
        c.poll(0.1)
        assert c.state is State.RUNNING


def test_a_new_coordinator_reads_the_session_again() -> None:
    # The reload at 12 s re-arms the holder's timer with the session then in force (40 s): the verdict
    # comes 40 + 5 s after 12 s, not 10 + 5 s after the first sight.
    caps = replace(MODERN, consumer_session_timeout_ms=10000)
    looks: Looks = lambda now: group_look(holder(), coordinator=1 if now < 12 else 2)  # noqa: E731
    wait = Wait(looks, caps=caps, session=lambda now: None if now < 12 else 40000)
    with pytest.raises(UnreleasedInstanceIdError, match=r"\(40s\) \+ release_margin_s"):
        wait.consumer.poll(0.1)
    assert 57 < wait.time.now <= 57 + 2 * LOOK_S
    assert len(wait.watch.session_reads) == 2


def test_a_slow_answer_does_not_bring_the_verdict_forward() -> None:
    # The first look is answered at once, the others take 4 s (a loaded broker). The dead member is
    # listed in answers to looks sent before 49 s: the look sent at 48.x s and answered at 52.x s still
    # lists it, which is no proof of life, since it was listed when the look was sent.
    time = FakeTime()

    def looks(now: float) -> GroupDescription:
        listed = now < 49
        if now > 0:
            time.sleep(4.0)
        return group_look(holder()) if listed else group_look()

    wait = Wait(looks, JOINED, time=time)
    with wait.consumer as c:
        c.poll(0.1)
        assert c.state is State.RUNNING


def test_refused_after_the_holder_vanished_gives_the_new_holder_its_own_clock() -> None:
    # The dead member expires at 10 s, but another process with the same id joins first: the new holder
    # is judged from when it was first seen, and named in the error.
    def looks(now: float) -> GroupDescription:
        if now < 10:
            return group_look(holder("dead-1"))
        return group_look() if now < 10 + LOOK_S else group_look(holder("twin-7"))

    wait = Wait(looks, REFUSED)
    with pytest.raises(UnreleasedInstanceIdError, match="twin-7"):
        wait.consumer.poll(0.1)
    assert wait.joins == 1
    assert 10 + BOUND_S < wait.time.now <= 10 + BOUND_S + 3 * LOOK_S


def test_the_group_session_and_margin_set_the_bound() -> None:
    caps = replace(MODERN, consumer_session_timeout_ms=10000)  # the group's own override, as probed
    wait = Wait(lambda now: group_look(holder()), settings=make_settings(release_margin_s=2.5), caps=caps)
    with pytest.raises(UnreleasedInstanceIdError, match=r"\(10s\) \+ release_margin_s \(2.5s\)"):
        wait.consumer.poll(0.1)
    assert 12.5 < wait.time.now <= 12.5 + 2 * LOOK_S


def test_stop_ends_the_wait_quietly() -> None:
    wait = Wait(lambda now: group_look(holder()))
    c = wait.consumer
    c.stop()  # e.g. SIGTERM while waiting for the broker to release the id
    assert c.poll(0.1) is None
    assert wait.joins == 0 and wait.time.now < 1
    with pytest.raises(UnreleasedInstanceIdError):
        c.poll(0.1)
    c.close()


def test_unreleased_after_being_assigned_is_fencing() -> None:
    factory = FakeFactory([Assign((tp(0),)), Lose((tp(0),)), UNRELEASED])
    watch = FakeGroupWatch(lambda: 0.0, lambda now: pytest.fail("an assigned member does not wait"))
    c = StaticConsumer(
        make_settings(),
        env={"POD_NAME": "orders-2"},
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN, group_watch=watch),
    )
    with c, pytest.raises(FencedInstanceError):
        c.poll(0.1)  # assigned, lost (the old session expired), then refused: replaced by another process
    assert len(factory.adapters) == 1 and watch.opened == 0


# -- the budget ---------------------------------------------------------------------------------------


def test_the_budget_uses_the_probed_session_else_the_broker_maximum() -> None:
    settings = make_settings()
    probed = release_budget(settings, replace(MODERN, consumer_heartbeat_interval_ms=500))
    assert (probed.session_s, probed.margin_s, probed.heartbeat_s) == (45, 5, 0.5)
    assert probed.max_wait_s == 3 * 50
    unknown = replace(MODERN, consumer_session_timeout_ms=None)
    assert release_budget(settings, unknown).session_s == 60  # Kafka's default maximum bounds any group
    assert release_budget(settings, replace(unknown, consumer_max_session_timeout_ms=90000)).session_s == 90
    assert release_budget(settings, None).session_s == 60
    assert release_budget(make_settings(release_max_wait_s=70), MODERN).max_wait_s == 70
    # Never below session + margin, e.g. once the session read at the refusal is longer than the probed.
    assert release_budget(make_settings(release_max_wait_s=70), MODERN).with_session(90000).max_wait_s == 95
    assert probed.with_session(10000) == probed  # a shorter reading changes nothing


def test_release_settings_are_consumer_protocol_only_and_positive() -> None:
    with pytest.raises(ConfigurationError, match="release_margin_s only applies to protocol='consumer'"):
        make_settings(protocol="classic", release_margin_s=3)
    with pytest.raises(ConfigurationError, match="release_max_wait_s"):
        make_settings(release_max_wait_s=0)
    assert make_settings(protocol="classic").release_margin_s == 5.0


class Stalls(MembershipListener):
    def __init__(self) -> None:
        self.seen: list[Stalled] = []

    def on_stalled(self, event: Stalled) -> None:
        self.seen.append(event)


@pytest.mark.parametrize("released_at", [40.6, BOUND_S - 1])
def test_the_wait_for_the_id_is_no_stall(released_at: float, caplog: pytest.LogCaptureFixture) -> None:
    # The wait runs inside a client call and lasts most of a session, longer than the stall guard's
    # threshold (half the 45 s session): the guard knows it, so the records of the new client go out
    # without a check, a `stalled` event or a warning that the broker did not answer.
    time, stalls = FakeTime(), Stalls()
    script = [Assign((tp(0),)), None, rec(0, 3), rec(0, 4)]
    wait = Wait(listed_until(released_at), script, time=time, listeners=[stalls])  # waits in its 1st consume
    with caplog.at_level(logging.INFO, "static_consumer"), wait.consumer as c:
        records: list[Record] = []
        for _ in range(5):
            records += c.consume(10, 0.1)
            time.sleep(0.1)
        assert records == [rec(0, 3), rec(0, 4)]
        assert c.state is State.RUNNING and time.now >= released_at
    assert stalls.seen == []
    assert "between client calls" not in caplog.text and "no answer from the broker" not in caplog.text


def test_a_freeze_after_the_wait_is_still_a_stall() -> None:
    # The guard measures from the end of the wait: a gap after it is checked as ever.
    time, stalls = FakeTime(), Stalls()
    wait = Wait(
        listed_until(10.0), [Assign((tp(0),)), None, rec(0, 3), rec(0, 4)], time=time, listeners=[stalls]
    )
    with wait.consumer as c:
        c.consume(10, 0.1)  # the wait
        assert c.consume(1, 0.1) == [rec(0, 3)]
        time.sleep(30.0)  # frozen for longer than the 22.5 s threshold
        c.consume(1, 0.1)
    assert [(s.verdict, s.gap_s) for s in stalls.seen] == [("unknown", 30.0)]
