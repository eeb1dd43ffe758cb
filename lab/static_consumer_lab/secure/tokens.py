"""Tokens for Kafka's unsecured OAUTHBEARER validator (the OAUTH listener of the secure harness).

The validator accepts an unsigned JWT (``{"alg": "none"}``) whose claims carry the principal (``sub``),
the issue time (``iat``) and the expiry (``exp``, seconds); it refuses tokens that have expired. Tests
only: a real cluster validates signed tokens from an identity provider.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable

from static_consumer.settings import OAuthBearerToken


def _segment(claims: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")


def unsecured_token(principal: str, lifetime_s: float, *, now: float | None = None) -> OAuthBearerToken:
    """An unsigned JWT for ``principal`` that expires ``lifetime_s`` from ``now`` (negative: expired)."""
    issued = time.time() if now is None else now
    expires = issued + lifetime_s
    claims = {"sub": principal, "iat": int(issued), "exp": int(expires)}
    value = f"{_segment({'alg': 'none'})}.{_segment(claims)}."
    return OAuthBearerToken(value=value, expires_at=expires, principal=principal)


class UnsecuredTokens:
    """A token provider for ``sasl_oauth_token_provider``: a new unsigned token on every call.

    Counts its calls and keeps the tokens it issued (tests look for them in logs: finding one is a
    leak). ``lifetime_s`` below zero makes already expired tokens; ``fail`` makes every call raise.
    """

    def __init__(
        self,
        principal: str = "alice",
        lifetime_s: float = 3600.0,
        *,
        fail: BaseException | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.principal = principal
        self.lifetime_s = lifetime_s
        self.fail = fail
        self._clock = clock
        self._lock = threading.Lock()  # librdkafka and kafka-python call from their own threads
        self.issued: list[OAuthBearerToken] = []

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.issued)

    def __call__(self) -> OAuthBearerToken:
        if self.fail is not None:
            raise self.fail
        token = unsecured_token(self.principal, self.lifetime_s, now=self._clock())
        with self._lock:
            self.issued.append(token)
        return token

    def __repr__(self) -> str:
        return f"UnsecuredTokens(principal={self.principal!r}, lifetime_s={self.lifetime_s})"


__all__ = ["UnsecuredTokens", "unsecured_token"]
