"""close() versus leave_group() on a real broker, for both group protocols.

close() keeps a static member in the group until its session timeout, so a restart within that time gets
the same partitions and nobody else notices; leave_group() (scale-down) removes it at once, so the others
take its partitions now instead of after the timeout.

Classic: close() sends no LeaveGroup; leave_group() unsubscribes, which sends LeaveGroup.
Consumer protocol (KIP-848): close() sends a *static* leave (member epoch -2), after which the broker
keeps the member, and its partitions, until the session timeout; leave_group() removes it with an admin
LeaveGroup by instance id. The observable behaviour is the same for both protocols, which is the point.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from _side_by_side import side_by_side

from static_consumer_lab.brokers import describe_consumer_group
from static_consumer_lab.children.group import CONSUMER_PROTOCOL_SESSION_MS, Group
from static_consumer_lab.children.processes import wait_until

pytestmark = pytest.mark.lab_broker(
    "10 s sessions: the test waits for a closed member to expire; close vs leave does not depend on the "
    "session length"
)

PARTITIONS = 4
CLASSIC_SESSION_MS = 10000  # static_spec's default
SESSION_S = {"classic": CLASSIC_SESSION_MS / 1000, "consumer": CONSUMER_PROTOCOL_SESSION_MS / 1000}
EXPIRY_SLACK_S = 30  # the coordinator checks expiry on its own timer; only an upper bound for the wait


def _leaving(name: str | None) -> Callable[[str], dict[str, Any]]:
    """Members app-0 and app-1; ``name`` calls leave_group() instead of close() on SIGTERM."""
    return lambda member: {"leave_on_exit": member == name}


def _instance_ids(group: Group) -> list[str]:
    members = describe_consumer_group(group.bootstrap, group.group_id).members
    return sorted(m.group_instance_id for m in members)


def _everything(group: Group) -> set[tuple[str, int]]:
    return {(group.topic, p) for p in range(PARTITIONS)}


def test_close_keeps_the_static_member_until_the_session_timeout(
    kafka_group_factory: Callable[..., Group],
) -> None:
    """The classic and the KIP-848 group side by side."""
    side_by_side(lambda protocol: _close_keeps(protocol, kafka_group_factory))


def _close_keeps(
    protocol: str,
    kafka_group_factory: Callable[..., Group],
) -> None:
    group = kafka_group_factory(
        PARTITIONS,
        protocol=protocol,
        spec_extra=_leaving(None),
    )
    group.form(("app-0", "app-1"))
    stable_since = time.time()
    survivor_before = group.owned()["app-0"]

    closed = group.stop("app-1")  # SIGTERM -> commit -> close(); asserts exit code 0
    assert closed.wait_for_kind("closed", timeout_s=1)["left_group"] is False
    closed_at = closed.wait_for_kind("exit", timeout_s=1)["ts"]

    # Right after close() the broker still lists the member, and its partitions stay with it: the
    # surviving member neither gave up nor gained anything.
    assert _instance_ids(group) == ["app-0", "app-1"]
    assert group.members["app-0"].assignment() == survivor_before
    assert group.revocations_since(stable_since) == 0

    wait_until(
        lambda: _instance_ids(group) == ["app-0"],
        SESSION_S[protocol] + EXPIRY_SLACK_S,
        "the closed member to expire",
    )
    listed_for = time.time() - closed_at
    print(f"{protocol}: closed static member listed for {listed_for:.1f} s after close()")
    # Generous lower bound: it was not removed early (half the session timeout).
    assert listed_for >= SESSION_S[protocol] / 2

    # Once expired, the group rebalances and the survivor takes every partition.
    wait_until(lambda: group.members["app-0"].assignment() == _everything(group), 60, "app-0 owning all")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_leave_group_removes_the_static_member_at_once(
    protocol: str,
    kafka_group_factory: Callable[..., Group],
) -> None:
    group = kafka_group_factory(
        PARTITIONS,
        protocol=protocol,
        spec_extra=_leaving("app-1"),
    )
    group.form(("app-0", "app-1"))
    left = group.stop("app-1")  # SIGTERM -> commit -> leave_group(); asserts exit code 0
    assert left.wait_for_kind("closed", timeout_s=1)["left_group"] is True
    exited_at = left.wait_for_kind("exit", timeout_s=1)["ts"]

    # leave_group() returned only after the broker removed the member: no waiting for its session.
    assert _instance_ids(group) == ["app-0"]
    wait_until(
        lambda: group.members["app-0"].assignment() == _everything(group),
        SESSION_S[protocol] / 2,  # well before the session timeout that close() would have waited for
        "app-0 owning every partition",
    )
    print(f"{protocol}: survivor owned everything {time.time() - exited_at:.1f} s after leave_group()")
