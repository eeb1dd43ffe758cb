"""The ACLs each part of the library needs, and which ACL a refusal asks for. Pure: no client library.

Measured against Apache Kafka 4.3.1 with KRaft's ``StandardAuthorizer`` (``integration/test_acls.py``
grants exactly :data:`NEEDS` and takes each entry away in turn); docs/security.md renders the same
table (``tests/docs/test_acl_table.py`` checks it). READ on a group or topic implies DESCRIBE on it, as in
every Kafka authorizer, so the consumer's two ACLs also cover ``describe``, ``remove-members`` and
``scale-down`` when those run as the consumer's principal.

What the brokers answer without an ACL (librdkafka 2.16, kafka-python 3.0), which the wording below
follows: GROUP_AUTHORIZATION_FAILED (30) to FindCoordinator (needs DESCRIBE on the group), JoinGroup,
SyncGroup, Heartbeat, OffsetCommit, ConsumerGroupHeartbeat and LeaveGroup (READ), DescribeGroups,
ConsumerGroupDescribe and OffsetFetch (DESCRIBE); TOPIC_AUTHORIZATION_FAILED (29) to Fetch (READ), and to
Metadata, ConsumerGroupHeartbeat (its subscribed topics) and ConsumerGroupDescribe (the topics the group's
members are assigned) (DESCRIBE). DescribeConfigs answers a refusal per resource, which kafka-python
hands back as an empty answer.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from static_consumer._base.codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    name_of,
)
from static_consumer._base.errors import AuthorizationError
from static_consumer._security.secrets import scrub_for
from static_consumer.settings._views import Cluster

CLUSTER_NAME = "kafka-cluster"  # the one name a CLUSTER resource has


@dataclass(frozen=True, slots=True)
class Acl:
    """An ALLOW ACL for a principal: ``operation`` on ``resource`` (``Group``, ``Topic``, ``Cluster``)
    named ``name`` (a group id, a topic, ``kafka-cluster``; in :data:`NEEDS` a placeholder). ``pattern``
    is the resource pattern type: ``LITERAL`` (that name) or ``PREFIXED`` (every name starting with it)."""

    operation: str
    resource: str
    name: str
    pattern: str = "LITERAL"

    def __str__(self) -> str:
        if self.pattern == "PREFIXED":
            return f"{self.operation} on {self.resource} prefix {self.name!r} (PREFIXED)"
        return f"{self.operation} on {self.resource} {self.name!r}"

    def command(self, principal: str) -> str:
        """The ``kafka-acls`` command that grants it to ``principal``."""
        flag = {"Group": "--group", "Topic": "--topic", "Cluster": "--cluster"}[self.resource]
        target = flag if self.resource == "Cluster" else f"{flag} {self.name}"
        if self.pattern != "LITERAL":
            target += f" --resource-pattern-type {self.pattern.lower()}"
        return f"kafka-acls --add --allow-principal {principal} --operation {self.operation.title()} {target}"


@dataclass(frozen=True, slots=True)
class Need:
    """One ACL an operation needs (``optional``: it runs in a documented degraded mode without it;
    ``when``: the only case that needs it, e.g. a KIP-848 group; empty: every case)."""

    acl: Acl
    why: str
    optional: bool = False
    without: str = ""  # what happens without it
    when: str = ""


GROUP, TOPICS = "<group>", "<each topic>"
DEAD_LETTER = "<dead-letter topic>"  # dead_letter_topic, {topic} replaced by each source topic
_GROUP_READ = Acl("READ", "Group", GROUP)
_GROUP_DESCRIBE = Acl("DESCRIBE", "Group", GROUP)
_TOPIC_READ = Acl("READ", "Topic", TOPICS)
_TOPIC_DESCRIBE = Acl("DESCRIBE", "Topic", TOPICS)
_TYPED = "AuthorizationError naming it (exit 78) at the first refusal"
_REDRIVE = "AuthorizationError (exit 78); nothing of the run is committed past the refusal"

NEEDS: Mapping[str, tuple[Need, ...]] = MappingProxyType(
    {
        "consumer, protocol='classic'": (
            Need(
                _GROUP_READ,
                "FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit, OffsetFetch",
                without=_TYPED,
            ),
            Need(_TOPIC_READ, "Metadata, Fetch, ListOffsets", without=_TYPED),
        ),
        "consumer, protocol='consumer' (KIP-848)": (
            Need(
                _GROUP_READ,
                "FindCoordinator, ConsumerGroupHeartbeat, OffsetCommit, OffsetFetch; ConsumerGroupDescribe "
                "while a restart waits for its held instance id; the static leave (ConsumerGroupHeartbeat) "
                "a crash restart sends for its dead predecessor (`restart_state_dir`); LeaveGroup of "
                "leave_group()",
                without=_TYPED,
            ),
            Need(
                _TOPIC_READ,
                "ConsumerGroupHeartbeat (DESCRIBE of the subscribed topics), Fetch",
                without=_TYPED,
            ),
        ),
        "capability probe (start(), static-consumer probe)": (
            Need(
                Acl("DESCRIBE_CONFIGS", "Cluster", CLUSTER_NAME),
                "DescribeConfigs of a broker: group.min/max.session.timeout.ms and the KIP-848 session",
                optional=True,
                without=(
                    "the bounds are not checked before joining (a warning); a session_timeout_ms the "
                    "broker refuses ends the join with SessionTimeoutOutOfBoundsError (exit 78)"
                ),
            ),
            Need(
                Acl("DESCRIBE_CONFIGS", "Group", GROUP),
                "DescribeConfigs of the group: its own consumer.session.timeout.ms (KIP-848 only)",
                optional=True,
                without=(
                    "the wait for a held instance id assumes the broker's maximum session "
                    "(group.consumer.max.session.timeout.ms) instead of the group's"
                ),
            ),
        ),
        "dead-letter (failure_action='dead_letter')": (
            Need(
                Acl("WRITE", "Topic", DEAD_LETTER),
                "Produce (idempotent: WRITE on a topic also allows its InitProducerId); the check before "
                "joining (DESCRIBE, which WRITE implies) that the topic exists and may be written",
                without="AuthorizationError naming it (exit 78) before the consumer joins",
            ),
        ),
        "redrive": (
            Need(Acl("READ", "Topic", DEAD_LETTER), "Metadata, ListOffsets, Fetch", without=_REDRIVE),
            Need(
                Acl("READ", "Group", f"{GROUP}.redrive"),
                "FindCoordinator, OffsetFetch, OffsetCommit of the run's own group",
                without=_REDRIVE,
            ),
            Need(Acl("WRITE", "Topic", TOPICS), "Produce back to the source topics", without=_REDRIVE),
        ),
        "describe": (
            Need(_GROUP_DESCRIBE, "FindCoordinator, DescribeGroups, ConsumerGroupDescribe", without=_TYPED),
            Need(
                _TOPIC_DESCRIBE,
                "the audit's partition counts; ConsumerGroupDescribe of a KIP-848 group",
                without=_TYPED,
            ),
        ),
        "remove-members, scale-down": (
            Need(_GROUP_READ, "FindCoordinator, DescribeGroups (DESCRIBE), LeaveGroup", without=_TYPED),
            Need(
                _TOPIC_DESCRIBE,
                "ConsumerGroupDescribe of a KIP-848 group (a classic group is described without it)",
                without=_TYPED,
                when="a KIP-848 group",
            ),
        ),
    }
)

# Requests a group or topic READ ACL authorizes; every other group or topic request needs DESCRIBE.
_READ_REQUESTS = re.compile(r"JoinGroup|SyncGroup|Heartbeat|OffsetCommit|LeaveGroup|\bFetch\b")
# Where a refusal's text names its resource: kafka-python's "GROUP/<id>" and "describe topic <name>",
# librdkafka's "Subscribed topic not available: <name>:".
_NAMED = re.compile(
    r"GROUP/(?P<group>[^\s:]+)|describe topic (?P<topic>[^\s:]+)|not available: (?P<sub>[^\s:]+):"
)


def acl_for(
    code: int,
    text: str,
    *,
    group: str,
    topics: Sequence[str],
    topic: str | None = None,
    consumer: bool = False,
    reads_group: bool = False,
) -> Acl | None:
    """The ACL a refusal with authorization error ``code`` asks for; None for another code.

    ``text`` is the client's error text (it names the request, sometimes the resource); ``topic`` the
    topic a client attached to the error. A consumer (``consumer``) is told READ whatever the request:
    it needs READ on its group and topics anyway, and granting DESCRIBE would only move the refusal to
    the next request. ``reads_group``: the same for the group alone (the tools that send LeaveGroup).
    A topic a ``^regex`` subscription matches is named by a PREFIXED ACL covering the regex (see
    :func:`regex_prefix`): a LITERAL one would only move the refusal to the next topic it matches.
    """
    named = _NAMED.search(text)
    if code == GROUP_AUTHORIZATION_FAILED:
        name = (named.group("group") if named else None) or group
        read = consumer or reads_group or bool(_READ_REQUESTS.search(text))
        return Acl("READ" if read else "DESCRIBE", "Group", name)
    if code == TOPIC_AUTHORIZATION_FAILED:
        read = consumer or bool(_READ_REQUESTS.search(text))
        name = topic or (named and (named.group("topic") or named.group("sub"))) or None
        return _topic_acl("READ" if read else "DESCRIBE", name, topics)
    if code == CLUSTER_AUTHORIZATION_FAILED:
        return Acl("DESCRIBE", "Cluster", CLUSTER_NAME)
    return None


def _topic_acl(operation: str, name: str | None, topics: Sequence[str]) -> Acl:
    """The topic ACL for a refusal of topic ``name`` (None: the refusal named none)."""
    patterns = [t for t in topics if t.startswith("^")]
    if name is None:
        if len(topics) == 1 and patterns and regex_prefix(patterns[0]):
            return Acl(operation, "Topic", regex_prefix(patterns[0]), "PREFIXED")
        return Acl(operation, "Topic", _topics(topics))
    for pattern in patterns:
        prefix = regex_prefix(pattern)
        if prefix and (name == pattern or _matches(pattern, name)):
            return Acl(operation, "Topic", prefix, "PREFIXED")
    return Acl(operation, "Topic", name)


def _matches(pattern: str, topic: str) -> bool:
    try:
        return re.search(pattern, topic) is not None
    except re.error:
        return False


_TOPIC_CHARS = frozenset(string.ascii_letters + string.digits + "_-")  # and ".", a regex metacharacter


def regex_prefix(pattern: str) -> str:
    """The literal prefix of every topic a ``^regex`` subscription can match ('' when there is none, or
    when ``pattern`` is not a ``^regex``): the name of the PREFIXED ACL that covers the subscription.
    ``^orders\\.(eu|us)-.*`` -> ``orders.``; ``^orders-?x`` -> ``orders`` (the ``-`` is optional);
    ``^a|b`` -> ''."""
    if not pattern.startswith("^") or _alternates(pattern):
        return ""
    prefix: list[str] = []
    at = 1
    while at < len(pattern):
        char = pattern[at]
        if char == "\\" and pattern[at + 1 : at + 2] in (".", "-", "_"):
            literal, width = pattern[at + 1], 2
        elif char in _TOPIC_CHARS:
            literal, width = char, 1
        else:
            break
        if pattern[at + width : at + width + 1] in ("*", "?", "{"):
            break  # that character may be absent (or repeated)
        prefix.append(literal)
        at += width
    return "".join(prefix)


def _alternates(pattern: str) -> bool:
    """Whether ``pattern`` has a ``|`` outside any group or character class (so no common prefix)."""
    depth, escaped, in_class = 0, False, False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "|" and depth == 0:
            return True
    return False


def hidden_topics(settings: Cluster, patterns: Sequence[str]) -> str:
    """What to say when the ``^regex`` ``patterns`` match no topic the client can see: with an
    authorizer, a principal sees (and a regex is matched against) only the topics it may DESCRIBE, so
    the topics may exist, hidden. Names the ACL that covers each pattern and the command for it."""
    principal = principal_of(settings)
    grants = []
    for pattern in patterns:
        prefix = regex_prefix(pattern)
        if prefix:
            acl = Acl("READ", "Topic", prefix, "PREFIXED")
            grants.append(f"{acl} for {pattern!r} ({acl.command(principal)})")
        else:
            grants.append(f"READ on each topic {pattern!r} matches (it has no literal prefix to grant)")
    return (
        f"if they exist, the brokers hide them from {principal} (a principal sees only the topics it may "
        f"describe, and a regex matches only those): grant {'; '.join(grants)}"
    )


_ERRNO = re.compile(r"\[Error (\d+)\]")  # kafka-python's rendering of a broker code
_REFUSALS = (  # librdkafka's words for each refusal
    (
        re.compile(r"topic authorization failed|topic\(s\) that the client is not authorized", re.I),
        TOPIC_AUTHORIZATION_FAILED,
    ),
    (re.compile(r"group authorization failed", re.I), GROUP_AUTHORIZATION_FAILED),
    (re.compile(r"cluster authorization failed", re.I), CLUSTER_AUTHORIZATION_FAILED),
)


def code_in(text: str) -> int | None:
    """The authorization error code a client's refusal ``text`` carries: kafka-python's "[Error 30]",
    else librdkafka's words ("Group authorization failed", "...topic(s) that the client is not
    authorized to describe"); None when it has neither."""
    errno = _ERRNO.search(text)
    if errno is not None:
        return int(errno.group(1))
    return next((code for pattern, code in _REFUSALS if pattern.search(text)), None)


def _topics(topics: Sequence[str]) -> str:
    literal = [t for t in topics if not t.startswith("^")]
    return ", ".join(literal) if literal else "each topic the group reads"


def principal_of(settings: Cluster) -> str:
    """How the brokers most likely name the client (``User:<name>`` for SASL PLAIN/SCRAM)."""
    protocol, mechanism = settings.security_protocol, settings.sasl_mechanism
    if protocol.startswith("SASL") and mechanism != "OAUTHBEARER" and settings.sasl_username:
        return f"User:{settings.sasl_username}"
    if mechanism == "OAUTHBEARER":
        return "User:<the token's principal>"
    if protocol == "SSL":
        return "User:<the client certificate's distinguished name>"
    return "User:ANONYMOUS"


def authorization_error(
    settings: Cluster,
    code: int | None,
    text: str,
    doing: str,
    *,
    topic: str | None = None,
    consumer: bool = False,
    reads_group: bool = False,
) -> AuthorizationError:
    """The :class:`AuthorizationError` for a refusal with ``code`` met while ``doing`` something: what
    the brokers refused, the ACL to grant and the command that grants it (secrets masked)."""
    text = scrub_for(settings, text)
    acl = None
    if code is not None:
        acl = acl_for(
            code,
            text,
            group=settings.group_id,
            topics=settings.topics,
            topic=topic,
            consumer=consumer,
            reads_group=reads_group,
        )
    principal = principal_of(settings)
    if acl is None or code is None:
        return AuthorizationError(
            f"{doing}: the brokers refused {principal} ({text}): grant it the ACLs docs/security.md lists",
            kafka_code=code,
        )
    covers = ""
    if acl.pattern == "PREFIXED":  # a topic a ^regex subscription matches
        what = f"{topic!r} and the other topics" if topic else "the topics"
        covers = f", which covers {what} the subscription's regex matches"
    return AuthorizationError(
        f"{doing}: the brokers refused {principal} ({name_of(code)}: {text}): grant {acl}{covers} "
        f"({acl.command(principal)}). docs/security.md lists the ACLs each operation needs",
        operation=acl.operation,
        resource=acl.resource,
        name=acl.name,
        pattern=acl.pattern,
        kafka_code=code,
    )


__all__ = [
    "CLUSTER_NAME",
    "DEAD_LETTER",
    "NEEDS",
    "Acl",
    "Need",
    "acl_for",
    "authorization_error",
    "code_in",
    "hidden_topics",
    "principal_of",
    "regex_prefix",
]
