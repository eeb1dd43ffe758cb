"""Two processes with the same group.instance.id on a real broker.

Classic protocol: the *newest* joiner wins. The coordinator hands the instance id to the new member and
answers the old one with FENCED_INSTANCE_ID (82); StaticConsumer raises FencedInstanceError, commits
nothing more and the process exits 82. It must not rejoin: it would fence the other one in turn.

Consumer protocol (KIP-848): the *oldest* member wins. While the instance id is held by a live member, a
joiner gets UNRELEASED_INSTANCE_ID (111) and StaticConsumer watches the group: when the holder's committed
offsets advance, the holder is proven alive and the newcomer raises FencedInstanceError and exits 82 in
seconds; a holder that commits nothing is judged by time (still listed a session + release_margin_s
after it was first seen: UnreleasedInstanceIdError, exit 75). The member already in the group is never
disturbed.

Records are produced continuously while both processes run (except in the idle case), so the fenced one
would have something to commit after the fence if it were going to. Every test runs on the shared
broker; KIP-848 groups get a 10 s session and 0.5 s heartbeats as group overrides.

Also Kafka's system-test shape: two ids duplicated at once in a stable group with bystanders, where
exactly the duplicates must end and the bystanders must not notice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from _faults import logged_rebalances

from static_consumer_lab.brokers import KafkaCluster, describe_consumer_group
from static_consumer_lab.children.group import CONSUMER_PROTOCOL_SESSION_MS, Group, shorten_consumer_session
from static_consumer_lab.children.processes import ConsumerProcess, Event, wait_until
from static_consumer_lab.children.specs import static_spec
from static_consumer_lab.producer import SteadyProducer

pytestmark = pytest.mark.lab_broker(
    "KIP-848 groups take a 10 s session: an idle duplicate exits 75 after session + margin; who is fenced, "
    "and what is committed after, does not depend on the session length"
)

PARTITIONS = 4
BATCH = 50
FENCE_BOUND_S = 10.0  # the fenced process exits within 10 s
SESSION_S = CONSUMER_PROTOCOL_SESSION_MS / 1000
BROKER_SESSION_S = 45.0  # the shared broker's group.consumer.session.timeout.ms (Kafka's default)


def _spec(protocol: str, bootstrap: str, group: str, topic: str) -> dict[str, Any]:
    if protocol == "consumer":
        shorten_consumer_session(bootstrap, group)
    spec = static_spec(bootstrap, group, [topic], "app-0", protocol=protocol)
    spec["batch"] = BATCH  # small batches: many commits, so a commit after the fence would show
    return spec


def _index(proc: ConsumerProcess, kind: str) -> int:
    return next(i for i, e in enumerate(proc.events()) if e["kind"] == kind)


def _assert_fenced_cleanly(proc: ConsumerProcess, since: float, since_what: str) -> None:
    """``proc`` was fenced: exit 82 within FENCE_BOUND_S of ``since``, nothing committed or consumed after."""
    code = proc.wait(timeout_s=30)
    error = proc.wait_for_kind("error", timeout_s=1)
    assert (code, error["kind_of"], error["exit_code"]) == (82, "FencedInstanceError", 82), proc.stderr_tail()
    exited_at = proc.wait_for_kind("exit", timeout_s=1)["ts"]
    print(f"{proc.name}: fenced and exited {exited_at - since:.1f} s after {since_what}")
    assert exited_at - since <= FENCE_BOUND_S
    # The child streams its events in order: a committed or records event after "fenced" would mean a
    # commit (or processing) after the broker gave the instance id to someone else.
    fenced = _index(proc, "fenced")
    late = [e["kind"] for e in proc.events()[fenced:] if e["kind"] in ("committed", "records")]
    assert late == [], f"{proc.name} went on after the fence: {late}"
    assert proc.events("closed")[-1]["left_group"] is False  # the id belongs to the other process now


def _assert_overlap_handed_out_again(
    original: ConsumerProcess, duplicate: ConsumerProcess, fenced_at: float
) -> None:
    """Classic fencing overlap: what the original still handed out once the duplicate owned
    the partitions. No stall guard can see it (no pause): it ends at the original's next commit or
    heartbeat, which the broker refuses. Its size is not bounded (the default commit does not wait for the
    broker, so a second batch can go out while the refused commit is in flight; docs/semantics.md): what
    is promised is that none of it is committed by the original, so the duplicate consumes all of it."""
    assigned_at = next(e["ts"] for e in duplicate.events("assigned") if e["partitions"])
    overlap = set(original.records(since=assigned_at))
    print(
        f"classic fencing overlap: the original handed out {len(overlap)} records after the duplicate was "
        f"assigned; fenced {(fenced_at - assigned_at) * 1000:.0f} ms after that assignment"
    )
    # Any commit of them came after the coordinator gave the id to the duplicate, so it was refused and
    # the duplicate started from an offset at or before each one: it must hand every one out again.
    wait_until(
        lambda: overlap <= set(duplicate.records()),
        30,
        f"the duplicate consuming the {len(overlap)} records the original handed out after its assignment",
    )


def _sole_member(bootstrap: str, group: str) -> tuple[str, str]:
    members = describe_consumer_group(bootstrap, group).members
    assert len(members) == 1, [(m.group_instance_id, m.member_id) for m in members]
    return members[0].group_instance_id, members[0].member_id


def _owns_all(proc: ConsumerProcess, topic: str) -> bool:
    return proc.assignment() == {(topic, p) for p in range(PARTITIONS)}


def _consumed_everything(procs: list[ConsumerProcess], produced: int) -> None:
    def distinct() -> int:
        return len({r for p in procs for r in p.records()})

    wait_until(lambda: distinct() >= produced, 60, f"all {produced} records consumed by the two processes")


def _last_assigned(proc: ConsumerProcess) -> Event:
    return proc.events("assigned")[-1]


def _assert_untouched(original: ConsumerProcess, member: tuple[str, str], topic: str, since: float) -> None:
    """The member already in the group never noticed: same member, every partition, no revocation."""
    settings = original.spec["settings"]
    assert _sole_member(settings["bootstrap_servers"], settings["group_id"]) == member
    assert _owns_all(original, topic)
    assert not [e for e in original.events() if e["kind"] in ("revoked", "lost") and e["ts"] >= since]
    assert original.returncode is None, original.stderr_tail()


@pytest.mark.both_backends
def test_classic_duplicate_of_a_stable_member_fences_the_original(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    bootstrap = kafka_bootstrap_servers
    topic, group = kafka_topic_factory(PARTITIONS), kafka_group_id_factory()
    spec = _spec("classic", bootstrap, group, topic)
    original = kafka_consumer_process_factory(spec, name="original")
    wait_until(lambda: _owns_all(original, topic), 60, "the original owning every partition")
    with SteadyProducer(bootstrap, topic, rate_per_s=400) as producer:
        original.wait_for_kind("committed", timeout_s=30)
        started = time.time()
        duplicate = kafka_consumer_process_factory(spec, name="duplicate")
        _assert_fenced_cleanly(original, started, "the duplicate process was started")
        wait_until(lambda: _owns_all(duplicate, topic), 30, "the duplicate owning every partition")
        fenced_at = original.wait_for_kind("fenced", timeout_s=1)["ts"]
        _assert_overlap_handed_out_again(original, duplicate, fenced_at)
        # The winner keeps consuming and committing after the fence.
        duplicate.wait_for(
            lambda e: e["kind"] == "committed" and e["ts"] > fenced_at, 30, "a commit after the fence"
        )
    assert _sole_member(bootstrap, group) == ("app-0", _last_assigned(duplicate)["member_id"])
    assert duplicate.returncode is None, duplicate.stderr_tail()
    _consumed_everything([original, duplicate], producer.acked)  # at-least-once across the fence


@pytest.mark.both_backends
def test_consumer_protocol_fences_a_duplicate_of_a_committing_member_and_keeps_the_original(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    bootstrap = kafka_bootstrap_servers
    topic, group = kafka_topic_factory(PARTITIONS), kafka_group_id_factory()
    spec = _spec("consumer", bootstrap, group, topic)
    original = kafka_consumer_process_factory(spec, name="original")
    wait_until(lambda: _owns_all(original, topic), 60, "the original owning every partition")
    member = _sole_member(bootstrap, group)
    with SteadyProducer(bootstrap, topic, rate_per_s=400) as producer:
        original.wait_for_kind("committed", timeout_s=30)
        stable_since = time.time()
        duplicate = kafka_consumer_process_factory(spec, name="duplicate")
        # Refused, then proven a duplicate by the original's commits: exit 82 long before the session
        # (10 s) could have said anything, and without ever being assigned.
        _assert_fenced_cleanly(duplicate, stable_since, "it was started")
        assert duplicate.events("assigned") == [] and duplicate.records() == []
        exited_at = duplicate.wait_for_kind("exit", timeout_s=1)["ts"]
        original.wait_for(
            lambda e: e["kind"] == "committed" and e["ts"] > exited_at, 30, "a commit after the rejection"
        )
    _assert_untouched(original, member, topic, stable_since)
    _consumed_everything([original], producer.acked)


def test_consumer_protocol_refuses_a_duplicate_of_an_idle_member_after_the_group_session(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    # Nothing is produced, so the original commits nothing and only time tells it is alive: still listed
    # a session + release_margin_s after the duplicate first saw it.
    bootstrap = kafka_bootstrap_servers
    topic, group = kafka_topic_factory(PARTITIONS), kafka_group_id_factory()
    spec = _spec("consumer", bootstrap, group, topic)
    original = kafka_consumer_process_factory(spec, name="original")
    wait_until(lambda: _owns_all(original, topic), 60, "the original owning every partition")
    member = _sole_member(bootstrap, group)
    stable_since = time.time()
    duplicate = kafka_consumer_process_factory(spec, name="duplicate")
    ready_at = duplicate.wait_for_kind("ready", timeout_s=30)["ts"]
    code = duplicate.wait(timeout_s=BROKER_SESSION_S + 60)
    error = duplicate.wait_for_kind("error", timeout_s=1)
    assert (code, error["kind_of"], error["exit_code"]) == (75, "UnreleasedInstanceIdError", 75)
    assert "release_margin_s" in error["reason"] and member[1] in error["reason"]  # names the holder
    exited_at = duplicate.wait_for_kind("exit", timeout_s=1)["ts"]
    print(f"idle duplicate gave up {exited_at - ready_at:.1f} s after it started joining")
    # Not before the group's session could have expired the holder; and on the group's session, not on
    # the broker's 45 s: the wait read the group override.
    assert SESSION_S <= exited_at - ready_at < BROKER_SESSION_S
    assert duplicate.events("assigned") == [] and duplicate.events("fenced") == []
    _assert_untouched(original, member, topic, stable_since)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_two_processes_started_together_leave_exactly_one_member(
    protocol: str,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    bootstrap = kafka_bootstrap_servers
    topic, group = kafka_topic_factory(PARTITIONS), kafka_group_id_factory()
    spec = _spec(protocol, bootstrap, group, topic)
    with SteadyProducer(bootstrap, topic, rate_per_s=400) as producer:
        procs = [kafka_consumer_process_factory(spec, name=f"twin-{i}") for i in (1, 2)]
        wait_until(lambda: any(p.returncode is not None for p in procs), 60, "one twin to exit")
        loser = next(p for p in procs if p.returncode is not None)
        winner = next(p for p in procs if p is not loser)
        # Classic: whichever joined first is replaced by the second. Consumer protocol: the first to join
        # keeps the id and the other, refused, is fenced by the winner's commits. Both start at once, so
        # the bound runs from the later of the two start-ups.
        joined = max(p.wait_for_kind("ready", timeout_s=1)["ts"] for p in procs)
        _assert_fenced_cleanly(loser, joined, "both twins were up")
        if protocol == "consumer":
            assert loser.events("assigned") == [] and loser.records() == []
        wait_until(lambda: _owns_all(winner, topic), 30, "the winner owning every partition")
        winner.wait_for(
            lambda e: e["kind"] == "committed" and e["ts"] > loser.events("exit")[-1]["ts"],
            30,
            "a commit by the winner after the loser exited",
        )
    assert _sole_member(bootstrap, group) == ("app-0", _last_assigned(winner)["member_id"])
    assert winner.returncode is None, winner.stderr_tail()
    _consumed_everything(procs, producer.acked)


def _carries_on(proc: ConsumerProcess, partitions: set[tuple[str, int]], after: float) -> None:
    """``proc`` owns ``partitions`` and commits after ``after``."""
    wait_until(lambda: proc.assignment() == partitions, 30, f"{proc.name} owning {sorted(partitions)}")
    proc.wait_for(lambda e: e["kind"] == "committed" and e["ts"] > after, 30, "a commit after the fences")


CONFLICTING = ("app-0", "app-1")  # app-0 leads the classic group
BYSTANDERS = ("app-2", "app-3")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_two_duplicates_started_at_once_into_a_stable_group_end_only_the_duplicates(
    protocol: str,
    kafka_cluster: KafkaCluster,
    kafka_bootstrap_servers: str,
    kafka_group_factory: Callable[..., Group],
) -> None:
    """Two instance ids duplicated at once in a stable group of four: per id exactly one process exits
    82 (classic: the original, KIP-848: the newcomer), committing nothing after its fence; the other
    process of each id owns that id's partitions; the bystanders never lose a partition, keep
    consuming and committing, and the group does not rebalance."""
    bootstrap = kafka_bootstrap_servers
    group = kafka_group_factory(
        2 * PARTITIONS,
        protocol=protocol,
        spec_extra=lambda _name: {"batch": BATCH},
    )
    with SteadyProducer(bootstrap, group.topic, rate_per_s=400) as producer:
        initial = group.form((*CONFLICTING, *BYSTANDERS))
        for proc in group.members.values():
            proc.wait_for_kind("committed", timeout_s=30, after=time.time())
        rebalances = logged_rebalances(kafka_cluster, group.group_id)
        stable_since = time.time()
        originals = {name: group.members[name] for name in CONFLICTING}
        duplicates = {name: group.spawn_held(name) for name in CONFLICTING}
        for proc in duplicates.values():
            proc.wait_for_kind("held", timeout_s=60)
        started = time.time()
        for proc in duplicates.values():
            proc.release()
        losers, winners = (originals, duplicates) if protocol == "classic" else (duplicates, originals)
        for name in CONFLICTING:
            _assert_fenced_cleanly(losers[name], started, "both duplicates were started")
            if protocol == "consumer":
                assert losers[name].events("assigned") == [] and losers[name].records() == []
        last_exit = max(proc.wait_for_kind("exit", timeout_s=1)["ts"] for proc in losers.values())
        for name in (*CONFLICTING, *BYSTANDERS):
            _carries_on(winners.get(name) or group.members[name], initial[name], last_exit)
    # Exactly the duplicates ended: every other process still runs.
    survivors = [*winners.values(), *(group.members[name] for name in BYSTANDERS)]
    assert [p.name for p in survivors if p.returncode is not None] == []
    listed = {m.group_instance_id for m in describe_consumer_group(bootstrap, group.group_id).members}
    assert listed == {*CONFLICTING, *BYSTANDERS}
    for name in BYSTANDERS:
        events = group.members[name].events()
        revoked = [e for e in events if e["kind"] in ("revoked", "lost") and e["ts"] >= stable_since]
        assert revoked == [], f"bystander {name} gave up partitions: {revoked}"
    if rebalances is not None:
        assert logged_rebalances(kafka_cluster, group.group_id) == rebalances, "the group rebalanced"
    _consumed_everything([*originals.values(), *duplicates.values(), *group.members.values()], producer.acked)
