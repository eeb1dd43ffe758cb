"""The ``librdkafka`` passthrough, checked by librdkafka's own configuration parser when settings are built.

librdkafka's parser is the only complete list of its properties, their types and ranges, so the
passthrough goes through it instead of a copy of that list: a consumer handle is created from the
passthrough on top of the library's own librdkafka defaults (``_defaults``, as the consumer gets them), plus
``group.id`` and ``group.protocol`` and **without** ``bootstrap.servers``, which leaves
librdkafka with no broker to connect to, and is destroyed at once. Creating it runs librdkafka's check of
every key and value (``rd_kafka_conf_set``), its cross-checks (e.g. ``fetch.max.bytes`` >=
``message.max.bytes``) and confluent-kafka's checks of its callback keys (``error_cb``, ...). Creating
and closing such a handle took 0.21-0.32 ms (librdkafka 2.16, 20 runs in one process, under load); it
is done once per distinct passthrough, and empty passthroughs skip it (and do not import confluent-kafka).

Two things the parser does not say, added here: which key a combination refers to (each key is then
checked alone), and that librdkafka reads integer properties as 32-bit numbers, so a larger value wraps
around silently (``2**32 + 5`` becomes 5). Not checked: what librdkafka reads only when it connects, such
as the files named by ``ssl.*`` keys, which the real client opens when the consumer starts.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from typing import Any

from static_consumer._security.secrets import REDACTED, is_secret_key, scrub
from static_consumer.settings._defaults import CLIENT_DEFAULTS

# librdkafka's log lines of the throw-away handle ("No bootstrap.servers configured") are expected.
_QUIET = logging.getLogger("static_consumer.librdkafka.settings_check")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
_INT32 = range(-(2**31), 2**31)
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
_NOT_A_NUMBER = "not-a-number"  # what a numeric property refuses and a string property takes

Value = str | int | float | bool
_Key = tuple[tuple[str, str, Value], ...]


def librdkafka_problems(passthrough: Mapping[str, Value], protocol: str, env_var: str) -> list[str]:
    """One line per key librdkafka refuses, naming the key and librdkafka's reason (secret values
    masked); empty when it accepts them all. ``env_var`` is named in each line."""
    if not passthrough:
        return []
    secrets = [str(v) for k, v in passthrough.items() if is_secret_key(k) and str(v)]
    return [
        f"librdkafka[{key!r}] ({env_var}): {scrub(reason, secrets)}{_library_default_in(reason, passthrough)}"
        for key, reason in _problems(_frozen(passthrough), protocol)
    ]


def _library_default_in(reason: str, passthrough: Mapping[str, Value]) -> str:
    """A note naming the library's default behind a refusal that mentions a key the user did not set."""
    named = [
        f"`{key}` to {d.value}"
        for key, d in CLIENT_DEFAULTS.items()
        if key in reason and key not in passthrough
    ]
    return f" (the library sets {', '.join(named)} unless `librdkafka` sets it)" if named else ""


def _frozen(passthrough: Mapping[str, Value]) -> _Key:
    # The type is part of the key: 1, 1.0 and True are equal in Python but not to librdkafka.
    return tuple(sorted((k, type(v).__name__, v) for k, v in passthrough.items()))


@functools.lru_cache(maxsize=256)
def _problems(frozen: _Key, protocol: str) -> tuple[tuple[str, str], ...]:
    passthrough = {k: v for k, _, v in frozen}
    wrapping = tuple((k, why) for k, v in passthrough.items() if (why := _wraps(k, v)) is not None)
    reason = _refusal(passthrough, protocol)
    if reason is None:
        return wrapping
    alone = tuple((k, r) for k in passthrough if (r := _refusal({k: passthrough[k]}, protocol)) is not None)
    if alone:
        return alone + tuple(w for w in wrapping if w[0] not in dict(alone))
    # Only the combination is refused: name the keys librdkafka's reason mentions (else all of them).
    named = [k for k in passthrough if k in reason] or list(passthrough)
    return tuple((k, f"librdkafka refuses the combination: {reason}") for k in named) + wrapping


def _refusal(config: Mapping[str, Value], protocol: str) -> str | None:
    """librdkafka's (or confluent-kafka's) reason for refusing ``config``; None when it accepts it."""
    import confluent_kafka  # here, not at import: building settings must not load the client library

    full: dict[str, Any] = {"group.id": "static-consumer-settings-check", "group.protocol": protocol}
    # On top of the library's defaults, as the consumer gets it: `reconnect.backoff.max.ms` 50 is refused
    # against librdkafka's `reconnect.backoff.ms` of 100 but not against the library's 20.
    full.update({key: default.value for key, default in CLIENT_DEFAULTS.items()})
    full.update(config)
    full["logger"] = _QUIET
    try:
        client = confluent_kafka.Consumer(full)  # no bootstrap.servers: librdkafka connects nowhere
    except confluent_kafka.KafkaException as exc:
        error = exc.args[0] if exc.args else None
        return str(error.str() if isinstance(error, confluent_kafka.KafkaError) else exc).strip()
    except Exception as exc:  # noqa: BLE001 - confluent-kafka raises TypeError/ValueError for some keys
        return f"{type(exc).__name__}: {exc}"
    client.close()
    return None


def _wraps(key: str, value: Value) -> str | None:
    """Why ``value`` would silently wrap around as a 32-bit integer property; None when it would not."""
    if isinstance(value, bool) or not isinstance(value, int | str) or not _INTEGER.fullmatch(str(value)):
        return None
    number = int(str(value))
    if number in _INT32 or _refusal({key: _NOT_A_NUMBER}, "classic") is None:
        return None  # in range, or a string property (which takes any text)
    shown = REDACTED if is_secret_key(key) else str(number)
    return (
        f"librdkafka reads this property as a 32-bit integer, so {shown} would silently wrap around; "
        f"use a value from {_INT32.start} to {_INT32.stop - 1}"
    )


__all__ = ["librdkafka_problems"]
