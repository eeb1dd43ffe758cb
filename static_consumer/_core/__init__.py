"""The consumer core, grouped by lifecycle. ``static_consumer._core.consumer.StaticConsumer`` is its face.

One :class:`~static_consumer._core.session.Session` (settings, seams, state, client, owned partitions)
is handed to every phase; nothing here holds callbacks into the consumer. Everything that depends on the
assignment mode or the group protocol is in the session's ``Mode``.

- ``session``: the Session, ``State`` with its transition table, and the ``Mode`` interface
- ``modes``: which Mode a consumer has (the one place that reads ``assignment_mode`` and ``protocol``)
- ``membership``: group membership, per protocol (``ClassicMode``, ``ConsumerMode``): leaving, recovering,
  the session the stall guard measures against, a refused protocol
- ``ordinal``: ``OrdinalMode``, the StatefulSet-ordinal mode (never joins)
- ``join``: joining: identity, capability gate, client config (the join plan), held-assignment look-up
- ``rejoin``: joining again while KIP-848 still holds the instance id (UNRELEASED_INSTANCE_ID)
- ``ownership``: owning partitions: rebalance callbacks, processed offsets, commits (``offsets`` is the
  pure bookkeeping)
- ``poll``: the poll path: errors by kind, out-of-band errors, handing records out; ``stall``: no
  records out after a gap longer than half the session timeout until membership is checked
- ``topics``: waiting for the subscribed topics to exist, ``MissingTopicError`` after the bound
- ``failures``: what a client error means for a static member, and the exception it raises
- ``seam``: what the core needs from a Kafka client and from the group watch (no client library);
  ``confluent``: the librdkafka implementation, the only consumer-path module that imports
  ``confluent_kafka``
"""
