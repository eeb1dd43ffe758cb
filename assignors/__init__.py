"""Pure partition planners: functions of (members, partitions) -> plan, with no I/O.

Where they run: librdkafka cannot host an assignor written in Python, so nothing here takes
part in a group rebalance. The package serves two jobs instead:

* ``ordinal_plan`` computes the partitions a StatefulSet pod assigns to itself in manual
  assignment mode (no group membership, so no rebalance at all);
* ``range_plan`` and ``roundrobin_plan`` predict what librdkafka's built-in assignors will
  hand out, so ``compare`` can audit a live group and tests can pin behaviour down.

Members are ordered as librdkafka orders them (instance id when both members have one,
else member id), which is why static membership gives restart-stable plans. This package
depends on nothing but the standard library; ``static_consumer`` builds on it, never the
reverse.
"""

from assignors._audit import AuditReport, MemberMismatch, Overlap, compare
from assignors._builtin import range_plan, roundrobin_plan
from assignors._check import Planner, Violation, ViolationKind, check_plan, is_permutation_invariant
from assignors._order import is_mixed, librdkafka_order, member_cmp
from assignors._ordinal import ordinal_plan, ordinal_plan_all
from assignors._types import Member, Partition, Plan, Strategy, plan_by_instance_id

__all__ = [
    "AuditReport",
    "Member",
    "MemberMismatch",
    "Overlap",
    "Partition",
    "Plan",
    "Planner",
    "Strategy",
    "Violation",
    "ViolationKind",
    "check_plan",
    "compare",
    "is_mixed",
    "is_permutation_invariant",
    "librdkafka_order",
    "member_cmp",
    "ordinal_plan",
    "ordinal_plan_all",
    "plan_by_instance_id",
    "range_plan",
    "roundrobin_plan",
]
