"""A broker that authorizes: KRaft's ``StandardAuthorizer``, a super user for the harness and one
unprivileged principal whose ACLs a test sets.

The PLAINTEXT listener (the harness: readiness, topics, producing; and the traffic between the node's
broker and controller) is ``User:ANONYMOUS``, a super user, as is the SASL user ``admin``. The SASL users
``app`` (a consumer) and ``ops`` (an operator running the admin tools) have nothing until a test sets
the whole set each needs with :meth:`AclCluster.only`, which waits until the broker applies it. While
clients run, :meth:`AclCluster.revoke` and :meth:`AclCluster.grant` take away or give back single ACLs,
and :meth:`AclCluster.revoked` does both around a block (a permission fault and its repair).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from static_consumer_lab.brokers.classpath import HarnessError

if TYPE_CHECKING:
    from static_consumer._kafka.acls import Acl
    from static_consumer_lab.brokers.jvm import JvmKafkaCluster, Profile
    from static_consumer_lab.secure.sasl import SaslUsers

SUPER_USER, APP_USER, OPS_USER = "admin", "app", "ops"
AUTHORIZER_CONFIG: Mapping[str, str] = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": f"User:ANONYMOUS;User:{SUPER_USER}",
    # Kafka's default; the harness's 1 s minimum would hide a session the broker refuses.
    "group.min.session.timeout.ms": "6000",
}
_APPLY_TIMEOUT_S = 15.0


@dataclass
class AclCluster:
    """The cluster, its SASL users and the ACLs of its unprivileged users.

    :meth:`only` sets a user's whole set of ACLs; :meth:`grant`, :meth:`revoke` and :meth:`revoked`
    change only the ACLs named, leaving the others in place, so a running consumer loses exactly one
    (the chaos schedule revokes one and restores it). Each returns once the broker applies the change.
    """

    cluster: JvmKafkaCluster
    users: SaslUsers

    def settings_fields(self, user: str = APP_USER, mechanism: str = "SCRAM-SHA-256") -> dict[str, Any]:
        """ConsumerSettings fields that log in as ``user`` through the SASL listener."""
        return self.users.settings_fields(self.cluster.sasl_bootstrap_servers, user, mechanism)

    def only(self, acls: Iterable[Acl], user: str = APP_USER) -> None:
        """Make ``acls`` the whole set of ``User:<user>``'s ACLs, once the broker applies them."""
        wanted = {_key(a) for a in acls}
        admin = self._admin()
        self._delete(admin, [self._filter(user)])
        self._create(admin, user, wanted)
        self._wait(admin, user, lambda granted: granted == wanted, f"the ACLs {sorted(wanted)}")

    def grant(self, acls: Iterable[Acl], user: str = APP_USER) -> None:
        """Add ``acls`` to ``User:<user>``'s ACLs (the others kept), once the broker applies them."""
        added = {_key(a) for a in acls}
        admin = self._admin()
        self._create(admin, user, added)
        self._wait(admin, user, added.issubset, f"the grant of {sorted(added)}")

    def revoke(self, acls: Iterable[Acl], user: str = APP_USER) -> None:
        """Delete exactly ``acls`` from ``User:<user>``'s ACLs (the others kept), once the broker applies
        it: a running client is refused from its next request that needs one of them."""
        removed = {_key(a) for a in acls}
        admin = self._admin()
        self._delete(admin, [self._filter(user, key) for key in sorted(removed)])
        self._wait(admin, user, removed.isdisjoint, f"the revoke of {sorted(removed)}")

    @contextmanager
    def revoked(self, acls: Iterable[Acl], user: str = APP_USER) -> Iterator[None]:
        """``acls`` revoked inside the block and granted again when it ends (also when it raises)."""
        taken = list(acls)
        self.revoke(taken, user)
        try:
            yield
        finally:
            self.grant(taken, user)

    def _admin(self) -> Any:
        from static_consumer_lab.brokers.kafka_ops import _admin

        return _admin(self.cluster.bootstrap_servers)  # PLAINTEXT: a super user

    @staticmethod
    def _filter(user: str, key: tuple[str, str, str, str] | None = None) -> Any:
        """A filter for ``key`` (operation, resource, name, pattern) of ``User:<user>``, or all of theirs."""
        from confluent_kafka.admin._acl import AclBindingFilter, AclOperation, AclPermissionType
        from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

        any_name: Any = None  # a filter matches every name and host with None (the stubs say str)
        if key is None:
            kind, name, pattern, operation = ResourceType.ANY, any_name, "ANY", "ANY"
        else:
            operation, resource, name, pattern = key
            kind = _kinds()[resource]
        return AclBindingFilter(
            kind,
            name,
            ResourcePatternType[pattern],
            f"User:{user}",
            any_name,
            AclOperation[operation],
            AclPermissionType.ANY,
        )

    @staticmethod
    def _delete(admin: Any, filters: list[Any]) -> None:
        for future in admin.delete_acls(filters, request_timeout=10).values():
            future.result(10)

    @staticmethod
    def _create(admin: Any, user: str, keys: set[tuple[str, str, str, str]]) -> None:
        from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
        from confluent_kafka.admin._resource import ResourcePatternType

        bindings = [
            AclBinding(
                _kinds()[resource],
                name,
                ResourcePatternType[pattern],
                f"User:{user}",
                "*",
                AclOperation[operation],
                AclPermissionType.ALLOW,
            )
            for operation, resource, name, pattern in sorted(keys)
        ]
        if bindings:
            for future in admin.create_acls(bindings, request_timeout=10).values():
                future.result(10)

    def _wait(
        self, admin: Any, user: str, applied: Callable[[set[tuple[str, str, str, str]]], bool], what: str
    ) -> None:
        deadline = time.monotonic() + _APPLY_TIMEOUT_S
        while not applied(self._granted(admin, user)):
            if time.monotonic() > deadline:
                raise HarnessError(f"the broker did not apply {what} within the bound")
            time.sleep(0.1)

    def _granted(self, admin: Any, user: str) -> set[tuple[str, str, str, str]]:
        names = {kind.name: resource for resource, kind in _kinds().items()}
        bindings = admin.describe_acls(self._filter(user), request_timeout=10).result(10)
        return {
            (b.operation.name, names[b.restype.name], b.name, b.resource_pattern_type.name) for b in bindings
        }


def _key(acl: Acl) -> tuple[str, str, str, str]:
    return (acl.operation, acl.resource, acl.name, acl.pattern)


def _kinds() -> dict[str, Any]:
    """The library's resource names -> confluent-kafka's ResourceType (imported when first used)."""
    from confluent_kafka.admin._resource import ResourceType

    return {"Group": ResourceType.GROUP, "Topic": ResourceType.TOPIC, "Cluster": ResourceType.BROKER}


def start_acl_cluster(
    nodes: int = 1, profile: Profile = "stock", extra_config: Mapping[str, str] | None = None
) -> AclCluster:
    """``nodes`` nodes (``profile``'s group settings, ``extra_config`` on top) with the authorizer, the
    PLAINTEXT listener for the harness and a SASL one (SCRAM-SHA-256 and PLAIN) for ``admin``, ``app`` and
    ``ops``, whose passwords are random."""
    import secrets

    from static_consumer_lab.brokers.jvm import JvmKafkaCluster
    from static_consumer_lab.secure.sasl import SaslUsers

    users = SaslUsers(
        {name: f"{name}-pw-{secrets.token_hex(12)}" for name in (APP_USER, OPS_USER, SUPER_USER)}
    )
    config = {**AUTHORIZER_CONFIG, **(extra_config or {})}
    cluster = JvmKafkaCluster(nodes, profile=profile, sasl=users, extra_config=config)
    cluster.start()
    return AclCluster(cluster, users)


__all__ = ["APP_USER", "AUTHORIZER_CONFIG", "OPS_USER", "SUPER_USER", "AclCluster", "start_acl_cluster"]
