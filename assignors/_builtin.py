"""Predictions of librdkafka's built-in ``range`` and ``roundrobin`` assignors.

librdkafka cannot host a Python assignor, so these never *make* an assignment: they predict
what the group leader's librdkafka will compute, for audits and for tests. Both follow
librdkafka 2.x (checked against its ``rdkafka_range_assignor.c`` and
``rdkafka_roundrobin_assignor.c``) for consumers without ``client.rack``; the rack-aware
range variant is not modelled.

Common rules taken from librdkafka's eligible-topic mapping: a topic takes part only if it
exists (is a key of ``partitions_per_topic``) and at least one member subscribes to it;
subscribed topics that do not exist are ignored; unsubscribed topics stay unassigned.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping

from assignors._order import is_mixed, librdkafka_order
from assignors._types import (
    Member,
    Partition,
    Plan,
    validate_members,
    validate_partition_counts,
)


def range_plan(members: Iterable[Member], partitions_per_topic: Mapping[str, int]) -> Plan:
    """Predict librdkafka's ``range`` assignment.

    Per topic, independently: the topic's subscribers are sorted (instance id, else member
    id), the partitions are cut into contiguous blocks of ``P // n``, and the first
    ``P % n`` subscribers get one partition more. A member's blocks from different topics
    are unrelated, which is why range piles extra partitions onto the first members.
    """
    group = validate_members(members)
    validate_partition_counts(partitions_per_topic)
    # A consistent comparator (not mixed) orders any subset like the full sort, so sort
    # once; a mixed group is sorted per topic, as librdkafka sorts each topic's list.
    full_order = None if is_mixed(group) else librdkafka_order(group)
    assigned: dict[str, list[Partition]] = {m.member_id: [] for m in librdkafka_order(group)}
    for topic in sorted(partitions_per_topic):
        if full_order is None:
            subscribers = librdkafka_order(m for m in group if topic in m.subscription)
        else:
            subscribers = [m for m in full_order if topic in m.subscription]
        if not subscribers:
            continue
        count = partitions_per_topic[topic]
        parts = [Partition(topic, p) for p in range(count)]
        per_member, extra = divmod(count, len(subscribers))
        for i, member in enumerate(subscribers):
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            assigned[member.member_id].extend(parts[start : start + length])
    return {member_id: tuple(parts) for member_id, parts in assigned.items()}


def roundrobin_plan(members: Iterable[Member], partitions_per_topic: Mapping[str, int]) -> Plan:
    """Predict librdkafka's ``roundrobin`` assignment.

    All members are sorted once; topics are visited in name order and their partitions in
    numeric order. One cursor walks the sorted members cyclically across *all* topics; for
    each partition it advances to the next member subscribed to that topic (skipping the
    others) and assigns the partition there. With identical subscriptions the counts differ
    by at most one; with differing subscriptions no balance is promised.
    """
    group = validate_members(members)
    validate_partition_counts(partitions_per_topic)
    order = librdkafka_order(group)
    assigned: list[list[Partition]] = [[] for _ in order]
    cursor = -1  # index of the member that got the previous partition
    for topic in sorted(partitions_per_topic):
        count = partitions_per_topic[topic]
        subscribers = [i for i, m in enumerate(order) if topic in m.subscription]
        if not subscribers or count == 0:
            continue
        k = len(subscribers)
        # The first partition goes to the first subscriber after the cursor (wrapping);
        # every later one to the next subscriber, so the walk is a fixed cycle.
        start = bisect_right(subscribers, cursor) % k
        parts = [Partition(topic, p) for p in range(count)]
        for offset in range(min(k, count)):
            assigned[subscribers[(start + offset) % k]].extend(parts[offset::k])
        cursor = subscribers[(start + count - 1) % k]
    return {m.member_id: tuple(parts) for m, parts in zip(order, assigned, strict=True)}
