"""kafka-python admin clients for the probe and the operator tools: closed, typed, quiet about secrets.

Two kafka-python 3.0 behaviours are guarded against here (both seen against a Kafka 4.3 SASL listener):

- Its bootstrap retries a refused SASL authentication until the bootstrap timeout and then reports only
  "Unable to bootstrap", so a wrong password would look like an unreachable broker: callers ask
  librdkafka after such a failure (``_admin_io.explain``).
- At DEBUG it logs its whole configuration (SASL password included) and every request, including the
  SASL PLAIN authentication bytes, which hold the password. While a client lives, a filter on the
  ``kafka`` loggers masks the configured secrets in every record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import kafka.errors as kafka_errors
from kafka.admin import KafkaAdminClient

from static_consumer._config import kafka_python_config
from static_consumer.settings import REDACTED, ConsumerSettings

# Refusals that the same settings meet again on every attempt: never worth waiting for.
AUTH_ERRORS = (kafka_errors.SaslAuthenticationFailedError, kafka_errors.UnsupportedSaslMechanismError)


def secrets_of(settings: ConsumerSettings) -> tuple[str, ...]:
    """The configured secret values (non-empty ones)."""
    values = (settings.sasl_password, settings.ssl_key_password)
    return tuple(v.get_secret_value() for v in values if v is not None and v.get_secret_value())


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret masked, also where it appears inside a ``bytes`` repr."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
        escaped = repr(secret.encode())[2:-1]  # how b'...' shows a non-ASCII or quoted password
        if escaped != secret:
            text = text.replace(escaped, REDACTED)
    return text


class SecretFilter(logging.Filter):
    """Masks ``secrets`` in a record's message and traceback before any handler formats it."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self._secrets = tuple(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is the handler's problem
            return True
        cleaned = scrub(message, self._secrets)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info), self._secrets)
        return True


@contextmanager
def scrubbed_logs(secrets: Sequence[str], prefix: str = "kafka") -> Iterator[None]:
    """Install a :class:`SecretFilter` on every existing logger named ``prefix`` or ``prefix.*``.

    A logger's filters apply only to records created on that very logger, hence one per logger.
    """
    if not secrets:
        yield
        return
    secret_filter = SecretFilter(secrets)
    names = [n for n in logging.Logger.manager.loggerDict if n == prefix or n.startswith(prefix + ".")]
    loggers = [logging.getLogger(n) for n in (prefix, *names)]
    for logger in loggers:
        logger.addFilter(secret_filter)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(secret_filter)


@contextmanager
def admin_client(settings: ConsumerSettings, client_id: str) -> Iterator[Any]:
    """A KafkaAdminClient for ``settings``, closed on exit (also when its bootstrap fails).

    Raises kafka-python errors (a refused SASL login mostly as a bootstrap timeout, see module docs).
    """
    created: list[Any] = []

    def recording_factory(**configs: Any) -> Any:
        # KafkaAdminClient starts its network thread before bootstrapping and does not stop it when the
        # bootstrap fails; holding the network client lets us close it on that path too.
        client = KafkaAdminClient.DEFAULT_CONFIG["kafka_client"](**configs)
        created.append(client)
        return client

    cfg = kafka_python_config(settings) | {"client_id": client_id, "kafka_client": recording_factory}
    with scrubbed_logs(secrets_of(settings)):
        admin = None
        try:
            admin = KafkaAdminClient(**cfg)
            yield admin
        finally:
            if admin is not None:
                admin.close()
            else:
                for client in created:
                    client.close()


__all__ = ["AUTH_ERRORS", "SecretFilter", "admin_client", "scrub", "scrubbed_logs", "secrets_of"]
