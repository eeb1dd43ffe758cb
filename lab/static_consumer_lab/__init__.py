"""A real Apache Kafka broker for tests, benchmarks and demos, plus the pytest plugin that serves it.

``local_cluster(os.environ)`` picks the backend (existing cluster, Docker, or the JVM harness);
``JvmKafkaCluster(nodes)`` starts KRaft nodes from Maven Central jars on 127.0.0.1.

Importing this package imports nothing else: each name below loads its module when first used, so the
pytest plugin (``static_consumer_lab.plugin``, a module of this package) costs pytest and the standard
library only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from static_consumer_lab._classpath import DEFAULT_KAFKA_VERSION, HarnessError, resolve_classpath
    from static_consumer_lab.backends import KafkaCluster, local_cluster, select_backend
    from static_consumer_lab.jvm import JvmKafkaCluster
    from static_consumer_lab.kafka_ops import (
        add_partitions,
        committed_offsets,
        create_topic,
        describe_consumer_group,
        produce,
        wait_for_metadata,
    )
    from static_consumer_lab.processes import ConsumerProcess

# name -> the module that defines it
_HOMES = {
    "DEFAULT_KAFKA_VERSION": "_classpath",
    "HarnessError": "_classpath",
    "resolve_classpath": "_classpath",
    "KafkaCluster": "backends",
    "local_cluster": "backends",
    "select_backend": "backends",
    "JvmKafkaCluster": "jvm",
    "add_partitions": "kafka_ops",
    "committed_offsets": "kafka_ops",
    "create_topic": "kafka_ops",
    "describe_consumer_group": "kafka_ops",
    "produce": "kafka_ops",
    "wait_for_metadata": "kafka_ops",
    "ConsumerProcess": "processes",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # once: later look-ups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "ConsumerProcess",
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
