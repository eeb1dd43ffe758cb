"""Feed PySpark from a static consumer in micro-batches (extra ``static-consumer[spark]``).

:class:`MicroBatchRunner` polls bounded batches with a :class:`~static_consumer.StaticConsumer` (so the
pod keeps its group.instance.id and its partitions across restarts), hands each batch to ``fn(df, info)``
as a DataFrame with the schema of Spark's own Kafka source, and commits only after ``fn`` returned.
:func:`write_delta` / :func:`write_parquet` hold each record once, keyed by its topic, partition and
offset: exactly-once after ``kill -9``, whichever pod writes a range again. With a ``checkpoint`` every
batch also has a key that survives a restart of its pod (``info.key``, for sinks of your own).
:func:`spark_session` builds a session (local or on a cluster master) or connects to Spark Connect.
See docs/spark.md for when to use this bridge and when Spark's native Kafka source.
"""

from static_consumer._core.events import BatchProgress
from static_consumer.spark._batch import BatchLimits, OffsetRange
from static_consumer.spark._errors import CheckpointError, SinkConflictError, SparkSessionStoppedError
from static_consumer.spark._handoff import Handoff
from static_consumer.spark._ledger import BatchKey
from static_consumer.spark._schema import KAFKA_SCHEMA, records_to_table
from static_consumer.spark._work import BatchInfo, FailurePolicy
from static_consumer.spark.connector import KafkaConnector, resolve_kafka_connector
from static_consumer.spark.delta import DeltaJars, delta_conf, resolve_delta
from static_consumer.spark.runner import BatchFn, MicroBatchRunner, RunSummary
from static_consumer.spark.session import spark_session
from static_consumer.spark.sinks import KEY_COLUMNS, write_delta, write_parquet

__all__ = [
    "KAFKA_SCHEMA",
    "KEY_COLUMNS",
    "BatchFn",
    "BatchInfo",
    "BatchKey",
    "BatchLimits",
    "BatchProgress",
    "CheckpointError",
    "DeltaJars",
    "FailurePolicy",
    "Handoff",
    "KafkaConnector",
    "MicroBatchRunner",
    "OffsetRange",
    "RunSummary",
    "SinkConflictError",
    "SparkSessionStoppedError",
    "delta_conf",
    "records_to_table",
    "resolve_delta",
    "resolve_kafka_connector",
    "spark_session",
    "write_delta",
    "write_parquet",
]
