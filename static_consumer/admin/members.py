"""Operate static members from outside the consumers: describe a group, remove members, scale down.

Static membership moves liveness to the operator: a static member that died or was scaled away keeps
its partitions until ``session_timeout_ms`` expires (up to 30 minutes), because it never sends
LeaveGroup. :func:`remove_members` sends that LeaveGroup on its behalf (LeaveGroup v3, by
``group.instance.id``), so the broker rebalances at once; confluent-kafka has no API for it and Kafka's
own CLI no option. :func:`scale_down` does the same for the pods a StatefulSet removed.

Only remove members whose process is gone: a live member that is removed rejoins under the same
instance id, which is one more rebalance, not a departure.

All functions take the same :class:`~static_consumer.settings.ConsumerSettings` as the consumer
(security settings included); ``group_id`` defaults to ``settings.group_id``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from static_consumer._base.errors import ConfigurationError, UnknownInstanceIdError
from static_consumer._core.identity import validate_instance_id
from static_consumer._kafka import kafka_python
from static_consumer._kafka.describe import describe_group, describe_with
from static_consumer._kafka.groups import GroupDescription, RemovalResult
from static_consumer._kafka.members import leave
from static_consumer.admin._ordinals import instance_id_for, ordinal_of, ordinal_pattern, worker_of
from static_consumer.settings import ConsumerSettings

DEFAULT_REASON = "removed by static-consumer (the member's process is gone)"


def remove_members(
    settings: ConsumerSettings,
    instance_ids: Iterable[str],
    *,
    group_id: str | None = None,
    missing: str = "error",
    reason: str = DEFAULT_REASON,
) -> RemovalResult:
    """Remove static members by ``group.instance.id`` with one LeaveGroup batch; the broker rebalances
    their partitions to the remaining members at once instead of after the session timeout.

    ``missing="error"`` (default) refuses, before removing anything, ids that are not in the group
    (UnknownInstanceIdError, exit 78); ``missing="skip"`` reports them in ``RemovalResult.absent``.
    Broker refusals per member are in ``RemovalResult.failed`` (``ok`` is False then).
    """
    if missing not in ("error", "skip"):
        raise ValueError(f"missing must be 'error' or 'skip', not {missing!r}")
    group = group_id or settings.group_id
    wanted = list(dict.fromkeys(validate_instance_id(i) for i in instance_ids))
    if not wanted:
        raise ConfigurationError("no instance ids to remove: give at least one --instance-id")
    with kafka_python.kafka_admin(settings, f"remove members from group {group}", reads_group=True) as admin:
        description = describe_with(admin, settings, group)
        unknown = [i for i in wanted if i not in description.instance_ids]
        if unknown and missing == "error":
            raise UnknownInstanceIdError(_unknown_message(description, unknown))
        present = [i for i in wanted if i in description.instance_ids]
        removed, absent, failed = leave(admin, group, present, reason)
    return RemovalResult(group, removed, tuple(unknown) + absent, failed)


def _unknown_message(description: GroupDescription, unknown: list[str]) -> str:
    known = ", ".join(sorted(description.instance_ids)) or "none"
    what = "does not exist" if not description.exists else f"is {description.state}"
    return (
        f"not static members of group {description.group_id!r} (which {what}): {', '.join(unknown)}. "
        f"Static members now: {known}. Nothing was removed; check the ids (they are the consumers' "
        "group.instance.id, e.g. the pod names) and the group id"
    )


def scale_down(
    settings: ConsumerSettings,
    group_id: str | None = None,
    *,
    replicas: int | None = None,
    ordinals: Iterable[int] = (),
    instance_ids: Iterable[str] = (),
    statefulset: str | None = None,
    processes: int | None = None,
    reason: str = "StatefulSet scaled down",
) -> RemovalResult:
    """Remove the members of pods a StatefulSet no longer has, so their partitions move at once.

    Select them by ``replicas`` (every member whose instance id maps, through
    ``settings.instance_id_template``, to an ordinal >= ``replicas``; a pool worker's ``{pod id}-{k}``
    maps to its pod's ordinal), by explicit ``ordinals`` (their pods' pool workers too), or by
    ``instance_ids``. ``processes``: the pods now run process pools of that many workers, so every
    member of the StatefulSet the pools do not use is removed too: workers ``k >= processes`` and the
    pods' own single-process ids. ``statefulset`` is the StatefulSet name, needed when the template uses
    ``{pod}`` or ``{statefulset}``. Idempotent: members already gone are reported in ``absent``, not
    refused, so a retried hook succeeds. Run it only after the removed pods (or, for ``processes``, the
    rollout) have finished.
    """
    group = group_id or settings.group_id
    template = settings.instance_id_template
    ordinals = list(ordinals)
    chosen = [instance_id_for(template, o, statefulset=statefulset, group_id=group) for o in ordinals]
    chosen.extend(validate_instance_id(i) for i in instance_ids)
    if replicas is None and processes is None and not chosen:
        raise ConfigurationError("scale_down needs replicas, processes, ordinals or instance_ids")
    if replicas is not None and replicas < 0:
        raise ConfigurationError(f"replicas must be >= 0, not {replicas}")
    if processes is not None and processes < 1:
        raise ConfigurationError(f"processes must be >= 1, not {processes}")
    with kafka_python.kafka_admin(settings, f"scale down group {group}", reads_group=True) as admin:
        description = describe_with(admin, settings, group)
        if replicas is not None or processes is not None or ordinals:
            pattern = ordinal_pattern(template, statefulset=statefulset, group_id=group)
            chosen.extend(
                i
                for i in sorted(description.instance_ids)
                if ordinal_of(i, pattern) in ordinals or _dropped(i, pattern, replicas, processes)
            )
        wanted = list(dict.fromkeys(chosen))
        present = [i for i in wanted if i in description.instance_ids]
        removed, absent, failed = leave(admin, group, present, reason)
    unknown = tuple(i for i in wanted if i not in description.instance_ids)
    return RemovalResult(group, removed, unknown + absent, failed)


def _dropped(instance_id: str, pattern: re.Pattern[str], replicas: int | None, processes: int | None) -> bool:
    """Whether the member ``instance_id`` of the StatefulSet is one its pods no longer run."""
    ordinal = ordinal_of(instance_id, pattern)
    if ordinal is None:
        return False  # not a member of this StatefulSet's pods
    if replicas is not None and ordinal >= replicas:
        return True
    if processes is None:
        return False
    worker = worker_of(instance_id, pattern)
    return worker is None or worker >= processes


__all__ = ["DEFAULT_REASON", "describe_group", "remove_members", "scale_down"]
