"""Which instance am I: a stable ``group.instance.id`` from the settings, the environment or the pod name.

Pure: the environment is an injected mapping, never ``os.environ``. The id must survive restarts and
rollouts, otherwise every restart joins as a new member and static membership buys nothing; that is why
Deployment-style pod names (which change on every rollout) are refused unless explicitly allowed.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from static_consumer._base.errors import ConfigurationError, InvalidInstanceIdError

INSTANCE_ID_ENV = "STATIC_CONSUMER_INSTANCE_ID"
POD_NAME_ENVS = ("POD_NAME", "HOSTNAME")
MAX_INSTANCE_ID_LENGTH = 249
PLACEHOLDERS = frozenset({"pod", "statefulset", "ordinal", "group"})

_LEGAL = re.compile(r"[A-Za-z0-9._-]+")
# StatefulSet pods are "<statefulset>-<ordinal>"; Kubernetes writes ordinals without leading zeros.
_STATEFULSET_POD = re.compile(r"(?P<statefulset>.+)-(?P<ordinal>0|[1-9][0-9]*)")
# Deployment pods are "<deployment>-<pod-template-hash>-<suffix>", both from Kubernetes' vowel-free
# alphabet. Checked first: a 5-character suffix can be all digits and would otherwise pass as an ordinal.
_K8S_RAND = "[bcdfghjklmnpqrstvwxz2456789]"
_DEPLOYMENT_POD = re.compile(rf".+-{_K8S_RAND}{{1,10}}-{_K8S_RAND}{{5}}")
# DaemonSet, Job and bare ReplicaSet pods are "<owner>-<5 characters of that alphabet>". Its digits are 2
# and 4-9, so a suffix of five of those digits (e.g. "fluentd-24567") is random, unless a StatefulSet has
# more than 22,222 replicas: taken for random. Ordinals with a 0, 1 or 3, or not of five digits, cannot
# be such a suffix. What no rule can tell: a pod or host named "<name>-<n>" by hand (a bare Pod, a VM
# such as "ip-10-0-1-23") looks like ordinal n of StatefulSet "<name>".
_RANDOM_SUFFIX_POD = re.compile(r".+-[245-9]{5}")


@dataclass(frozen=True)
class Identity:
    """The resolved ``group.instance.id`` and where it came from."""

    instance_id: str
    source: Literal["explicit", "env", "pod"]
    pod: str | None
    statefulset: str | None
    ordinal: int | None


def validate_instance_id(value: str) -> str:
    """Return ``value`` if Kafka accepts it as ``group.instance.id``; else raise InvalidInstanceIdError."""
    if not value:
        raise InvalidInstanceIdError("group.instance.id is empty; give it a value such as the pod name")
    if value in (".", ".."):
        raise InvalidInstanceIdError(f"group.instance.id cannot be {value!r}; Kafka reserves it")
    if len(value) > MAX_INSTANCE_ID_LENGTH:
        raise InvalidInstanceIdError(
            f"group.instance.id is {len(value)} characters; Kafka allows at most {MAX_INSTANCE_ID_LENGTH}: "
            "shorten it (e.g. a shorter instance_id_template)"
        )
    if _LEGAL.fullmatch(value) is None:
        bad = ", ".join(repr(c) for c in sorted({c for c in value if _LEGAL.fullmatch(c) is None}))
        raise InvalidInstanceIdError(
            f"group.instance.id {value!r} contains {bad}; Kafka allows only ASCII letters, digits, "
            "'.', '_' and '-': replace those characters"
        )
    return value


def check_template(template: str) -> frozenset[str]:
    """Return the placeholders of ``template``; raise ConfigurationError if it cannot give distinct ids."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigurationError(f"instance_id_template {template!r} is malformed ({exc})") from None
    names: set[str] = set()
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in PLACEHOLDERS or spec or conversion:
            raise ConfigurationError(
                f"instance_id_template {template!r} uses {{{name}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}}; only {', '.join(f'{{{p}}}' for p in sorted(PLACEHOLDERS))} "
                "are allowed, without format specs"
            )
        names.add(name)
    if not names & {"pod", "ordinal"}:
        # Without a per-replica part every replica gets the same id and they fence each other forever.
        raise ConfigurationError(
            f"instance_id_template {template!r} gives every replica the same id; "
            "include {pod} or {ordinal}"
        )
    return frozenset(names)


def parse_pod_name(pod: str) -> tuple[str, int] | None:
    """``(statefulset, ordinal)`` for a StatefulSet-style pod name, else None."""
    if _DEPLOYMENT_POD.fullmatch(pod) or _RANDOM_SUFFIX_POD.fullmatch(pod):
        return None
    match = _STATEFULSET_POD.fullmatch(pod)
    if match is None:
        return None
    return match["statefulset"], int(match["ordinal"])


def resolve_identity(
    env: Mapping[str, str],
    *,
    group_id: str,
    explicit: str | None = None,
    template: str = "{pod}",
    allow_unstable: bool = False,
) -> Identity:
    """Resolve the instance id: ``explicit`` > ``env[STATIC_CONSUMER_INSTANCE_ID]`` > pod name via template.

    The pod name is ``env["POD_NAME"]`` (set it from the downward API) or else ``env["HOSTNAME"]``. Its
    StatefulSet name and ordinal are recorded whatever the source, so ordinal assignment works with an
    explicit id too. Empty environment values count as unset.
    """
    placeholders = check_template(template)
    pod = next((env[k].strip() for k in POD_NAME_ENVS if env.get(k, "").strip()), None)
    parsed = parse_pod_name(pod) if pod else None
    statefulset, ordinal = parsed if parsed else (None, None)

    if explicit is not None:
        return Identity(validate_instance_id(explicit), "explicit", pod, statefulset, ordinal)
    from_env = env.get(INSTANCE_ID_ENV, "").strip()
    if from_env:
        return Identity(validate_instance_id(from_env), "env", pod, statefulset, ordinal)
    if pod is None:
        raise InvalidInstanceIdError(
            "no group.instance.id: set instance_id in the settings, or the STATIC_CONSUMER_INSTANCE_ID "
            "environment variable, or run in a StatefulSet pod with POD_NAME (downward API "
            "metadata.name) or HOSTNAME set; use static_policy='dynamic' to run without static membership"
        )
    if parsed is None:
        if not allow_unstable:
            raise InvalidInstanceIdError(
                f"pod name {pod!r} looks like {_not_statefulset(pod)}: an id that changes on every "
                "rollout defeats static membership, since each restart joins as a new member and triggers "
                "a rebalance. Run the consumer as a StatefulSet, set instance_id (or "
                "STATIC_CONSUMER_INSTANCE_ID) to a stable value, or set allow_unstable_instance_id=True "
                "to accept it anyway"
            )
        if placeholders & {"statefulset", "ordinal"}:
            raise ConfigurationError(
                f"instance_id_template {template!r} needs a StatefulSet pod name for {{statefulset}}/"
                f"{{ordinal}}, but the pod is {pod!r}; use {{pod}}"
            )
    rendered = template.format(pod=pod, statefulset=statefulset, ordinal=ordinal, group=group_id)
    return Identity(validate_instance_id(rendered), "pod", pod, statefulset, ordinal)


def _not_statefulset(pod: str) -> str:
    """What kind of pod name ``pod`` looks like, for the refusal message."""
    if _DEPLOYMENT_POD.fullmatch(pod):
        return "a Deployment/ReplicaSet pod (no '-<ordinal>' suffix)"
    if _RANDOM_SUFFIX_POD.fullmatch(pod):
        return (
            "a DaemonSet, Job or ReplicaSet pod: its suffix is random (Kubernetes draws 5 characters whose "
            "only digits are 2 and 4-9), not a StatefulSet ordinal"
        )
    return "not a StatefulSet pod (no '-<ordinal>' suffix)"


def ordinal_of(identity: Identity) -> int:
    """The StatefulSet ordinal, for ordinal assignment; ConfigurationError when the pod has none."""
    if identity.ordinal is None:
        raise ConfigurationError(
            f"assignment_mode='ordinal' needs a StatefulSet pod name '<statefulset>-<ordinal>' in POD_NAME "
            f"or HOSTNAME (pod is {identity.pod!r})"
        )
    return identity.ordinal


__all__ = [
    "INSTANCE_ID_ENV",
    "MAX_INSTANCE_ID_LENGTH",
    "PLACEHOLDERS",
    "POD_NAME_ENVS",
    "Identity",
    "check_template",
    "ordinal_of",
    "parse_pod_name",
    "resolve_identity",
    "validate_instance_id",
]
