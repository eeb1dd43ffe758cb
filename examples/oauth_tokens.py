"""An OAUTHBEARER token provider for an identity provider's client-credentials grant (RFC 6749, 4.4).

``sasl_oauth_token_provider`` is a callable and has no environment variable, so a pod that uses
OAUTHBEARER passes one in code (examples/consumer_app.py does when ``STATIC_CONSUMER_SASL_MECHANISM`` is
``OAUTHBEARER``). This one reads its identity provider from the environment the manifest sets
(examples/statefulset-oauth.yaml):

- ``OAUTH_TOKEN_URL``: the identity provider's token endpoint;
- ``OAUTH_CLIENT_ID``: the client id (not a secret: it goes in the ConfigMap);
- ``OAUTH_CLIENT_SECRET``: the client secret, from a Kubernetes Secret (``secretKeyRef``);
- ``OAUTH_SCOPE`` (optional): the scope the brokers expect.

It caches a token until 80% of its lifetime (librdkafka and kafka-python both ask for tokens; this keeps
them to one request per token) and raises when the identity provider refuses or does not answer: the
library turns that into ``AuthenticationError`` (exit 78) with the reason, never the secret. Standard
library only.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping

from static_consumer import OAuthBearerToken

REFRESH_AT = 0.8  # share of a token's lifetime after which a new one is fetched


class ClientCredentialsTokens:
    """``sasl_oauth_token_provider``: tokens from ``token_url`` for ``client_id``/``client_secret``."""

    def __init__(
        self,
        token_url: str,
        client_id: str,
        client_secret: str,
        *,
        scope: str | None = None,
        timeout_s: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.token_url = token_url
        self.client_id = client_id
        self._client_secret = client_secret
        self.scope = scope
        self.timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()  # librdkafka and kafka-python ask from their own threads
        self._token: OAuthBearerToken | None = None
        self._refresh_at = 0.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> ClientCredentialsTokens:
        return cls(
            environ["OAUTH_TOKEN_URL"],
            environ["OAUTH_CLIENT_ID"],
            environ["OAUTH_CLIENT_SECRET"],
            scope=environ.get("OAUTH_SCOPE") or None,
        )

    def __call__(self) -> OAuthBearerToken:
        with self._lock:
            now = self._clock()
            if self._token is None or now >= self._refresh_at:
                self._token = self._fetch(now)
                self._refresh_at = now + REFRESH_AT * (self._token.expires_at - now)
            return self._token

    def _fetch(self, now: float) -> OAuthBearerToken:
        form = {"grant_type": "client_credentials"} | ({"scope": self.scope} if self.scope else {})
        basic = base64.b64encode(f"{self.client_id}:{self._client_secret}".encode()).decode()
        request = urllib.request.Request(
            self.token_url,
            data=urllib.parse.urlencode(form).encode(),
            headers={"Authorization": f"Basic {basic}", "Accept": "application/json"},
            method="POST",
        )
        # Raises urllib.error.HTTPError (a refused client: 400/401) or URLError (no answer).
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 - the URL is configuration
            answer = json.load(response)
        return OAuthBearerToken(
            answer["access_token"],
            expires_at=now + float(answer["expires_in"]),
            principal=self.client_id,
        )

    def __repr__(self) -> str:  # never the secret
        return f"ClientCredentialsTokens({self.token_url!r}, client_id={self.client_id!r})"
