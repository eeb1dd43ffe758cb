"""The consumer and its core, grouped by lifecycle. ``consumer.StaticConsumer`` is its face.

One :class:`~static_consumer._core.session.Session` (settings, seams, state, client, owned partitions)
is handed to every phase; nothing here holds callbacks into the consumer. Everything that depends on the
assignment mode or the group protocol is in the session's ``Mode``; everything that depends on
``static_policy`` or ``duplicate_policy`` in ``policy.MembershipPolicy``.

- ``consumer``: ``StaticConsumer``; ``shutdown``: the pod main (``run_until_sigterm``); ``events``: the
  typed membership events and their dispatcher; ``identity``: the instance id from the environment
- ``session``: the Session, ``State`` with its transition table, the ``Mode`` interface, building the
  client; ``seams``: the one object unit tests substitute (``Seams``); ``seam``: what the core needs from
  a Kafka client (no client library); ``confluent``: the librdkafka implementation, the only
  consumer-path module that imports ``confluent_kafka``
- ``modes``: which Mode a consumer has (the one place that reads ``assignment_mode`` and ``protocol``);
  ``policy``: the membership policies; ``gate``: the capability gate of each protocol
- ``membership``: group membership, per protocol (``ClassicMode``, ``ConsumerMode``); ``ordinal``:
  ``OrdinalMode``, the StatefulSet-ordinal mode (never joins)
- ``join``: what a join plan starts from; ``rejoin``: joining again while KIP-848 still holds the
  instance id; ``predecessor``: a crash restart releases its own dead predecessor's hold first
  (``restart_state_dir``); ``standby``: a member whose instance id a live process holds
- ``ownership``: rebalance callbacks, processed offsets, commits (``offsets`` is the pure bookkeeping)
- ``poll``: the poll path: errors by kind, out-of-band errors, handing records out; ``stall``: no records
  out after a gap longer than half the session timeout until membership is checked; ``topics``: waiting
  for the subscribed topics to exist
- ``failures``: what a client error means for a static member, and the exception it raises
"""
