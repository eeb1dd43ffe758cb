"""Feed PySpark from a static consumer in micro-batches (extra ``static-consumer[spark]``).

:class:`MicroBatchRunner` polls bounded batches with a :class:`~static_consumer.StaticConsumer` (so the
pod keeps its group.instance.id and its partitions across restarts), hands each batch to ``fn(df, info)``
as a DataFrame with the schema of Spark's own Kafka source, and commits only after ``fn`` returned.
:func:`spark_session` builds an embedded local session or connects to a Spark Connect server.
See docs/spark.md for when to use this bridge and when Spark's native Kafka source.
"""

from static_consumer.spark._batch import BatchLimits, OffsetRange
from static_consumer.spark._handoff import Handoff
from static_consumer.spark._schema import KAFKA_SCHEMA, records_to_table
from static_consumer.spark._work import BatchInfo, FailurePolicy
from static_consumer.spark.connector import KafkaConnector, resolve_kafka_connector
from static_consumer.spark.runner import BatchFn, MicroBatchRunner, RunSummary
from static_consumer.spark.session import spark_session

__all__ = [
    "KAFKA_SCHEMA",
    "BatchFn",
    "BatchInfo",
    "BatchLimits",
    "FailurePolicy",
    "Handoff",
    "KafkaConnector",
    "MicroBatchRunner",
    "OffsetRange",
    "RunSummary",
    "records_to_table",
    "resolve_kafka_connector",
    "spark_session",
]
