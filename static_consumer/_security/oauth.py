"""OAUTHBEARER: one token provider in the settings, adapted to the three clients the library runs.

The user's provider is a plain callable returning an :class:`OAuthBearerToken` (fetch it from the identity
provider, read it from a projected service-account file, ...). It cannot come from the environment: a
callable has no text form, so ``sasl_oauth_token_provider`` is settable in code only.

Who asks for a token when (the provider is called again each time, so it decides about caching):

- librdkafka (consumer, AdminClient) calls ``oauth_cb`` before the first connection and again at 80% of
  the token's lifetime, on a background thread (confluent-kafka enables librdkafka's SASL background
  callbacks and waits in each client's constructor until the first token is set);
- kafka-python (capability probe, LeaveGroup, DescribeGroups) asks on every SASL handshake and every
  KIP-368 re-authentication. :class:`_Refreshing` hands it the last token until 80% of its lifetime has
  passed, the same point at which librdkafka refreshes, so a short-lived admin client does not fetch a new
  token per connection and never sends one about to expire. kafka-python logs the SASL request bytes at
  DEBUG, token included; :data:`static_consumer._security.secrets.ISSUED_TOKENS` masks every token handed
  to it in those records.

A provider that fails (raises, returns something else, or a token that has already expired) is a
:class:`TokenFailure` here, with the reason in words (never the token). confluent-kafka swallows an
exception out of ``oauth_cb`` and then waits a fixed 10 s in every client constructor for a token that
never comes ("OAuth token not set within 10 seconds timeout", measured by
``bench/measure_tls_failures.py``), so each client's first token is fetched before the client is built
(:func:`first_token`, bounded by ``connect_timeout_s``) and handed to its first callback: a failing
provider ends the call at once with :class:`~static_consumer._base.errors.AuthenticationError` (exit 78).

Later, librdkafka asks again at 80% of the token's lifetime and, after a failure, every 10 s while the
current token still works. :meth:`TokenSource.lost` says when that is over: the provider has failed
since its last token and that token has expired. A running consumer checks it on every poll and ends
with ``AuthenticationError`` then (the retries are bounded by the last token's remaining lifetime).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from static_consumer._base.errors import AuthenticationError
from static_consumer._security.secrets import ISSUED_TOKENS, SecretFields, install_filter, scrub_for

log = logging.getLogger(__name__)

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


class TokenFailure(Exception):
    """The provider gave no usable token; the message is the reason in words (never a token)."""


class TokenSource:
    """The provider behind one client: every token it hands out is checked (type, not yet expired), the
    first one may be fetched ahead (:meth:`prime`), and the latest failure is remembered with its reason.

    Thread-safe: librdkafka calls from its background thread, kafka-python from its connection threads.
    ``clock`` (wall-clock seconds, like ``expires_at``) is a seam for tests.
    """

    def __init__(self, provider: TokenProvider, clock: Callable[[], float] = time.time) -> None:
        self._provider = provider
        self.clock = clock
        self._lock = threading.Lock()
        self._primed: OAuthBearerToken | None = None
        self._failure: str | None = None
        self._expires_at: float | None = None  # of the last token handed out

    @property
    def failure(self) -> str | None:
        """Why the provider's latest call failed; None when it succeeded (or was never called)."""
        with self._lock:
            return self._failure

    def fetch(self) -> OAuthBearerToken:
        """The primed token if there is one still valid, else a new one from the provider."""
        with self._lock:
            primed, self._primed = self._primed, None
        if primed is not None and primed.expires_at > self.clock():
            return primed
        try:
            token = self._provider()
        except Exception as exc:  # noqa: BLE001 - any failure of user code is the reason, reported
            raise self._failed(f"raised {type(exc).__name__}: {exc}") from None
        if not isinstance(token, OAuthBearerToken):
            raise self._failed(f"returned {type(token).__name__}, not an OAuthBearerToken")
        now = self.clock()
        if token.expires_at <= now:
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(token.expires_at))
            raise self._failed(
                f"returned a token that had expired {now - token.expires_at:.0f} s before (at {when}): a "
                "cached token kept too long, or a wrong clock"
            )
        ISSUED_TOKENS.add(token.value)  # masked wherever a text leaves the process from now on
        with self._lock:
            self._failure, self._expires_at = None, token.expires_at
        return token

    def _failed(self, reason: str) -> TokenFailure:
        reason = ISSUED_TOKENS.scrub(reason)  # a provider's error text may quote an earlier token
        with self._lock:
            self._failure = reason
            expires_at = self._expires_at
        if expires_at is not None and expires_at > self.clock():
            log.warning(
                "sasl_oauth_token_provider %s; the current token works until %s, the clients ask again "
                "meanwhile (librdkafka every 10 s)",
                reason,
                time.strftime("%H:%M:%S UTC", time.gmtime(expires_at)),
            )
        return TokenFailure(reason)

    def prime(self, timeout_s: float) -> None:
        """Fetch the client's first token now, on a helper thread, waiting at most ``timeout_s``; the next
        :meth:`fetch` returns it. Raises TokenFailure (also when the provider did not return in time)."""
        outcome: list[OAuthBearerToken | TokenFailure] = []
        done = threading.Event()

        def run() -> None:
            try:
                outcome.append(self.fetch())
            except TokenFailure as failure:
                outcome.append(failure)
            finally:
                done.set()

        # A daemon thread: a provider that hangs must not keep the process alive; it is abandoned.
        threading.Thread(target=run, name="static-consumer-oauth", daemon=True).start()
        if not done.wait(timeout_s) or not outcome:
            raise self._failed(f"did not return a token within connect_timeout_s={timeout_s:g} s")
        result = outcome[0]
        if isinstance(result, TokenFailure):
            raise result
        with self._lock:
            self._primed = result

    def lost(self) -> str | None:
        """The failure, once the provider has failed since its last token and that token has expired
        (or it never gave one): no client can log in any more. None while a token still works."""
        with self._lock:
            failure, expires_at = self._failure, self._expires_at
        if failure is None or (expires_at is not None and self.clock() < expires_at):
            return None
        return failure


class LibrdkafkaTokens:
    """The ``oauth_cb`` for confluent-kafka clients: ``(token, expiry epoch seconds, principal, ext)``.

    Its argument is librdkafka's ``sasl.oauthbearer.config`` string, which the provider does not need.
    Raising makes confluent-kafka report the failure to librdkafka, which keeps the current token and
    asks again 10 s later.
    """

    def __init__(self, provider: TokenProvider) -> None:
        self.source = TokenSource(provider)

    def __call__(self, _config: str) -> tuple[str, float, str, dict[str, str]]:
        token = self.source.fetch()
        return token.value, token.expires_at, token.principal, dict(token.extensions)

    def __repr__(self) -> str:
        return "<static_consumer oauth_cb>"


def librdkafka_oauth_cb(provider: TokenProvider) -> LibrdkafkaTokens:
    """The ``oauth_cb`` of one confluent-kafka client over ``provider``."""
    return LibrdkafkaTokens(provider)


class _Refreshing:
    """The provider's last token until :data:`REFRESH_AT` of its lifetime has passed, then a new one."""

    def __init__(self, provider: TokenProvider, clock: Callable[[], float] = time.time) -> None:
        self.source = TokenSource(provider, clock)
        self.clock = clock
        self._lock = threading.Lock()  # kafka-python may authenticate several connections at once
        self._token: OAuthBearerToken | None = None
        self._refresh_at = 0.0

    def current(self) -> OAuthBearerToken:
        with self._lock:
            now = self.clock()
            if self._token is None or now >= self._refresh_at:
                try:
                    token = self.source.fetch()
                except TokenFailure:
                    if self._token is None or self._token.expires_at <= now:
                        raise
                    return self._token  # like librdkafka: the current token while it lasts
                self._token = token
                self._refresh_at = now + REFRESH_AT * max(0.0, token.expires_at - now)
            return self._token


def kafka_python_token_provider(provider: TokenProvider) -> Any:
    """A ``kafka.net.sasl.oauth.AbstractTokenProvider`` (kafka-python checks the type) over ``provider``."""
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class _KafkaPythonTokens(AbstractTokenProvider):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self._tokens = _Refreshing(provider)
            self.source = self._tokens.source

        def token(self) -> str:
            value = self._tokens.current().value
            install_filter(ISSUED_TOKENS)  # kafka-python has created its loggers by the time it asks
            return value

        def extensions(self) -> dict[str, str]:
            return dict(self._tokens.current().extensions)

        def __repr__(self) -> str:  # kafka-python logs its configuration at DEBUG
            return "<static_consumer token provider>"

    return _KafkaPythonTokens()


# The config keys under which each client library takes the token provider.
_PROVIDER_KEYS = ("oauth_cb", "sasl_oauth_token_provider")


def token_source(config: Mapping[str, object]) -> TokenSource | None:
    """The :class:`TokenSource` behind a librdkafka or kafka-python config built by ``_config``."""
    for key in _PROVIDER_KEYS:
        source = getattr(config.get(key), "source", None)
        if isinstance(source, TokenSource):
            return source
    return None


class ClientFields(SecretFields, Protocol):
    """The settings fields the token functions read (``ConsumerSettings`` has them): the bound for the
    first token, and what an error names (secrets masked)."""

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def group_id(self) -> str: ...

    @property
    def connect_timeout_s(self) -> float: ...


def first_token(config: Mapping[str, object], settings: ClientFields, doing: str = "") -> None:
    """Fetch the first token of the client about to be built from ``config``, within
    ``connect_timeout_s``; raise AuthenticationError with the provider's reason when there is none."""
    source = token_source(config)
    if source is None:
        return
    try:
        source.prime(settings.connect_timeout_s)
    except TokenFailure as failure:
        raise token_error(settings, str(failure), doing) from None


def token_error(settings: ClientFields, reason: str, doing: str = "") -> AuthenticationError:
    """The error for a provider that gave no usable token (``reason`` from :class:`TokenFailure`)."""
    text = scrub_for(settings, reason)
    where = f"{doing}: " if doing else f"brokers at {settings.bootstrap_servers}: "
    return AuthenticationError(
        f"{where}sasl_oauth_token_provider gave no OAUTHBEARER token to log in with (it {text}). Fix the "
        "provider (the identity provider's address, the client id and secret, or the token file it "
        "reads); the library does not retry it"
    )


def token_lost_error(settings: ClientFields, reason: str) -> AuthenticationError:
    """The error for a running client whose last token expired while the provider kept failing."""
    text = scrub_for(settings, reason)
    return AuthenticationError(
        f"the OAUTHBEARER token expired and sasl_oauth_token_provider has failed since ({text}); the "
        f"consumer of group {settings.group_id!r} can no longer log in to {settings.bootstrap_servers}. "
        "Exit and let the process restart once the provider works again"
    )


__all__ = [
    "REFRESH_AT",
    "ClientFields",
    "LibrdkafkaTokens",
    "OAuthBearerToken",
    "TokenFailure",
    "TokenProvider",
    "TokenSource",
    "first_token",
    "kafka_python_token_provider",
    "librdkafka_oauth_cb",
    "token_error",
    "token_lost_error",
    "token_source",
]
