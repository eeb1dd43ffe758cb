"""Narrow views of the settings: what one layer reads, as a Protocol that ``ConsumerSettings`` satisfies.

A function that takes a view can read only the fields the view names (mypy holds it to that), so a
reader sees at its signature which settings reach it. The Kafka I/O outside the consume loop
(``static_consumer._kafka``) and the admin and kafka-python client configurations take :class:`Cluster`:
where the cluster is, how to log in, how long to wait, which group. The consumer's own configuration
takes the whole settings, and so do the modes that make it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from static_consumer._security.oauth import ClientFields, TokenProvider
from static_consumer._security.tls import TlsFields


class Cluster(ClientFields, TlsFields, Protocol):
    """Where the cluster is and how to log in to it (security protocol, SASL, TLS files, OAUTHBEARER,
    the connection keys of the ``librdkafka`` passthrough), the bound of each call (``connect_timeout_s``)
    and the group and topics the calls are about. ``ConsumerSettings`` is one."""

    @property
    def topics(self) -> Sequence[str]: ...

    @property
    def sasl_mechanism(self) -> str | None: ...

    @property
    def sasl_username(self) -> str | None: ...

    @property
    def sasl_oauth_token_provider(self) -> TokenProvider | None: ...

    @property
    def ssl_endpoint_identification(self) -> bool: ...


__all__ = ["Cluster"]
