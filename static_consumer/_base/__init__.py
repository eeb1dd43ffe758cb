"""The bottom layer: what every other package of static_consumer stands on, standing on nothing of it.

- ``errors``: the error hierarchy (drawn in its docstring); retriability and exit codes are data
- ``codes``: the one table of Kafka and librdkafka error codes: name, kind, retriability, meaning
- ``records``: ``Record``, ``RecordBatch``, ``RecordList``, ``TopicPartition``
- ``retry``: bounded tenacity policies derived from ``error.retriable``
- ``connections``: failed broker connections, told in a few lines (``static_consumer.connections``)
"""
