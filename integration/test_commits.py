"""Commits that do not wait for the broker, on a real broker and both protocols (docs/semantics.md,
"Commits: at-least-once"): a member commits every batch at full rate while a second member joins (a
revoke) and then closes, with the group's committed offsets sampled all along."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from _side_by_side import side_by_side

from static_consumer import ConsumerSettings, StaticConsumer
from static_consumer._base.errors import CommitFailedError, RetriableError
from static_consumer_lab.brokers import produce
from static_consumer_lab.brokers.kafka_ops import committed_offsets
from static_consumer_lab.children.pauses import sampling_commits
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import static_spec
from static_consumer_lab.producer import SteadyProducer

PARTITIONS = 6
BACKLOG = 30_000  # read at full rate before the second member comes
RATE_PER_S = 3000
BATCH = 200


def test_commits_that_do_not_wait_keep_every_promise_through_a_revoke_and_a_close(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    """The classic and the KIP-848 group side by side."""
    side_by_side(
        lambda protocol: _promises_kept(
            protocol,
            kafka_bootstrap_servers,
            kafka_topic_factory,
            kafka_group_id_factory,
            kafka_consumer_process_factory,
        )
    )


def _promises_kept(
    protocol: str,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    bootstrap = kafka_bootstrap_servers
    topic, group = kafka_topic_factory(PARTITIONS), kafka_group_id_factory()
    classic = {"session_timeout_ms": 10000} if protocol == "classic" else {}
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=group,
        topics=(topic,),
        instance_id="a-0",
        protocol=protocol,
        connect_timeout_s=10,
        shutdown_timeout_s=10,
        **classic,
    )
    backlog = produce(bootstrap, topic, BACKLOG)
    seen: Counter[tuple[int, int]] = Counter()  # (partition, offset) -> times the first member got it
    refused: list[str] = []
    other: ConsumerProcess | None = None
    with sampling_commits(bootstrap, group, topic, PARTITIONS, every_s=0.05) as samples:
        with SteadyProducer(bootstrap, topic, rate_per_s=RATE_PER_S) as producer:
            consumer = StaticConsumer(settings)
            with consumer:
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    batch = consumer.consume(BATCH, 0.2)
                    seen.update((r.partition, r.offset) for r in batch)
                    owned = consumer.assignment
                    try:
                        sent = consumer.commit(batch)  # does not wait for the broker
                    except (CommitFailedError, RetriableError) as exc:
                        refused.append(str(exc))  # the records come again: at-least-once
                        continue
                    # Nothing is committed for a partition this member does not own.
                    assert set(sent) <= owned, (sent, owned)
                    if other is None and len(seen) >= backlog:
                        spec = static_spec(bootstrap, group, [topic], "b-0", protocol=protocol, **classic)
                        spec["batch"] = BATCH
                        other = kafka_consumer_process_factory(spec, name="b-0")
                    if other is not None and other.records() and len(other.records()) > RATE_PER_S:
                        break  # the second member took partitions over and reads them
                assert other is not None and other.records(), "the second member never read a record"
                second = other
                producer.stop()
                produced = backlog + producer.acked

                def consumed() -> int:
                    return len(set(seen) | {(p, o) for _t, p, o in second.records()})

                while consumed() < produced and time.monotonic() < deadline:
                    batch = consumer.consume(BATCH, 0.2)
                    seen.update((r.partition, r.offset) for r in batch)
                    consumer.commit(batch)
                mine = {tp.partition for tp in consumer.assignment}
            # Closed cleanly: everything it handed out and processed is committed, no more, no less.
            last = {p: max((o + 1 for q, o in seen if q == p), default=None) for p in mine}
            committed = committed_offsets(bootstrap, group, topic, PARTITIONS)
            assert {p: committed.get(p) for p in mine} == last
            wait_until(lambda: consumed() >= produced, 60, f"all {produced} records consumed")
            assert second.stop() == 0, second.stderr_tail()
    theirs = Counter((p, o) for _t, p, o in second.records())
    both = set(seen) & set(theirs)
    print(
        f"{protocol}: {produced} records, {len(seen)} read by a-0 ({len(mine)} partitions at the end), "
        f"{len(theirs)} by b-0; {len(refused)} commits refused; {len(samples)} samples of the commits"
    )
    assert consumed() == produced  # at-least-once: nothing lost across the revoke and the close
    # The revoke committed what a-0 processed before b-0 started from the committed offsets: nothing
    # handed out twice (and no record twice to the same member).
    assert not both and max(seen.values()) == 1 and max(theirs.values()) == 1, (len(both), refused)
    # The committed offsets never went backwards, sampled every 50 ms through both members' commits.
    assert len(samples) > 20
    for before, after in zip(samples, samples[1:], strict=False):
        assert all(after.get(p, -1) >= offset for p, offset in before.items()), (before, after)
