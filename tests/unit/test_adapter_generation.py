"""Decoding the generation from librdkafka's serialized consumer group metadata."""

from __future__ import annotations

import struct

from static_consumer._core.confluent import parse_generation


def cgmd(generation: int, tail: bytes = b"orders\x00app-1-5f0c\x00\x00app-1\x00") -> bytes:
    # The layout librdkafka 2.16 writes (seen from confluent-kafka on a real broker): magic, the
    # generation as a host-order int32, then group id, member id and instance id.
    return b"CGMDv2:" + struct.pack("=i", generation) + tail


def test_generation_after_the_magic() -> None:
    assert parse_generation(cgmd(2)) == 2
    assert parse_generation(cgmd(70_000)) == 70_000


def test_no_generation_before_the_first_join() -> None:
    assert parse_generation(cgmd(-1)) is None


def test_unknown_layouts_give_none() -> None:
    assert parse_generation(b"CGMDv3:" + struct.pack("=i", 2)) is None
    assert parse_generation(b"CGMDv2:\x01") is None
    assert parse_generation(None) is None
