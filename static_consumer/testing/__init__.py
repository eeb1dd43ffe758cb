"""A real Apache Kafka broker for tests, benchmarks and demos, plus the pytest plugin that serves it.

``local_cluster(os.environ)`` picks the backend (existing cluster, Docker, or the JVM harness);
``JvmKafkaCluster(nodes)`` starts KRaft nodes from Maven Central jars on 127.0.0.1.
"""

from static_consumer.testing._classpath import DEFAULT_KAFKA_VERSION, HarnessError, resolve_classpath
from static_consumer.testing.backends import KafkaCluster, local_cluster, select_backend
from static_consumer.testing.jvm import JvmKafkaCluster
from static_consumer.testing.kafka_ops import (
    add_partitions,
    committed_offsets,
    create_topic,
    describe_group,
    produce,
    wait_for_metadata,
)
from static_consumer.testing.processes import ConsumerProcess

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "ConsumerProcess",
    "HarnessError",
    "JvmKafkaCluster",
    "KafkaCluster",
    "add_partitions",
    "committed_offsets",
    "create_topic",
    "describe_group",
    "local_cluster",
    "produce",
    "resolve_classpath",
    "select_backend",
    "wait_for_metadata",
]
