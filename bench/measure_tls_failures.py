"""Measure how TLS / OAUTHBEARER misconfigurations surface through each of the library's three clients.

    python bench/measure_tls_failures.py [--bound-s 5] [--out out/tls_failures.json]

Starts a one-node secure broker (the harness's TLS listeners), then for every failure case users hit
(unknown CA, hostname mismatch, expired client certificate, wrong key password, plaintext client to a
TLS port and the reverse, an OAUTHBEARER token provider that raises or returns an expired token, ...)
records, per path:

- ``kafka-python``: the raw exception of a KafkaAdminClient (what the probe and LeaveGroup use);
- ``probe``: what :func:`static_consumer._kafka.probe.probe` raises (the consumer's first step);
- ``librdkafka consumer``: the first error a raw confluent-kafka Consumer built from
  ``client_config(settings)`` reports (error_cb or poll), with KafkaError code and name;
- ``StaticConsumer``: what ``start()`` + ``consume()`` raise when the probe is bypassed, i.e. how the
  consumer itself meets the failure (``consume()`` is called for at most ``--bound-s`` x 3);
- ``describe``: what ``admin.members.describe_group`` raises (kafka-python path);
- ``AdminClient``: what ``_kafka.describe.describe_consumer_protocol`` raises, and the first error_cb error of
  a raw AdminClient;

each with the time to fail, and whether any configured secret (key password, token) showed up in the
message or in the DEBUG logs. Prints a Markdown table and writes the raw rows as JSON. Timings vary
with the machine's load; every row is one run.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from static_consumer import ConsumerSettings, StaticConsumer
from static_consumer._base.errors import StaticConsumerError
from static_consumer._core.modes import client_config
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer._kafka.describe import describe_consumer_protocol
from static_consumer._kafka.kafka_python import admin_client
from static_consumer._kafka.probe import probe
from static_consumer.admin.members import describe_group
from static_consumer.settings._config import admin_config
from static_consumer_lab.brokers import JvmKafkaCluster, create_topic, produce
from static_consumer_lab.secure.certs import generate_pki
from static_consumer_lab.secure.listeners import (
    MTLS,
    OAUTH,
    OTHER_HOST,
    SASL_MECHANISMS,
    SSL,
    SecureListeners,
)
from static_consumer_lab.secure.sasl import SaslUsers
from static_consumer_lab.secure.tokens import UnsecuredTokens

LOG = io.StringIO()


@dataclass
class Case:
    name: str
    fields: dict[str, Any]
    secrets: tuple[str, ...] = ()
    tokens: UnsecuredTokens | None = None


def cases(cluster: JvmKafkaCluster, bound_s: float) -> list[Case]:
    assert cluster.tls is not None
    pki = cluster.tls.pki
    base = {"connect_timeout_s": bound_s, "group_id": "measure", "instance_id": "measure-0"}

    def on(listener: str, **extra: Any) -> dict[str, Any]:
        fields = cluster.tls.settings_fields(listener, cluster.bootstrap_for(listener), **extra)  # type: ignore[union-attr]
        return base | fields

    wrong_pw = "wrong-key-pw-7Qx2"
    raising = UnsecuredTokens(fail=RuntimeError("identity provider unreachable"))
    expired = UnsecuredTokens(lifetime_s=-60.0)
    return [
        Case("unknown CA (client trusts another CA)", on(SSL) | {"ssl_ca_location": str(pki.other_ca)}),
        Case("hostname mismatch (cert for kafka.invalid)", on(OTHER_HOST)),
        Case(
            "hostname mismatch, ssl_endpoint_identification=False",
            on(OTHER_HOST) | {"ssl_endpoint_identification": False},
        ),
        Case(
            "expired client certificate (mTLS)",
            on(MTLS) | {"ssl_certificate_location": str(pki.expired_client_cert)},
        ),
        Case(
            "no client certificate on an mTLS listener",
            on(SSL) | {"bootstrap_servers": cluster.bootstrap_for(MTLS)},
        ),
        Case(
            "wrong key password",
            on(MTLS) | {"ssl_key_location": str(pki.client_key_encrypted), "ssl_key_password": wrong_pw},
            secrets=(wrong_pw, pki.client_key_password),
        ),
        Case(
            "encrypted key, no key password",
            on(MTLS) | {"ssl_key_location": str(pki.client_key_encrypted)},
        ),
        Case("PLAINTEXT client to a TLS port", base | {"bootstrap_servers": cluster.bootstrap_for(SSL)}),
        Case(
            "TLS client to a PLAINTEXT port",
            base
            | {
                "bootstrap_servers": cluster.bootstrap_servers,
                "security_protocol": "SSL",
                "ssl_ca_location": str(pki.ca),
            },
        ),
        Case("OAUTHBEARER provider raises", on(OAUTH, token_provider=raising), tokens=raising),
        Case(
            "OAUTHBEARER provider returns an expired token", on(OAUTH, token_provider=expired), tokens=expired
        ),
    ]


def timed(fn: Callable[[], object]) -> dict[str, Any]:
    began = time.monotonic()
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - recording what surfaces is the point
        return describe_exc(exc, time.monotonic() - began)
    return {"outcome": "no error", "seconds": round(time.monotonic() - began, 2)}


def describe_exc(exc: BaseException, seconds: float) -> dict[str, Any]:
    row: dict[str, Any] = {"outcome": type(exc).__name__, "message": str(exc), "seconds": round(seconds, 2)}
    if isinstance(exc, StaticConsumerError):
        row["exit_code"] = exc.exit_code
        row["retriable"] = exc.retriable
    err = exc.args[0] if exc.args else None
    if hasattr(err, "code") and hasattr(err, "name"):
        row["kafka_error"] = f"{err.code()} {err.name()}"
    return row


def raw_librdkafka(cfg: dict[str, Any], bound_s: float, *, admin: bool, topic: str) -> dict[str, Any]:
    """The first error a raw client reports (error_cb, or poll/consume raising), within ``bound_s``."""
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[tuple[float, Any]] = []
    began = time.monotonic()
    cfg = {**cfg, "error_cb": lambda err: errors.append((time.monotonic() - began, err))}
    cfg["logger"] = logging.getLogger("measure.librdkafka")
    try:
        client: Any = AdminClient(cfg) if admin else Consumer(cfg)
    except Exception as exc:  # noqa: BLE001
        return describe_exc(exc, time.monotonic() - began) | {"when": "constructor"}
    if not admin:
        client.subscribe([topic])
    raised: dict[str, Any] | None = None
    while time.monotonic() - began < bound_s and not errors and raised is None:
        try:
            if admin:
                client.list_topics(timeout=0.5)
                break  # metadata answered
            msg = client.poll(0.2)
            if msg is not None and msg.error() is not None:
                errors.append((time.monotonic() - began, msg.error()))
            elif msg is not None:
                break
        except KafkaException as exc:
            if admin:
                client.poll(0)
                continue
            raised = describe_exc(exc, time.monotonic() - began)
        except Exception as exc:  # noqa: BLE001 - e.g. the oauth_cb's own exception, re-raised by poll
            raised = describe_exc(exc, time.monotonic() - began)
    if not admin:
        client.close()
    if raised is not None:
        return raised | {"when": "poll raised"}
    if not errors:
        return {"outcome": f"no error within {bound_s:g} s", "seconds": round(time.monotonic() - began, 2)}
    at, err = errors[0]
    return {
        "outcome": "KafkaError",
        "kafka_error": f"{err.code()} {err.name()}",
        "message": err.str(),
        "fatal": err.fatal(),
        "retriable": err.retriable(),
        "seconds": round(at, 2),
        "later": sorted({f"{e.code()} {e.name()}" for _, e in errors[1:]}),
    }


def static_consumer(settings: ConsumerSettings, caps: BrokerCapabilities, bound_s: float) -> dict[str, Any]:
    """StaticConsumer with the probe bypassed: how the consumer itself meets the failure."""
    began = time.monotonic()
    consumer = StaticConsumer(settings, env={}, probe=lambda _s: caps)
    try:
        consumer.start()
        while time.monotonic() - began < bound_s:
            if consumer.consume(100, 0.5):
                return {"outcome": "consumed", "seconds": round(time.monotonic() - began, 2)}
            if consumer.assignment:
                return {"outcome": "joined (assigned)", "seconds": round(time.monotonic() - began, 2)}
    except Exception as exc:  # noqa: BLE001
        return describe_exc(exc, time.monotonic() - began)
    finally:
        try:
            consumer.close(5.0)
        except Exception:  # noqa: BLE001, S110 - closing a consumer that never started
            pass
    return {
        "outcome": f"no error within {bound_s:g} s (consume() returned nothing)",
        "seconds": round(bound_s, 2),
    }


def stdlib_tls(settings: ConsumerSettings) -> None:
    """One TLS handshake with Python's ssl module and the same files: a diagnosis candidate, since its
    errors name the reason (IP address mismatch, expired, unknown CA, bad decrypt, wrong version
    number). With PLAINTEXT settings it tries TLS anyway, without verification: success means the port
    speaks TLS."""
    import socket
    import ssl

    host, _, port = settings.bootstrap_servers.split(",")[0].rpartition(":")
    if settings.security_protocol.endswith("SSL"):
        ctx = ssl.create_default_context(cafile=settings.ssl_ca_location)
        ctx.check_hostname = settings.ssl_endpoint_identification
        if settings.ssl_certificate_location and settings.ssl_key_location:
            password = settings.ssl_key_password.get_secret_value() if settings.ssl_key_password else ""
            # A callable, never None: with None OpenSSL would prompt on the terminal for an encrypted key.
            ctx.load_cert_chain(
                settings.ssl_certificate_location, settings.ssl_key_location, lambda: password
            )
    else:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, int(port)), timeout=settings.connect_timeout_s) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as tls:
            tls.settimeout(1.0)
            try:  # TLS 1.3: a refused client certificate arrives as an alert after the handshake
                tls.recv(1)
            except TimeoutError:
                pass
            if not settings.security_protocol.endswith("SSL"):
                raise RuntimeError(
                    f"the port speaks TLS ({tls.version()}): use security_protocol SSL/SASL_SSL"
                )


def kafka_python_raw(settings: ConsumerSettings) -> None:
    with admin_client(settings, "measure") as admin:
        admin.describe_cluster()


def leaks(case: Case, rows: dict[str, dict[str, Any]], logged: str) -> list[str]:
    secrets = list(case.secrets) + ([t.value for t in case.tokens.issued] if case.tokens else [])
    found = []
    for path, row in rows.items():
        if any(s in json.dumps(row) for s in secrets):
            found.append(f"{path} message")
    if any(s in logged for s in secrets):
        found.append("DEBUG logs")
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bound-s", type=float, default=5.0)
    parser.add_argument("--out", default="out/tls_failures.json")
    args = parser.parse_args()
    handler = logging.StreamHandler(LOG)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    logging.basicConfig(level=logging.DEBUG, handlers=[handler])

    pki_dir = Path(tempfile.mkdtemp(prefix="measure-pki-"))
    users = SaslUsers({"alice": "alice-pw-measure"}, SASL_MECHANISMS)
    cluster = JvmKafkaCluster(1, tls=SecureListeners(generate_pki(pki_dir), users))
    results: list[dict[str, Any]] = []
    with cluster:
        topic = create_topic(cluster.bootstrap_servers, "measure", 1)
        produce(cluster.bootstrap_servers, topic, 10)
        plain = ConsumerSettings(bootstrap_servers=cluster.bootstrap_servers, group_id="measure")
        caps = probe(plain)
        for case in cases(cluster, args.bound_s):
            LOG.seek(0)
            LOG.truncate()
            try:
                settings = ConsumerSettings(topics=(topic,), **case.fields)
            except Exception as exc:  # noqa: BLE001
                results.append({"case": case.name, "rows": {"settings": describe_exc(exc, 0.0)}})
                continue
            bound = args.bound_s
            rows = {
                "stdlib ssl handshake (diagnosis candidate)": timed(lambda: stdlib_tls(settings)),  # noqa: B023
                "kafka-python (KafkaAdminClient)": timed(lambda: kafka_python_raw(settings)),  # noqa: B023
                "probe()": timed(lambda: probe(settings)),  # noqa: B023
                "librdkafka Consumer (raw)": raw_librdkafka(
                    client_config(settings, "measure-0"), 3 * bound, admin=False, topic=topic
                ),
                "StaticConsumer (probe bypassed)": static_consumer(settings, caps, 3 * bound),
                "describe_group() (kafka-python)": timed(lambda: describe_group(settings)),  # noqa: B023
                "describe_consumer_protocol() (AdminClient)": timed(
                    lambda: describe_consumer_protocol(settings, "measure")  # noqa: B023
                ),
                "AdminClient (raw error_cb)": raw_librdkafka(
                    admin_config(settings), 3 * bound, admin=True, topic=topic
                ),
            }
            leaked = leaks(case, rows, LOG.getvalue())
            results.append({"case": case.name, "rows": rows, "secret_leaks": leaked})
            print(f"measured: {case.name}", flush=True)
    shutil.rmtree(pki_dir, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(render(results))


def render(results: list[dict[str, Any]]) -> str:
    lines = ["| case | client path | outcome | code / exit | time s | message |", "|---|---|---|---|---|---|"]
    for result in results:
        for path, row in result["rows"].items():
            code = row.get("kafka_error") or (f"exit {row['exit_code']}" if "exit_code" in row else "")
            message = str(row.get("message", "")).replace("|", "\\|").replace("\n", " ")[:300]
            lines.append(
                f"| {result['case']} | {path} | {row['outcome']} | {code} | {row['seconds']} | {message} |"
            )
        if result.get("secret_leaks"):
            lines.append(f"| {result['case']} | SECRET LEAK | {', '.join(result['secret_leaks'])} | | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
