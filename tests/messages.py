"""confluent-kafka Messages as the client hands them out, and the Record implementations, for the unit
tests of the adapter's conversion and of Record (a real Message object; no broker involved)."""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import confluent_kafka
import pytest

from static_consumer._base.records import pure as _pyrecord


def message(offset: int, partition: int = 0, **fields: Any) -> confluent_kafka.Message:
    """A message of topic "orders" with key ``k<offset>``, value ``v<offset>``, a create time of
    1_700_000_000_000 + offset and no headers, unless ``fields`` say otherwise."""
    made: dict[str, Any] = {
        "topic": "orders",
        "partition": partition,
        "offset": offset,
        "key": b"k%d" % offset,
        "value": b"v%d" % offset,
        "timestamp": (confluent_kafka.TIMESTAMP_CREATE_TIME, 1_700_000_000_000 + offset),
        "headers": None,
    }
    made.update(fields)
    return confluent_kafka.Message(**made)


def _native() -> ModuleType | None:
    try:
        from static_consumer._base.records import native as _crecord
    except ImportError:
        if os.environ.get("CI") == "true":  # CI installs with a compiler: a missing build is a failure there
            raise
        return None
    return _crecord


NATIVE_MODULE = _native()
IMPLEMENTATIONS = [
    pytest.param(
        NATIVE_MODULE,
        id="native",
        marks=pytest.mark.skipif(NATIVE_MODULE is None, reason="the C extension is not built"),
    ),
    pytest.param(_pyrecord, id="pure-python"),
]
"""Parametrize a test over both Record modules (``Record``, ``wrap``, ``wrap_one``, ``column``)."""
