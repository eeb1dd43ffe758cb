"""A static member whose handler blocks past ``max_poll_interval_ms``, on a real broker.

Each member is README's pod main (``run_until_sigterm``, in the child's ``static`` mode): the loop users
run, with nothing switched for the test. Two static members share a 4-partition topic while records are
produced at 200/s; the victim's handler blocks twice between handing a batch out and committing it (the
child's ``block``), with a 6 s session and ``max_poll_interval_ms`` 7 s.

1. 8.5 s, past max.poll.interval but under max.poll.interval + session: librdkafka gives up the
   assignment when the interval expires (MAXPOLL) but, for a static member, sends no LeaveGroup, and
   stops heartbeating; the broker still holds the member, so nobody else gets its partitions. On
   return the partitions are reported lost and the member is back on the same ones at once, without a
   rebalance. The commit of the blocked batch: classic, refused (librdkafka reset its member id, so the
   broker answers FENCED_INSTANCE_ID, which the consumer tells apart from a duplicate and turns into a
   refused commit and a new client); KIP-848, accepted (the member's epoch is still valid).
2. 16 s (longer if the takeover is late: on until it happened, plus 1 s), past max.poll.interval +
   session: the broker expires the member a session after its last heartbeat and the other member takes
   its partitions; on return the commit is refused, the partitions are reported lost, and the member
   rejoins (a rebalance) and consumes again: the pod does not end (no CommitFailedError, no
   exit 75).

Checked both times, from the members' own events: the loop did not exit; each refusal was a
``CommitRefused`` event and counted by ``static_consumer.commits.refused``; nothing handed out or
committed by the victim for a partition the other member owned; nothing lost; the group's committed
offsets never go backwards. The classic scenario runs on the stock broker (6 s is Kafka's minimum
classic session there); the KIP-848 one on the lab broker with a 6 s group session, since the stock
broker's 45 s minimum would make the second block last over 52 s and the point does not depend on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from _faults import SteadyProducer, assert_all_consumed_and_committed, logged_rebalances
from _side_by_side import side_by_side

from static_consumer_lab.brokers import KafkaCluster
from static_consumer_lab.children.group import Group
from static_consumer_lab.children.pauses import sampling_commits, stale_commits, stale_records, taken_over
from static_consumer_lab.children.processes import ConsumerProcess, Event, wait_until

PARTITIONS = 4
SESSION_MS = 6000  # heartbeats every 0.5 s
MAX_POLL_MS = 7000  # the settings need max.poll >= session
SHORT_BLOCK_S = 8.5  # expired at ~7 s, the broker would expire the member at ~13 s
LONG_BLOCK_S = 16.0  # the other member owns the partitions from ~13 s on (held longer if late)
REFUSED = "static_consumer.commits.refused"


def _block(
    victim: ConsumerProcess, trigger: Path, seconds: float, until: Callable[[float], bool] | None = None
) -> tuple[Event, Event]:
    """Make the victim's next batch block for ``seconds`` (with ``until``: at least that, and on until
    ``until(blocking_ts)`` holds, plus a second, at most a minute); its (blocking, unblocked) events."""
    victim.wait_for_kind("committed", timeout_s=30, after=time.time())
    trigger.write_text(f"{seconds} 60" if until else str(seconds))
    blocking = victim.wait_for(
        lambda e: e["kind"] == "blocking" and e["seconds"] == seconds, 30, f"a {seconds} s block"
    )
    if until is not None:
        wait_until(lambda: until(blocking["ts"]), 60, "what the block waits for")
        time.sleep(1.0)
        Path(f"{trigger}.release").touch()
    unblocked = victim.wait_for(
        lambda e: e["kind"] == "unblocked" and e["ts"] > blocking["ts"], seconds + 90, "the handler's return"
    )
    return blocking, unblocked


def _after(proc: ConsumerProcess, kind: str, at: float, timeout_s: float = 30.0) -> Event:
    return proc.wait_for(lambda e: e["kind"] == kind and e["ts"] >= at, timeout_s, f"{kind} after {at}")


def _refused(proc: ConsumerProcess) -> float:
    """The member's static_consumer.commits.refused total (its OpenTelemetry listener's)."""
    snapshots = proc.events("metrics")
    return snapshots[-1]["values"].get(REFUSED, 0) if snapshots else 0


def test_a_handler_blocked_past_max_poll_interval_costs_its_partitions_and_commits_nothing_stale(
    kafka_cluster: KafkaCluster,
    kafka_lab_cluster: KafkaCluster,
    kafka_group_factory: Callable[..., Group],
    lab_group_factory: Callable[..., Group],
    tmp_path: Path,
) -> None:
    """Classic on the stock broker, KIP-848 on the lab one (a 6 s group session; stock: 45 s), side by
    side."""
    brokers = {
        "classic": (kafka_cluster, kafka_group_factory),
        "consumer": (kafka_lab_cluster, lab_group_factory),
    }
    side_by_side(lambda protocol: _blocked_twice(protocol, *brokers[protocol], tmp_path / protocol))


def _blocked_twice(
    protocol: str, kafka_cluster: KafkaCluster, kafka_group_factory: Callable[..., Group], tmp_path: Path
) -> None:
    tmp_path.mkdir()
    bootstrap = kafka_cluster.bootstrap_servers
    trigger = tmp_path / "block"
    group = kafka_group_factory(
        PARTITIONS,
        protocol=protocol,
        session_ms=SESSION_MS,
        settings={"max_poll_interval_ms": MAX_POLL_MS},
        spec_extra=lambda name: {
            "batch": 100,
            **({"block": str(trigger), "otel": True} if name == "app-1" else {}),
        },
    )
    sampler = sampling_commits(bootstrap, group.group_id, group.topic, PARTITIONS)
    with SteadyProducer(bootstrap, group.topic) as producer, sampler as samples:
        group.form(["app-0", "app-1"])
        other, victim = group.members["app-0"], group.members["app-1"]
        owned = victim.assignment()
        rebalances = logged_rebalances(kafka_cluster, group.group_id)

        # 1. Past max.poll.interval, under max.poll.interval + session.
        blocking, unblocked = _block(victim, trigger, SHORT_BLOCK_S)
        lost = _after(victim, "lost", unblocked["ts"])
        back = _after(victim, "assigned", lost["ts"])
        outcome = victim.wait_for(
            lambda e: e["kind"] in ("committed", "commit_refused") and e["ts"] >= unblocked["ts"],
            30,
            "the blocked batch's commit",
        )
        why = outcome.get("error", "")
        print(
            f"{protocol}: {SHORT_BLOCK_S} s block: commit {outcome['kind']} {why}, lost "
            f"{(lost['ts'] - unblocked['ts']) * 1000:.0f} ms and back on "
            f"{sorted(p for _t, p in back['partitions'])} "
            f"{(back['ts'] - unblocked['ts']) * 1000:.0f} ms after the handler returned"
        )
        taken = [e for e in other.events("assigned") if blocking["ts"] < e["ts"] < back["ts"]]
        assert taken == [], "the other member got partitions while the broker still held the victim"
        assert {(t, p) for t, p in back["partitions"]} == owned
        assert outcome["kind"] == ("commit_refused" if protocol == "classic" else "committed"), outcome
        group.wait_stable(timeout_s=60, settle_s=1.0)
        if rebalances is not None:
            assert logged_rebalances(kafka_cluster, group.group_id) == rebalances, "the group rebalanced"

        # 2. Past max.poll.interval + session: the broker expires the member and the other takes over.
        # Held on until the other member took over: a loaded broker may expire the victim seconds late.
        blocking, unblocked = _block(
            victim, trigger, LONG_BLOCK_S, until=lambda since: taken_over(other, owned, since)
        )
        taken = [e for e in other.events("assigned") if blocking["ts"] < e["ts"] < unblocked["ts"]]
        assert taken, "the other member did not take the victim's partitions during the block"
        took_at = taken[0]["ts"] - blocking["ts"]
        refused = _after(victim, "commit_refused", unblocked["ts"])
        counted = victim.wait_for(
            lambda e: e["kind"] == "metrics" and e["event"] == "CommitRefused" and e["ts"] >= refused["ts"],
            10,
            "the refusal counted",
        )
        lost = _after(victim, "lost", unblocked["ts"])
        back = victim.wait_for(
            lambda e: e["kind"] == "assigned" and e["ts"] > lost["ts"] and bool(e["partitions"]),
            60,
            "a rejoin",
        )
        victim.wait_for(lambda e: e["kind"] == "records" and e["ts"] > back["ts"], 30, "records after it")
        why = refused["error"]
        print(
            f"{protocol}: {unblocked['ts'] - blocking['ts']:.1f} s block: the other member took over "
            f"{took_at:.1f} s into it; on "
            f"return: commit refused ({why}); back on {sorted(p for _t, p in back['partitions'])} "
            f"{back['ts'] - unblocked['ts']:.1f} s later"
        )
        # Not at max.poll.interval (a LeaveGroup would have moved them then): a session later.
        assert took_at > MAX_POLL_MS / 1000 + SESSION_MS / 2000, took_at
        # The typed event and the metric say so; the loop went on (no exit: checked below).
        assert why in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "FENCED_MEMBER_EPOCH", "FENCED_INSTANCE_ID")
        assert counted["values"][f"{REFUSED}[{why}]"] >= 1, counted
        wait_until(
            lambda: _refused(victim) == len(victim.events("commit_refused")), 10, "every refusal counted once"
        )
        other.wait_for(lambda e: e["kind"] == "committed" and e["ts"] > back["ts"], 30, "a commit after it")
        group.wait_stable(timeout_s=60, settle_s=1.0)
        assert victim.returncode is None and other.returncode is None, victim.stderr_tail()
        acked = producer.stop()

    began = group.all_processes()[0].events()[0]["ts"]
    assert stale_records(victim, [other], began) == []
    assert stale_commits(victim, [other], began) == []
    assert_all_consumed_and_committed(group, acked, samples)
