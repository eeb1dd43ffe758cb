"""An asyncio service that consumes as a static member and answers health checks on the same loop.

Everything comes from the environment (as in examples/statefulset.yaml):

- ``STATIC_CONSUMER_*``: the library's settings (bootstrap servers, group, topics, ...);
- ``POD_NAME``: the stable ``group.instance.id`` (e.g. ``orders-2``);
- ``HEALTH_PORT`` (default 8080; 0 picks a free port): ``GET /healthz`` answers 200 unless the member
  was fenced or failed, ``GET /readyz`` 200 only while it is in the group (RUNNING); both return the
  consumer's status as JSON. The status is read without waiting for a poll in progress.

The health server and the consumer share one event loop; librdkafka runs on the consumer's own thread,
so a slow poll never delays a health check. On SIGTERM (through the loop) the batch in hand is finished
and committed, the consumer closes *without* LeaveGroup (the replacement pod with the same name takes
the same partitions back without a rebalance), then the server stops. Exit codes: 0 after SIGTERM, 82
when fenced (another process holds this instance id: do not restart into a fight), 78 bad settings, 69
brokers without static membership, 75 brokers unreachable, 70 anything else.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os

from static_consumer import ConsumerSettings, RecordBatch, State, exit_code_for
from static_consumer.aio import AsyncStaticConsumer, run_until_sigterm

log = logging.getLogger("asyncio_service")


async def handle(batch: RecordBatch) -> None:
    """The application's work; the batch is committed after this returns (at-least-once)."""
    for record in batch:
        log.debug("%s/%d@%d: %r", record.topic, record.partition, record.offset, record.value)
    await asyncio.sleep(0)  # e.g. await a database write here
    print(f"handled {len(batch)}", flush=True)


def health_server(consumer: AsyncStaticConsumer) -> object:
    """A tiny HTTP/1.0 responder on the loop (stdlib only): /healthz and /readyz."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5)
            path = request.split()[1].decode() if len(request.split()) > 1 else "/"
            status = consumer.status()
            alive = status.state not in (State.FENCED, State.FAILED)
            ok = {"/healthz": alive, "/readyz": status.ready}.get(path)
            body = json.dumps(
                {
                    "state": status.state.value,
                    "ready": status.ready,
                    "stopping": status.stopping,
                    "group_id": status.group_id,
                    "instance_id": status.instance_id,
                    "member_id": status.member_id,
                    "generation": status.generation,
                    "assignment": [f"{tp.topic}-{tp.partition}" for tp in status.assignment],
                    "error": status.error,
                }
            ).encode()
            line = b"404 Not Found" if ok is None else b"200 OK" if ok else b"503 Service Unavailable"
            head = b"HTTP/1.0 " + line + b"\r\nContent-Type: application/json\r\nContent-Length: "
            writer.write(head + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    return answer


async def main() -> None:
    consumer = AsyncStaticConsumer(ConsumerSettings.load())
    port = int(os.environ.get("HEALTH_PORT", "8080"))
    server = await asyncio.start_server(health_server(consumer), "0.0.0.0", port)  # type: ignore[arg-type]
    print(f"health on port {server.sockets[0].getsockname()[1]}", flush=True)
    try:
        await run_until_sigterm(consumer, handle)  # returns after SIGTERM, once closed without leaving
    finally:
        server.close()
        await server.wait_closed()


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"))
    try:
        asyncio.run(main())
    except Exception as exc:
        log.error("consumer ended: %s", exc)
        raise SystemExit(exit_code_for(exc)) from exc
