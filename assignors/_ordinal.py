"""Ordinal planner: manual assignment for StatefulSet pods, no group rebalance.

Pod ``k`` of ``N`` computes its partitions from ``(k, N, partitions_per_topic)`` alone, so
every pod agrees without talking to the others. The scheme is built for the two events a
StatefulSet produces: adding the pod with the next ordinal and removing the highest one.

Each topic is planned on its own (so a topic's partition count never disturbs another
topic). With ``q, r = divmod(P_t, N)`` every pod owns ``q`` of the topic's partitions and
``r`` pods own one more: per-topic counts differ by at most one.

* **Minimal movement.** Going from ``N`` to ``N + 1`` pods, every existing pod keeps a
  prefix of what it owned and hands the rest to the new pod; nothing moves between old
  pods. The partitions that move are exactly the new pod's share, ``P_t // (N + 1)`` or one
  more, per topic: at most ``P // (N + 1) + topics`` in all, against a floor of
  ``P // (N + 1)`` for any balanced scheme. Removing the highest ordinal is the same step
  reversed, so the same partitions move back. (Contiguous blocks, as ``range`` uses, shift
  almost every boundary instead; ``bench/bench_assignors.py`` prints measured numbers.)
* **Which pods get the extra partition.** The ``r`` pods ranked first by a fixed per-topic
  key ``frac(j * phi + h(topic))`` (phi the golden ratio, ``h`` a hash of the topic name).
  A fixed ranking keeps "has the extra" nested as ``N`` grows, which is what lets old pods
  only shrink; a per-topic offset spreads the extras of different topics over different
  pods, so overall counts stay close (they differ by at most the number of topics, usually
  far less) instead of piling onto pod 0 as in ``range``.

Pod ``j``'s partitions of a topic, for any ``N > j``, are a prefix of one fixed list
``L_j``: ``L_0`` is ``0..P_t-1`` and ``L_k`` is what pods ``0..k-1`` hand over when the
``k + 1``-th pod joins. Computing pod ``k``'s plan replays ``k`` such steps per topic.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Mapping

from assignors._types import Partition, validate_partition_counts

_PHI = 0.6180339887498949  # (sqrt(5) - 1) / 2: consecutive ordinals land far apart mod 1


def ordinal_plan(
    ordinal: int, replicas: int, partitions_per_topic: Mapping[str, int]
) -> tuple[Partition, ...]:
    """Partitions owned by pod ``ordinal`` when ``replicas`` pods run, sorted."""
    _validate(replicas, partitions_per_topic)
    if not 0 <= ordinal < replicas:
        raise ValueError(f"ordinal must be in [0, {replicas}), got {ordinal}")
    owned: list[Partition] = []
    for topic in sorted(partitions_per_topic):
        count = partitions_per_topic[topic]
        if count == 0:
            continue
        lists, _ = _handover(topic, count, ordinal)
        offset = _offset(topic)
        mine = _key(ordinal, offset)
        rank = sum(1 for j in range(replicas) if (_key(j, offset), j) < (mine, ordinal))
        per_pod, extra = divmod(count, replicas)
        share = per_pod + (1 if rank < extra else 0)
        owned.extend(Partition(topic, p) for p in sorted(lists[ordinal][:share]))
    return tuple(owned)


def ordinal_plan_all(
    replicas: int, partitions_per_topic: Mapping[str, int]
) -> dict[int, tuple[Partition, ...]]:
    """Every pod's partitions, keyed by ordinal ``0..replicas-1``."""
    _validate(replicas, partitions_per_topic)
    owned: list[list[Partition]] = [[] for _ in range(replicas)]
    for topic in sorted(partitions_per_topic):
        count = partitions_per_topic[topic]
        if count == 0:
            continue
        lists, ranked = _handover(topic, count, replicas - 1)
        per_pod, extra = divmod(count, replicas)
        with_extra = {j for _, j in ranked[:extra]}
        for j in range(replicas):
            share = per_pod + (1 if j in with_extra else 0)
            owned[j].extend(Partition(topic, p) for p in sorted(lists[j][:share]))
    return {j: tuple(parts) for j, parts in enumerate(owned)}


def _validate(replicas: int, partitions_per_topic: Mapping[str, int]) -> None:
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    validate_partition_counts(partitions_per_topic)


def _offset(topic: str) -> float:
    # A stable hash (not hash(), which is salted per process): every pod must agree.
    return int.from_bytes(hashlib.sha256(topic.encode()).digest()[:8], "big") / 2.0**64


def _key(ordinal: int, offset: float) -> float:
    # IEEE arithmetic is correctly rounded, so every pod computes the same float.
    return (ordinal * _PHI + offset) % 1.0


def _handover(topic: str, count: int, last: int) -> tuple[list[list[int]], list[tuple[float, int]]]:
    """``L_0 .. L_last`` for one topic, and the ranking of pods ``0..last`` by key."""
    offset = _offset(topic)
    lists = [list(range(count))]
    ranked = [(_key(0, offset), 0)]
    for n in range(1, last + 1):
        # Step from n pods to n + 1: pod n joins; old pods shrink to their new share.
        old_q, old_r = divmod(count, n)
        new_q, new_r = divmod(count, n + 1)
        entry = (_key(n, offset), n)
        pos = bisect_left(ranked, entry)
        received: list[int] = []
        if old_q == new_q:
            # Same base share, fewer extras (new_r = old_r - old_q): pods ranked just
            # below the new cut-off drop their extra partition, the one at index old_q.
            start = new_r - 1 if pos < new_r else new_r
            received.extend(lists[j][old_q] for _, j in ranked[start:old_r])
        else:
            had_extra = {j for _, j in ranked[:old_r]}
            new_ranked = ranked[:pos] + [entry] + ranked[pos:]
            keeps_extra = {j for _, j in new_ranked[:new_r]}
            for j in range(n):
                keep = new_q + (1 if j in keeps_extra else 0)
                had = old_q + (1 if j in had_extra else 0)
                received.extend(lists[j][keep:had])
        ranked.insert(pos, entry)
        lists.append(received)
    return lists, ranked
