"""The one place that decides what is secret and masks it: config keys, error texts, log records.

Client configurations hold secrets in clear because the clients need them; anything that leaves the
process (a log line, a repr, an exception message, the event log) goes through here first. Pure apart
from :func:`scrubbed_logs`, which installs logging filters for the duration of a client's life.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Protocol

REDACTED = "**********"
MIN_LEARNED = 8  # the shortest value SecretFilter.add learns
_SECRET_MARKERS = ("password", "secret", "token", "key", "credential", "jaas", "oauthbearer.config")


class Secret(Protocol):
    """A value kept out of reprs (pydantic's ``SecretStr``)."""

    def get_secret_value(self) -> str: ...


class SecretFields(Protocol):
    """The settings fields that can hold secrets (``ConsumerSettings`` has them): what :func:`scrub_for`
    masks. A Protocol, so this module needs nothing from the settings."""

    @property
    def sasl_password(self) -> Secret | None: ...

    @property
    def ssl_key_password(self) -> Secret | None: ...

    @property
    def librdkafka(self) -> Mapping[str, object]: ...


def is_secret_key(key: str) -> bool:
    """True when a config key's value must never be shown. File locations are paths, not secrets."""
    k = key.lower().replace("_", ".")
    if k.endswith((".location", "file")):
        return False
    return any(marker in k for marker in _SECRET_MARKERS)


def redact_items(items: Iterable[tuple[str, object]]) -> dict[str, object]:
    """Copy of a config with the values of secret-looking keys replaced by ``REDACTED``."""
    return {k: REDACTED if is_secret_key(k) else v for k, v in items}


def redact_url_params(url: str) -> str:
    """A Spark Connect URL (``sc://host:port/;token=...;user_id=...``) with its parameters masked: the
    bearer token travels there, so only the address may be shown."""
    address, sep, _params = url.partition(";")
    return f"{address}{sep}{REDACTED}" if sep else url


def secrets_of(settings: SecretFields) -> tuple[str, ...]:
    """The secret values configured in ``settings`` (non-empty ones): what :func:`scrub` must mask.
    OAUTHBEARER tokens are not configured but handed out while clients run: :data:`ISSUED_TOKENS`."""
    values = (settings.sasl_password, settings.ssl_key_password)
    from_fields = [v.get_secret_value() for v in values if v is not None and v.get_secret_value()]
    passthrough = [str(v) for k, v in settings.librdkafka.items() if is_secret_key(k) and str(v)]
    return tuple(from_fields + passthrough)


def env_secrets(environ: Mapping[str, str], prefix: str = "STATIC_CONSUMER_") -> tuple[str, ...]:
    """The values of secret-looking ``prefix`` variables (``STATIC_CONSUMER_SASL_PASSWORD``, ...): what a
    command must mask before it has (or when it could not build) settings."""
    return tuple(
        v for k, v in environ.items() if k.startswith(prefix) and is_secret_key(k[len(prefix) :]) and v
    )


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret masked, also where it appears inside a ``bytes`` repr."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
        escaped = repr(secret.encode())[2:-1]  # how b'...' shows a non-ASCII or quoted password
        if escaped != secret:
            text = text.replace(escaped, REDACTED)
    return text


def scrub_for(settings: SecretFields, text: str) -> str:
    """``text`` with every secret configured in ``settings`` and every OAUTHBEARER token handed out
    (:data:`ISSUED_TOKENS`) masked."""
    return ISSUED_TOKENS.scrub(scrub(text, secrets_of(settings)))


class SecretFilter(logging.Filter):
    """Masks ``secrets`` in a record's message and traceback before any handler formats it.

    Secrets known up front (passwords in the settings) are given at construction; secrets that appear
    while a client runs (OAUTHBEARER tokens fetched on demand) are :meth:`add`-ed, the most recent
    ``keep`` of them kept (:data:`ISSUED_TOKENS`)."""

    def __init__(self, secrets: Sequence[str] = (), keep: int | None = None) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._secrets: deque[str] = deque(secrets, maxlen=keep)

    def add(self, value: str) -> None:
        """Learn ``value``. Values shorter than :data:`MIN_LEARNED` are not learned: no real token is
        that short, and masking every "t1" in every text would garble messages instead."""
        if len(value) < MIN_LEARNED:
            return
        with self._lock:
            if value not in self._secrets:
                self._secrets.append(value)

    def scrub(self, text: str) -> str:
        """``text`` with every secret this filter knows masked."""
        with self._lock:
            secrets = tuple(self._secrets)
        return scrub(text, secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            secrets = tuple(self._secrets)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is the handler's problem
            return True
        cleaned = scrub(message, secrets)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text, secrets)
        return True


# kafka-python logs every request at DEBUG, the SaslAuthenticate request with the OAUTHBEARER token in
# its bytes (kafka-python 3.0: ``kafka.net.connection``, ``kafka.protocol.parser``). Tokens are fetched
# while a client runs, so this filter learns each one as it is handed out (static_consumer._security.oauth).
ISSUED_TOKENS = SecretFilter(keep=64)


def install_filter(secret_filter: logging.Filter, prefix: str = "kafka") -> list[logging.Logger]:
    """Add ``secret_filter`` (a :class:`SecretFilter`, or another filter of the library's client records)
    to every existing logger named ``prefix`` or ``prefix.*`` (once each): a logger's filters apply only to
    records created on that very logger. Returns those loggers."""
    names = [n for n in logging.Logger.manager.loggerDict if n == prefix or n.startswith(prefix + ".")]
    loggers = [logging.getLogger(n) for n in (prefix, *names)]
    for logger in loggers:
        if secret_filter not in logger.filters:
            logger.addFilter(secret_filter)
    return loggers


@contextmanager
def scrubbed_logs(secrets: Sequence[str], prefix: str = "kafka") -> Iterator[None]:
    """Mask ``secrets`` in the records of the ``prefix`` loggers while the block runs."""
    if not secrets:
        yield
        return
    secret_filter = SecretFilter(secrets)
    loggers = install_filter(secret_filter, prefix)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(secret_filter)


__all__ = [
    "ISSUED_TOKENS",
    "REDACTED",
    "Secret",
    "SecretFields",
    "SecretFilter",
    "env_secrets",
    "install_filter",
    "is_secret_key",
    "redact_items",
    "scrub",
    "scrub_for",
    "scrubbed_logs",
    "secrets_of",
]
