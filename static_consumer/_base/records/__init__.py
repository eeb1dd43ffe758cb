"""Plain data the consumer hands out: partitions, records and record batches. Pure; no client library
types leak out. The one home of ``Record``, ``RecordBatch`` and ``TopicPartition`` (their public names
are ``static_consumer.Record``, ...).

- ``partition``: ``TopicPartition``, a NamedTuple ordered by (topic, partition)
- ``impl``: which ``Record`` this process uses: the native one (``native.c``, a C extension built at
  install) or the pure-Python one of the same behaviour (``pure``)
- ``batch``: ``RecordList`` (what ``consume()`` returns) and ``RecordBatch`` (``consume_batch()``)

Record is the consumer's own type: records made from the client's messages answer each field from their
message, so a consume loop pays for the fields it reads and for no garbage-collected object per record.
It keeps what a named tuple offers (attribute access, construction by position or keyword, value
equality also with plain tuples, hashing, ordering, repr, unpacking, indexing,
``_asdict``/``_replace``/``_make``/``_fields``, pickling, class and sequence patterns) but is no tuple:
``isinstance(record, tuple)`` is False (docs/benchmarks.md, "Record").
"""

from static_consumer._base.records.batch import (
    ColumnLoader,
    Headers,
    RecordBatch,
    RecordList,
    highest_offsets,
    records_highest_offsets,
)
from static_consumer._base.records.impl import Record
from static_consumer._base.records.partition import TopicPartition

__all__ = [
    "ColumnLoader",
    "Headers",
    "Record",
    "RecordBatch",
    "RecordList",
    "TopicPartition",
    "highest_offsets",
    "records_highest_offsets",
]
