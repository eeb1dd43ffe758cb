"""A broker that authorizes: KRaft's ``StandardAuthorizer``, a super user for the harness and one
unprivileged principal whose ACLs a test sets.

The PLAINTEXT listener (the harness: readiness, topics, producing; and the traffic between the node's
broker and controller) is ``User:ANONYMOUS``, a super user, as is the SASL user ``admin``. The SASL users
``app`` (a consumer) and ``ops`` (an operator running the admin tools) have nothing until a test sets
the whole set each needs with :meth:`AclCluster.only`, which waits until the broker applies it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from static_consumer_lab.brokers.classpath import HarnessError

if TYPE_CHECKING:
    from static_consumer._kafka.acls import Acl
    from static_consumer_lab.brokers.jvm import JvmKafkaCluster
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
    """The cluster, its SASL users and the ACLs of its unprivileged users."""

    cluster: JvmKafkaCluster
    users: SaslUsers

    def settings_fields(self, user: str = APP_USER, mechanism: str = "SCRAM-SHA-256") -> dict[str, Any]:
        """ConsumerSettings fields that log in as ``user`` through the SASL listener."""
        return self.users.settings_fields(self.cluster.sasl_bootstrap_servers, user, mechanism)

    def only(self, acls: Iterable[Acl], user: str = APP_USER) -> None:
        """Make ``acls`` the whole set of ``User:<user>``'s ACLs, once the broker applies them."""
        from confluent_kafka.admin._acl import AclBindingFilter, AclOperation, AclPermissionType
        from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

        principal = f"User:{user}"
        wanted = {(a.operation, a.resource, a.name) for a in acls}
        admin = self._admin()
        any_name: Any = None  # a filter matches every name and host with None (the stubs say str)
        everything = AclBindingFilter(
            ResourceType.ANY,
            any_name,
            ResourcePatternType.ANY,
            principal,
            any_name,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        for future in admin.delete_acls([everything], request_timeout=10).values():
            future.result(10)
        if wanted:
            bindings = [self._binding(principal, *acl) for acl in sorted(wanted)]
            for future in admin.create_acls(bindings, request_timeout=10).values():
                future.result(10)
        deadline = time.monotonic() + _APPLY_TIMEOUT_S
        while self._granted(admin, everything) != wanted:
            if time.monotonic() > deadline:
                raise HarnessError(f"the broker did not apply the ACLs {sorted(wanted)} within the bound")
            time.sleep(0.1)

    def _admin(self) -> Any:
        from static_consumer_lab.brokers.kafka_ops import _admin

        return _admin(self.cluster.bootstrap_servers)  # PLAINTEXT: a super user

    @staticmethod
    def _binding(principal: str, operation: str, resource: str, name: str) -> Any:
        from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
        from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

        kind = {"Group": ResourceType.GROUP, "Topic": ResourceType.TOPIC, "Cluster": ResourceType.BROKER}
        return AclBinding(
            kind[resource],
            name,
            ResourcePatternType.LITERAL,
            principal,
            "*",
            AclOperation[operation],
            AclPermissionType.ALLOW,
        )

    @staticmethod
    def _granted(admin: Any, everything: Any) -> set[tuple[str, str, str]]:
        names = {"GROUP": "Group", "TOPIC": "Topic", "BROKER": "Cluster"}
        bindings = admin.describe_acls(everything, request_timeout=10).result(10)
        return {(b.operation.name, names[b.restype.name], b.name) for b in bindings}


def start_acl_cluster() -> AclCluster:
    """One node with the authorizer, the PLAINTEXT listener for the harness and a SASL one (SCRAM-SHA-256
    and PLAIN) for ``admin``, ``app`` and ``ops``, whose passwords are random."""
    import secrets

    from static_consumer_lab.brokers.jvm import JvmKafkaCluster
    from static_consumer_lab.secure.sasl import SaslUsers

    users = SaslUsers(
        {name: f"{name}-pw-{secrets.token_hex(12)}" for name in (APP_USER, OPS_USER, SUPER_USER)}
    )
    cluster = JvmKafkaCluster(1, sasl=users, extra_config=AUTHORIZER_CONFIG)
    cluster.start()
    return AclCluster(cluster, users)


__all__ = ["APP_USER", "AUTHORIZER_CONFIG", "OPS_USER", "SUPER_USER", "AclCluster", "start_acl_cluster"]
