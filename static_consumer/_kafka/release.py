"""The static leave of a crashed member, sent for it by its restart (KIP-848 ConsumerGroupHeartbeat with
member epoch -2), through kafka-python's protocol classes.

What the group coordinator does with it (Apache Kafka 4.3, ``GroupMetadataManager``): it looks the static
member up by the request's instance id and takes the leave only when the request's member id is that
member's, else it answers FENCED_INSTANCE_ID and changes nothing. A member that left this way stays in
the group at epoch -2 and keeps its assignment; the next member that joins with the same instance id
(member epoch 0) replaces it and inherits that assignment: no partition moves to another member. An
instance id nobody holds is answered UNKNOWN_MEMBER_ID, a group the coordinator does not know
GROUP_ID_NOT_FOUND; the same leave sent twice is taken twice.

kafka-python 3 lists the api key (68) but ships no schema for it. Its ``ApiMessage`` classes load a
message's field list by class name from the package given with ``load_json``, so the field lists of
Kafka's message specification are in ``schemas/``. The request goes to the group coordinator through a
kafka-python admin session (``kafka_python.admin_client``) and two private parts of its admin client,
``_find_coordinator_id`` and ``_manager``; ``integration/test_crash_restart.py`` sends it to a real broker,
and the caller treats any failure here as "nothing released" (the restart waits as without it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import kafka.errors as kafka_errors
from kafka.protocol.api_message import ApiMessage

from static_consumer._base.codes import BY_NAME, FENCED_INSTANCE_ID, GROUP_ID_NOT_FOUND, is_retriable
from static_consumer._kafka import kafka_python, schemas
from static_consumer.settings._views import Cluster

CLIENT_ID = "static-consumer-release"
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2  # Kafka's constant: a static member that leaves for a while
NO_ERROR = kafka_errors.NoError.errno
UNKNOWN_MEMBER_ID = BY_NAME["UNKNOWN_MEMBER_ID"].code
ATTEMPTS = 3  # a coordinator that is loading or moving: asked again, with a new session each time
RETRY_S = 0.3


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    """KIP-848's ConsumerGroupHeartbeat request (api key 68)."""


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    """Its response. Defining the class registers kafka-python's decoder for api key 68 (the registry
    holds a weak reference: the class lives as long as this module)."""


async def _send(admin: Any, group_id: str, instance_id: str, member_id: str) -> Any:
    node = await admin._find_coordinator_id(group_id)
    request = ConsumerGroupHeartbeatRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
        instance_id=instance_id,
    )
    return await admin._manager.send(request, node_id=node)


def leave_for(admin: Any, group_id: str, instance_id: str, member_id: str) -> int:
    """Send the static leave of ``member_id`` holding ``instance_id``; the coordinator's error code.
    ``admin`` is an open kafka-python KafkaAdminClient."""
    response = admin._manager.run(_send, admin, group_id, instance_id, member_id)
    return int(response.error_code)


def release_static_member(settings: Cluster, instance_id: str, member_ids: Sequence[str]) -> str | None:
    """Send the static leave for ``instance_id`` on behalf of each of ``member_ids`` in turn until the
    coordinator takes one: that member id, or None when none of them holds the id (another member does,
    or nobody). A coordinator that is loading or moving is asked again, at most ``ATTEMPTS`` times within
    ``connect_timeout_s``; raises StaticConsumerError (or a kafka-python error) when it cannot be asked."""
    group, deadline = settings.group_id, time.monotonic() + settings.connect_timeout_s
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with kafka_python.admin_client(settings, CLIENT_ID) as admin:
                for member_id in member_ids:
                    code = leave_for(admin, group, instance_id, member_id)
                    if code == NO_ERROR:
                        return member_id
                    if code == FENCED_INSTANCE_ID:
                        continue  # another member holds the id: maybe the next recorded one
                    if code in (UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND):
                        return None  # nobody holds it
                    # Named, so that a refusal names the request and its ACL (READ on the group).
                    raise kafka_errors.for_code(code)(f"ConsumerGroupHeartbeat of group {group}")
                return None
        except kafka_errors.KafkaError as exc:
            retry = is_retriable(getattr(exc, "errno", -1))
            if not retry or attempt == ATTEMPTS or time.monotonic() + RETRY_S > deadline:
                doing = f"releasing {instance_id!r} in group {group!r}"
                raise kafka_python.translate(exc, settings, doing) from None
        time.sleep(RETRY_S)
    return None


__all__ = [
    "CLIENT_ID",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "leave_for",
    "release_static_member",
]
