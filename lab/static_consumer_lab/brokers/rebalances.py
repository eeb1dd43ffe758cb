"""Whether a consumer group rebalanced, in the broker's own words, under either group protocol.

Apache Kafka 4.x logs, at INFO, on the group's coordinator:

- classic protocol: ``Stabilized group G generation N with M members.`` when a rebalance completes;
- consumer protocol (KIP-848): ``[GroupId G] Bumped group epoch to N ...`` whenever the group's
  membership or subscriptions change (a member joins, leaves for good, is fenced or expires). A static
  member that replaces itself (a restart within its session) does not bump it, and a coordinator
  fail-over does not either: the new coordinator loads the epoch with the group.

No client reads these numbers: DescribeGroups has no generation, confluent-kafka 2.16's
``ConsumerGroupDescription`` carries no epoch, and kafka-python 3.0 has no ConsumerGroupDescribe. So
the broker log is the source (the JVM harness keeps one per node: ``JvmKafkaCluster.log_paths()``;
every node's log is read, since the coordinator moves). A group migrated between the protocols has
both kinds: the consumer group continues from the classic generation, and back.

Use::

    before = cluster.group_rebalances(group_id)       # JvmKafkaCluster; or group_rebalances(paths, id)
    ...                                                # restart members, restart brokers
    assert cluster.group_rebalances(group_id) == before, "the group rebalanced"

Each :class:`Rebalance` has ``kind`` (``"generation"`` or ``"epoch"``), ``value`` and ``ts`` (the log's
timestamp, JVM local time, millisecond precision); lists are in time order, each (kind, value) once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

_STAMP = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] "
Kind = Literal["generation", "epoch"]
_PATTERNS: tuple[tuple[Kind, re.Pattern[str]], ...] = (
    ("generation", re.compile(_STAMP + r".*?Stabilized group (\S+) generation (\d+)", re.MULTILINE)),
    ("epoch", re.compile(_STAMP + r".*?\[GroupId (\S+)\] Bumped group epoch to (\d+)", re.MULTILINE)),
)


@dataclass(frozen=True, slots=True)
class Rebalance:
    """One completed classic rebalance (``generation``) or KIP-848 group epoch bump (``epoch``)."""

    kind: Kind
    group: str
    value: int
    ts: float


def _ts(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def parse(text: str, groups: Iterable[str]) -> list[Rebalance]:
    """The rebalances of ``groups`` in one broker log's ``text``, in time order."""
    wanted = set(groups)
    found = [
        Rebalance(kind, m.group(2), int(m.group(3)), _ts(m.group(1)))
        for kind, pattern in _PATTERNS
        for m in pattern.finditer(text)
        if m.group(2) in wanted
    ]
    return sorted(found, key=lambda r: (r.ts, r.group, r.value))


def read(paths: Iterable[Path], groups: Iterable[str]) -> list[Rebalance]:
    """The rebalances of ``groups`` in every log of ``paths`` (missing files skipped), each once."""
    wanted = list(groups)
    seen: set[tuple[str, str, int]] = set()
    out: list[Rebalance] = []
    for path in paths:
        if not path.exists():
            continue
        for found in parse(path.read_text(errors="replace"), wanted):
            if (found.kind, found.group, found.value) not in seen:
                seen.add((found.kind, found.group, found.value))
                out.append(found)
    return sorted(out, key=lambda r: (r.ts, r.group, r.value))


def group_rebalances(paths: Iterable[Path], group_id: str) -> list[Rebalance]:
    """Every rebalance of ``group_id`` (both protocols) logged so far: compare two calls for equality."""
    return read(paths, [group_id])


__all__ = ["Rebalance", "group_rebalances", "parse", "read"]
