"""Kafka I/O outside the consume loop, one module per job. Nothing here is on the consume path but the
error table (``codes``) and the group data (``groups``); the rest is imported when a consumer starts
(the probe), leaves, releases its dead predecessor or waits for a held instance id, or by the operator
tools.

- ``codes``: the one table of Kafka and librdkafka error codes (name, kind, retriability, meaning)
- ``groups``: what a group looks like from outside (pure data)
- ``admin_client``: every confluent-kafka AdminClient, built after the local checks; broker errors in words
- ``login``: what the brokers make of the credentials and the TLS handshake, asked through librdkafka
- ``kafka_python``: kafka-python admin sessions, closed, classified, quiet about secrets
- ``probe``: the broker's capabilities (ApiVersions, group configs) for the capability gate
- ``describe``: reading a group (the one ``describe_group``)
- ``watch``: the group watched while a held instance id is waited for (``_core/rejoin``)
- ``members``: removing static members by instance id (LeaveGroup v3+)
- ``release``: a crash restart's static leave for its dead predecessor (KIP-848 ConsumerGroupHeartbeat,
  member epoch -2), with the message schemas kafka-python lacks in ``schemas/``
"""
