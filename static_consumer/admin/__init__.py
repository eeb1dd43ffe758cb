"""Operator tools: inspect a group and remove static members from outside the consumers.

Static membership moves liveness to the operator: a member that died or was scaled away keeps its
partitions until its session times out, because it never sends LeaveGroup. These tools send that
LeaveGroup on its behalf (by ``group.instance.id``), describe and audit groups, and drive the
``static-consumer`` command. The consumer never imports this package: its own few broker calls live in
``static_consumer._kafka``.

- :mod:`~static_consumer.admin.members`: :func:`describe_group`, :func:`remove_members`, :func:`scale_down`
- :mod:`~static_consumer.admin.audit`: :func:`audit_group`, the live group against the assignor model
- :mod:`~static_consumer.admin.redrive`: :func:`redrive`, dead-lettered records back to their source topics
- :mod:`~static_consumer.admin.cli`: the ``static-consumer`` command (``_render`` formats its output)
"""

from static_consumer._kafka.groups import GroupDescription, GroupMember, RemovalFailure, RemovalResult
from static_consumer.admin.audit import GroupAudit, audit_group
from static_consumer.admin.members import DEFAULT_REASON, describe_group, remove_members, scale_down
from static_consumer.admin.redrive import RedriveResult, redrive

__all__ = [
    "DEFAULT_REASON",
    "GroupAudit",
    "GroupDescription",
    "GroupMember",
    "RedriveResult",
    "RemovalFailure",
    "RemovalResult",
    "audit_group",
    "describe_group",
    "redrive",
    "remove_members",
    "scale_down",
]
