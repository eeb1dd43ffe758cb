"""What the CLI prints: the probe report (built here, as JSON-ready data) and text renderings. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from static_consumer._base.errors import StaticConsumerError
from static_consumer._base.records import TopicPartition
from static_consumer._core.modes import decide
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer._kafka.groups import GroupMember, RemovalResult
from static_consumer.admin.audit import GroupAudit
from static_consumer.settings import ConsumerSettings

# api key -> (name, the version that matters here, why it matters)
RELEVANT_APIS: Mapping[int, tuple[str, int, str]] = {
    11: (
        "JoinGroup",
        5,
        "v5 adds group.instance.id (KIP-345); v9 lets a restarted static leader skip "
        "assignment (KIP-814), but librdkafka speaks v5 at most",
    ),
    12: ("Heartbeat", 3, "v3 carries group.instance.id"),
    13: ("LeaveGroup", 3, "v3 removes members by group.instance.id (remove-members, scale-down)"),
    14: ("SyncGroup", 3, "v3 carries group.instance.id"),
    15: ("DescribeGroups", 4, "v4 reports each member's group.instance.id (describe)"),
    68: ("ConsumerGroupHeartbeat", 0, "KIP-848 consumer protocol (protocol='consumer'), Kafka 4.0+"),
    69: ("ConsumerGroupDescribe", 0, "describes KIP-848 groups"),
}
POLICIES = ("require", "warn", "dynamic")
PROTOCOLS = ("classic", "consumer")


def error_dict(exc: StaticConsumerError) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc), "exit_code": exc.exit_code}


def verdict(settings: ConsumerSettings, caps: BrokerCapabilities) -> dict[str, Any]:
    """The capability gate's answer for ``settings``, as data (an error is part of the answer)."""
    try:
        decision = decide(settings, caps)
    except StaticConsumerError as exc:
        return {"static": None, "reasons": [], "warnings": [], "error": error_dict(exc)}
    return {
        "static": decision.static,
        "reasons": list(decision.reasons),
        "warnings": list(decision.warnings),
        "error": None,
    }


def probe_report(settings: ConsumerSettings, caps: BrokerCapabilities) -> dict[str, Any]:
    """ApiVersions that matter for static membership, group bounds, and the verdict under each policy
    and protocol. ``configured`` is the verdict for the settings as given."""
    apis = []
    for key, (name, needed, why) in RELEVANT_APIS.items():
        versions = caps.api_versions.get(key)
        apis.append(
            {
                "api": name,
                "key": key,
                "min": versions[0] if versions else None,
                "max": versions[1] if versions else None,
                "needed": needed,
                "ok": versions is not None and versions[1] >= needed,
                "why": why,
            }
        )
    verdicts = {
        protocol: {
            policy: verdict(settings.model_copy(update={"protocol": protocol, "static_policy": policy}), caps)
            for policy in POLICIES
        }
        for protocol in PROTOCOLS
    }
    return {
        "bootstrap_servers": settings.bootstrap_servers,
        "broker_version": caps.broker_version,
        "api_versions": apis,
        "supports": {
            "classic_static": caps.supports_classic_static,
            "consumer_protocol": caps.supports_consumer_protocol,
            "leave_group_batch": caps.supports_leave_group_batch,
        },
        "group_session_timeout_ms": {
            "min": caps.group_min_session_timeout_ms,
            "max": caps.group_max_session_timeout_ms,
            "consumer_protocol": caps.consumer_session_timeout_ms,
        },
        "group_initial_rebalance_delay_ms": caps.group_initial_rebalance_delay_ms,
        "settings": {
            "protocol": settings.protocol,
            "static_policy": settings.static_policy,
            "session_timeout_ms": settings.session_timeout_ms,
        },
        "verdicts": verdicts,
        "configured": verdict(settings, caps),
    }


def _verdict_text(v: Mapping[str, Any]) -> str:
    if v["error"] is not None:
        return f"refused ({v['error']['type']}, exit {v['error']['exit_code']}): {v['error']['message']}"
    kind = "static member" if v["static"] else "dynamic member"
    notes = "; ".join([*v["reasons"], *(f"warning: {w}" for w in v["warnings"])])
    return f"{kind} ({notes})" if notes else kind


def render_probe(report: Mapping[str, Any]) -> str:
    lines = [f"brokers {report['bootstrap_servers']} (Kafka {report['broker_version'] or 'version unknown'})"]
    for api in report["api_versions"]:
        have = f"v{api['min']}-v{api['max']}" if api["max"] is not None else "absent"
        mark = "ok " if api["ok"] else "-- "
        lines.append(f"  {mark}{api['api']:<24} {have:<9} needs v{api['needed']}: {api['why']}")
    bounds = report["group_session_timeout_ms"]
    lines.append(
        f"group session timeout bounds: min {bounds['min']} ms, max {bounds['max']} ms "
        f"(consumer protocol: {bounds['consumer_protocol']} ms); initial rebalance delay "
        f"{report['group_initial_rebalance_delay_ms']} ms"
    )
    chosen = report["settings"]
    lines.append(
        f"verdicts (configured: protocol={chosen['protocol']}, static_policy={chosen['static_policy']}, "
        f"session_timeout_ms={chosen['session_timeout_ms']}):"
    )
    for protocol, by_policy in report["verdicts"].items():
        for policy, v in by_policy.items():
            star = "*" if (protocol, policy) == (chosen["protocol"], chosen["static_policy"]) else " "
            lines.append(f" {star} {protocol:<8} {policy:<8} {_verdict_text(v)}")
    return "\n".join(lines)


def compact(partitions: Iterable[TopicPartition]) -> str:
    """``t[0-2,5] u[1]``: partitions grouped by topic, consecutive numbers as ranges."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = []
    for topic, numbers in by_topic.items():
        runs: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            if n is not None:
                start = prev = n
        out.append(f"{topic}[{','.join(runs)}]")
    return " ".join(out) or "-"


def _member_rows(members: Iterable[GroupMember]) -> list[str]:
    header = ("INSTANCE ID", "MEMBER ID", "HOST", "CLIENT ID", "PARTITIONS")
    rows = [header] + [
        (m.instance_id or "(dynamic)", m.member_id, m.host, m.client_id, compact(m.assignment))
        for m in members
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows
    ]


def render_describe(audit: GroupAudit) -> str:
    d = audit.description
    static = len(d.static_members)
    head = (
        f"group {d.group_id} ({d.group_type}, assignor {d.assignor or '-'}, state {d.state}): "
        f"{len(d.members)} member(s), {static} static"
    )
    lines = [head]
    if d.members:
        lines.extend(_member_rows(d.members))
    if audit.verdict == "ok":
        basis = f"assignment equals the {audit.model} model's prediction" if audit.model else "ownership"
        topics = len(audit.partitions_per_topic)
        lines.append(f"audit: ok ({basis}; every partition of {topics} topic(s) owned once)")
    else:
        lines.append(f"audit: {audit.verdict.upper()}")
    lines.extend(f"  - {p}" for p in audit.problems())
    if audit.warnings:
        lines.append("warnings:")
        lines.extend(f"  - {w}" for w in audit.warnings)
    return "\n".join(lines)


def render_removal(result: RemovalResult) -> str:
    lines = []
    if result.removed:
        lines.append(f"removed from group {result.group_id}: {', '.join(result.removed)}")
    if result.absent:
        lines.append(f"not in group {result.group_id} (nothing to do): {', '.join(result.absent)}")
    for f in result.failed:
        kind = "retriable" if f.retriable else "not retriable"
        lines.append(f"FAILED {f.instance_id}: {f.error} ({kind})")
    return "\n".join(lines) or f"nothing to remove from group {result.group_id}"


__all__ = [
    "compact",
    "error_dict",
    "probe_report",
    "render_describe",
    "render_probe",
    "render_removal",
    "verdict",
]
