"""OAUTHBEARER: one token provider in the settings, adapted to the three clients the library runs.

The user's provider is a plain callable returning an :class:`OAuthBearerToken` (fetch it from the identity
provider, read it from a projected service-account file, ...). It cannot come from the environment: a
callable has no text form, so ``sasl_oauth_token_provider`` is settable in code only.

Who asks for a token when (the provider is called again each time, so it decides about caching):

- librdkafka (consumer, AdminClient) calls ``oauth_cb`` before the first connection and again at 80% of
  the token's lifetime, on the thread that polls (confluent-kafka also calls it once while building an
  AdminClient, so admin calls need no extra poll);
- kafka-python (capability probe, LeaveGroup, DescribeGroups) asks on every SASL handshake and every
  KIP-368 re-authentication. :class:`_Refreshing` hands it the last token until 80% of its lifetime has
  passed, the same point at which librdkafka refreshes, so a short-lived admin client does not fetch a new
  token per connection and never sends one about to expire. kafka-python logs the SASL request bytes at
  DEBUG, token included; :data:`static_consumer._secrets.ISSUED_TOKENS` masks every token handed to it
  in those records.

A provider that raises, or returns an expired token, is not caught here yet: confluent-kafka 2.16 turns
an exception out of ``oauth_cb`` into a ``SystemError`` at the next call into the library (measured by
``bench/measure_tls_failures.py``); the typed handling comes with the error table.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from static_consumer._secrets import ISSUED_TOKENS, install_filter

# librdkafka refreshes a token once this share of its lifetime has passed; kafka-python is held to it too.
REFRESH_AT = 0.8


@dataclass(frozen=True)
class OAuthBearerToken:
    """A bearer token and the time it expires (seconds since the epoch). The value is never shown.

    ``principal`` is only for librdkafka's logs (the broker takes the principal from the token);
    ``extensions`` are SASL extensions (KIP-342) sent with the token, e.g. a Confluent Cloud
    ``logicalCluster``/``identityPoolId``.
    """

    value: str = field(repr=False)
    expires_at: float
    principal: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not self.value:
            raise TypeError("OAuthBearerToken.value must be a non-empty str (the encoded token)")
        object.__setattr__(self, "extensions", MappingProxyType(dict(self.extensions)))


TokenProvider = Callable[[], OAuthBearerToken]


def _fetch(provider: TokenProvider) -> OAuthBearerToken:
    token = provider()
    if not isinstance(token, OAuthBearerToken):
        raise TypeError(f"sasl_oauth_token_provider returned {type(token).__name__}, not an OAuthBearerToken")
    return token


def librdkafka_oauth_cb(provider: TokenProvider) -> Callable[[str], tuple[str, float, str, dict[str, str]]]:
    """The ``oauth_cb`` for confluent-kafka clients: ``(token, expiry epoch seconds, principal, ext)``.

    Its argument is librdkafka's ``sasl.oauthbearer.config`` string, which the provider does not need.
    """

    def oauth_cb(_config: str) -> tuple[str, float, str, dict[str, str]]:
        token = _fetch(provider)
        return token.value, token.expires_at, token.principal, dict(token.extensions)

    return oauth_cb


class _Refreshing:
    """The provider's last token until :data:`REFRESH_AT` of its lifetime has passed, then a new one."""

    def __init__(self, provider: TokenProvider, clock: Callable[[], float] = time.time) -> None:
        self._provider = provider
        self._clock = clock
        self._lock = threading.Lock()  # kafka-python may authenticate several connections at once
        self._token: OAuthBearerToken | None = None
        self._refresh_at = 0.0

    def current(self) -> OAuthBearerToken:
        with self._lock:
            now = self._clock()
            if self._token is None or now >= self._refresh_at:
                self._token = _fetch(self._provider)
                self._refresh_at = now + REFRESH_AT * max(0.0, self._token.expires_at - now)
            return self._token


def kafka_python_token_provider(provider: TokenProvider) -> Any:
    """A ``kafka.net.sasl.oauth.AbstractTokenProvider`` (kafka-python checks the type) over ``provider``."""
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class _KafkaPythonTokens(AbstractTokenProvider):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self._tokens = _Refreshing(provider)

        def token(self) -> str:
            value = self._tokens.current().value
            ISSUED_TOKENS.add(value)
            install_filter(ISSUED_TOKENS)  # kafka-python has created its loggers by the time it asks
            return value

        def extensions(self) -> dict[str, str]:
            return dict(self._tokens.current().extensions)

        def __repr__(self) -> str:  # kafka-python logs its configuration at DEBUG
            return "<static_consumer token provider>"

    return _KafkaPythonTokens()


__all__ = [
    "REFRESH_AT",
    "OAuthBearerToken",
    "TokenProvider",
    "kafka_python_token_provider",
    "librdkafka_oauth_cb",
]
