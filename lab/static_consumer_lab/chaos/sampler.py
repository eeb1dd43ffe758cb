"""The committed-offsets sampler: a process of its own that asks the group's committed offsets every
``interval`` seconds with a plain kafka-python admin client (OffsetFetch), never through the members.

``python -m static_consumer_lab.chaos.sampler BOOTSTRAP GROUP TOPIC PARTITIONS OUT INTERVAL MAX_S``
appends ``{"at": <when asked>, "committed": {partition: offset}}`` per answer to OUT. A failed ask (a
broker away, the coordinator moving) is skipped and the client built again; the process ends on
SIGTERM or after MAX_S seconds.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any


def _client(bootstrap: str) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="chaos-sampler", request_timeout_ms=5000)


def sample(
    bootstrap: str, group: str, topic: str, partitions: int, out: str, interval: float, max_s: float
) -> None:
    from kafka import TopicPartition

    wanted = [TopicPartition(topic, p) for p in range(partitions)]
    deadline = time.monotonic() + max_s
    admin = None
    with open(out, "a", encoding="utf-8") as sink:
        while time.monotonic() < deadline:
            asked = time.time()
            try:
                admin = admin or _client(bootstrap)
                found = admin.list_group_offsets({group: wanted})[group]
            except Exception:  # noqa: BLE001 - a broker away or the coordinator moving: the next one
                if admin is not None:
                    admin.close()
                admin = None
            else:
                committed = {tp.partition: meta.offset for tp, meta in found.items() if meta.offset >= 0}
                sink.write(json.dumps({"at": asked, "committed": committed}, separators=(",", ":")) + "\n")
                sink.flush()
            time.sleep(max(0.0, asked + interval - time.time()))
    if admin is not None:
        admin.close()


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.CRITICAL)  # kafka-python's connection warnings: the skip says it
    bootstrap, group, topic, partitions, out, interval, max_s = argv
    sample(bootstrap, group, topic, int(partitions), out, float(interval), float(max_s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
