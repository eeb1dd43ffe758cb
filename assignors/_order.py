"""Member ordering as librdkafka's range and roundrobin assignors sort members.

librdkafka's ``rd_kafka_group_member_cmp`` compares two members by group instance id when both
have one, otherwise by member id, bytewise (``memcmp``, shorter string first on a common
prefix). Python compares ``str`` by code point, which orders exactly like UTF-8 bytes, so
plain string comparison reproduces it.

When every member is static, or none is, that comparator is a total order and sorting is
unambiguous. In a *mixed* group it can be cyclic (A < B by member id, B < C by member id,
C < A by instance id), and librdkafka's ``qsort`` result then depends on the order members
arrived in. We still need one deterministic answer, so :func:`librdkafka_order` sorts static
members by instance id, dynamic members by member id, and merges the two runs comparing by
member id (the comparator librdkafka applies across the two kinds). The result agrees with
every static/static and dynamic/dynamic comparison, and equals librdkafka's order whenever
the comparator happens to be consistent on the given set. :func:`is_mixed` lets callers
flag the remaining cases as unpredictable.
"""

from __future__ import annotations

from collections.abc import Iterable

from assignors._types import Member


def member_cmp(a: Member, b: Member) -> int:
    """Three-way comparison with the semantics of ``rd_kafka_group_member_cmp``."""
    if a.instance_id is not None and b.instance_id is not None:
        x, y = a.instance_id, b.instance_id
    else:
        x, y = a.member_id, b.member_id
    return (x > y) - (x < y)


def is_mixed(members: Iterable[Member]) -> bool:
    """True when some members have an instance id and some do not."""
    kinds = {m.instance_id is None for m in members}
    return len(kinds) == 2


def librdkafka_order(members: Iterable[Member]) -> list[Member]:
    """Members in the order librdkafka's range/roundrobin assignors process them.

    Ties on instance id (which a real group cannot have) fall back to member id so the
    output never depends on input order.
    """
    static: list[Member] = []
    dynamic: list[Member] = []
    for m in members:
        (dynamic if m.instance_id is None else static).append(m)
    static.sort(key=lambda m: (m.instance_id, m.member_id))
    dynamic.sort(key=lambda m: m.member_id)
    if not static or not dynamic:
        return static or dynamic
    return _merge_by_member_id(static, dynamic)


def _merge_by_member_id(static: list[Member], dynamic: list[Member]) -> list[Member]:
    merged: list[Member] = []
    i = j = 0
    while i < len(static) and j < len(dynamic):
        if static[i].member_id <= dynamic[j].member_id:
            merged.append(static[i])
            i += 1
        else:
            merged.append(dynamic[j])
            j += 1
    merged.extend(static[i:])
    merged.extend(dynamic[j:])
    return merged
