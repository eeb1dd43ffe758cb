"""StatefulSet ordinals <-> instance ids, through ``instance_id_template``. Pure.

Scale-down needs the inverse of identity resolution: which members of the group belong to the pods a
StatefulSet just removed. Both directions go through the same template the pods used, so a Job that
shares the StatefulSet's environment (``STATIC_CONSUMER_INSTANCE_ID_TEMPLATE``) finds exactly them.

A pod that runs a process pool (``static_consumer.pool``) has one member per worker, ``{pod id}-{k}``:
the patterns match those ids too, with the worker in their ``worker`` group (None for a pod's own id).
So ``orders-2-1`` is worker 1 of pod ``orders-2``; an id of a *StatefulSet* named ``orders-2`` would read
the same, which is why two StatefulSets whose names differ by a ``-<n>`` suffix must not share a group
(docs/pool.md).
"""

from __future__ import annotations

import re
import string

from static_consumer._base.errors import ConfigurationError
from static_consumer._core.identity import check_template, validate_instance_id

_ORDINAL = r"(?P<ordinal>0|[1-9][0-9]*)"  # Kubernetes writes ordinals without leading zeros
_WORKER = r"(?:-(?P<worker>0|[1-9][0-9]*))?"  # a pool worker's suffix, as static_consumer.pool appends it


def _need_statefulset(template: str, statefulset: str | None) -> str:
    if statefulset:
        return statefulset
    if check_template(template) & {"pod", "statefulset"}:
        raise ConfigurationError(
            f"instance_id_template {template!r} uses {{pod}} or {{statefulset}}: give the StatefulSet name "
            "(--statefulset) so ordinals can be turned into instance ids"
        )
    return ""


def instance_id_for(template: str, ordinal: int, *, statefulset: str | None, group_id: str) -> str:
    """The ``group.instance.id`` the pod with ``ordinal`` resolves to (as ``resolve_identity`` does)."""
    if ordinal < 0:
        raise ConfigurationError(f"ordinal {ordinal} is negative; StatefulSet ordinals start at 0")
    name = _need_statefulset(template, statefulset)
    rendered = template.format(pod=f"{name}-{ordinal}", statefulset=name, ordinal=ordinal, group=group_id)
    return validate_instance_id(rendered)


def ordinal_pattern(template: str, *, statefulset: str | None, group_id: str) -> re.Pattern[str]:
    """A regex that matches exactly the instance ids ``template`` gives the StatefulSet's pods and their
    pool workers; its ``ordinal`` group is the pod's ordinal, its ``worker`` group the worker (or None)."""
    check_template(template)
    name = _need_statefulset(template, statefulset)
    parts: list[str] = []
    seen_ordinal = False

    def ordinal() -> str:
        nonlocal seen_ordinal
        # A template may use the ordinal twice ({pod} and {ordinal}); both must be the same number.
        text = "(?P=ordinal)" if seen_ordinal else _ORDINAL
        seen_ordinal = True
        return text

    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field == "pod":
            parts.append(re.escape(f"{name}-") + ordinal())
        elif field == "ordinal":
            parts.append(ordinal())
        elif field == "statefulset":
            parts.append(re.escape(name))
        elif field == "group":
            parts.append(re.escape(group_id))
    return re.compile("".join(parts) + _WORKER)


def ordinal_of(instance_id: str, pattern: re.Pattern[str]) -> int | None:
    """The ordinal encoded in ``instance_id``, or None if it does not belong to the StatefulSet."""
    match = pattern.fullmatch(instance_id)
    return int(match["ordinal"]) if match else None


def worker_of(instance_id: str, pattern: re.Pattern[str]) -> int | None:
    """The pool worker encoded in ``instance_id`` (``orders-2-1`` -> 1); None for a pod's own id or an id
    that does not belong to the StatefulSet."""
    match = pattern.fullmatch(instance_id)
    return int(match["worker"]) if match and match["worker"] is not None else None


__all__ = ["instance_id_for", "ordinal_of", "ordinal_pattern", "worker_of"]
