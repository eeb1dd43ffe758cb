"""Where a broker comes from, and small bounded operations against it.

- ``backends``: the choice between an existing cluster, the container and the JVM, and ``local_cluster``
- ``jvm``: KRaft nodes on the JVM from Maven Central jars; ``classpath`` resolves those jars
- ``containers``: one KRaft node from the locally built image under Docker Compose (pytest-docker);
  ``kafka_image`` builds that image without a registry
- ``kafka_ops``: topics, producing, ``describe_consumer_group``, committed offsets
- ``rebalances``: whether a group rebalanced, read from the broker log (both protocols)
- ``authorizer``: a broker with KRaft's ``StandardAuthorizer``: super users for the harness, an
  unprivileged principal and the ACLs a test gives it
"""

from static_consumer_lab.brokers.backends import KafkaCluster, local_cluster, select_backend
from static_consumer_lab.brokers.classpath import DEFAULT_KAFKA_VERSION, HarnessError, resolve_classpath
from static_consumer_lab.brokers.jvm import JvmKafkaCluster
from static_consumer_lab.brokers.kafka_ops import (
    add_partitions,
    committed_offsets,
    create_topic,
    describe_consumer_group,
    produce,
    wait_for_metadata,
)

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "HarnessError",
    "JvmKafkaCluster",
    "KafkaCluster",
    "add_partitions",
    "committed_offsets",
    "create_topic",
    "describe_consumer_group",
    "local_cluster",
    "produce",
    "resolve_classpath",
    "select_backend",
    "wait_for_metadata",
]
