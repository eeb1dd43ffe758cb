"""Secure clusters: through every TLS listener of one real broker, ONE ConsumerSettings object
drives all three clients the library runs: kafka-python (capability probe, DescribeGroups, LeaveGroup),
librdkafka's consumer, and librdkafka's AdminClient (ConsumerGroupDescribe of the KIP-848 group).

Per listener (SSL, mutual TLS with a password-protected key, SASL_SSL with SCRAM-SHA-512 and with PLAIN,
OAUTHBEARER): probe; two static members join and consume everything, committing; describe; a clean
restart of one member gets its partitions back while the other sees no revocation; scale-down removes
the other; remove-members removes the first; no secret of the listener reaches a DEBUG log record, the
repr, the JSON dump or the JSONL event log. Members are KIP-848 (``protocol="consumer"``) because only
then is the group described through the AdminClient as well; the group protocol does not touch TLS.

Besides: OAUTHBEARER tokens are refreshed before they expire (the broker closes expired sessions), the
Spark bridge runs through every listener (one local Spark session for all), classic static members
restart and are described through the mutual-TLS listener, and ``ssl_endpoint_identification=False``
reaches all three clients. The failures are in test_tls_failures.py.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from static_consumer import ConsumerSettings, MembershipListener, Revoked, StaticConsumer
from static_consumer._base.errors import StaticConsumerError
from static_consumer._base.records import Record, TopicPartition
from static_consumer._base.retry import RetryPolicy
from static_consumer._core.events import Lost
from static_consumer._kafka.probe import probe
from static_consumer.admin.members import describe_group, remove_members, scale_down
from static_consumer.telemetry import EventLog
from static_consumer_lab.brokers import JvmKafkaCluster, committed_offsets, create_topic, produce
from static_consumer_lab.brokers.kafka_ops import describe_consumer_group as describe_on_broker
from static_consumer_lab.brokers.kafka_ops import high_watermarks
from static_consumer_lab.children.processes import wait_until
from static_consumer_lab.secure.listeners import MTLS, OAUTH, OTHER_HOST, SASL_SSL, SSL
from static_consumer_lab.secure.tokens import UnsecuredTokens

PARTITIONS = 4
RECORDS = 400
STATEFULSET = "tls"
# librdkafka debug contexts around a login (conf dumps the configuration, passwords included by name).
LIBRDKAFKA_DEBUG = "security,broker,conf"
CASES = [
    pytest.param(SSL, None, id="ssl"),
    pytest.param(MTLS, None, id="mtls"),
    pytest.param(SASL_SSL, "SCRAM-SHA-512", id="sasl_ssl-scram-sha-512"),
    pytest.param(SASL_SSL, "PLAIN", id="sasl_ssl-plain"),
    pytest.param(OAUTH, "OAUTHBEARER", id="oauthbearer"),
]


class Revocations(MembershipListener):
    """Partitions this member gave up (revoked or lost), with when."""

    def __init__(self) -> None:
        self.given_up: list[tuple[float, frozenset[TopicPartition]]] = []

    def on_revoked(self, event: Revoked) -> None:
        if event.partitions:
            self.given_up.append((time.monotonic(), frozenset(event.partitions)))

    def on_lost(self, event: Lost) -> None:
        if event.partitions:
            self.given_up.append((time.monotonic(), frozenset(event.partitions)))

    def since(self, moment: float) -> list[frozenset[TopicPartition]]:
        return [parts for at, parts in self.given_up if at >= moment]


def secure_settings(
    cluster: JvmKafkaCluster, listener: str, mechanism: str | None, **fields: Any
) -> ConsumerSettings:
    """The one settings object for ``listener``. Mutual TLS uses the password-protected key, so
    ``ssl_key_password`` reaches all three clients too."""
    assert cluster.tls is not None
    tokens = UnsecuredTokens("alice") if listener == OAUTH else None
    security = cluster.tls.settings_fields(
        listener, cluster.bootstrap_for(listener), mechanism=mechanism, token_provider=tokens
    )
    if listener == MTLS:
        pki = cluster.tls.pki
        security |= {
            "ssl_key_location": str(pki.client_key_encrypted),
            "ssl_key_password": pki.client_key_password,
        }
    return ConsumerSettings(connect_timeout_s=10.0, shutdown_timeout_s=10.0, **security, **fields)


class Members:
    """In-process static members of one group, named by pod (their POD_NAME), polled in turn."""

    def __init__(self, settings: ConsumerSettings, event_log: Path, harness_bootstrap: str) -> None:
        self.settings = settings
        self.event_log = event_log
        self.harness_bootstrap = harness_bootstrap  # PLAINTEXT, for what the broker says on a timeout
        self.live: dict[str, StaticConsumer] = {}
        self.revocations: dict[str, Revocations] = {}
        self.seen: set[tuple[int, int]] = set()
        self.warnings = _RecentWarnings()
        logging.getLogger("static_consumer").addHandler(self.warnings)

    def start(self, pod: str) -> StaticConsumer:
        self.revocations[pod] = Revocations()
        listeners = [self.revocations[pod], EventLog(self.event_log)]
        member = StaticConsumer(self.settings, listeners=listeners, env={"POD_NAME": pod})
        self.live[pod] = member.start()
        return member

    def close(self, pod: str) -> None:
        self.live.pop(pod).close()  # a static member: no LeaveGroup

    def poll_all(self) -> None:
        for member in list(self.live.values()):
            records: list[Record] = member.consume(500, 0.1)
            if records:
                self.seen.update((r.partition, r.offset) for r in records)
                member.commit(records)

    def poll_until(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        def step() -> bool:
            self.poll_all()
            return condition()

        wait_until(step, timeout_s, lambda: f"{what}; {self.state()}", poll_s=0.0)

    def state(self) -> str:
        """Where the members and the broker are: for a timeout's message (the CI shows only that line)."""
        (topic,) = self.settings.topics
        try:
            ends = high_watermarks(self.harness_bootstrap, topic, PARTITIONS)
            group = describe_on_broker(self.harness_bootstrap, self.settings.group_id, ready_within_s=0)
            assigned = [(m.group_instance_id, _parts(m.assignment.topic_partitions)) for m in group.members]
            broker = f"{group.state} {assigned}"
        except Exception as exc:  # noqa: BLE001 - a diagnostic: say why there is none
            ends, broker = {}, f"not described ({exc})"
        owned = {pod: _parts(parts) for pod, parts in self.owned().items()}
        return (
            f"seen per partition {_counts(self.seen)} of high watermarks "
            f"{[ends.get(p) for p in range(PARTITIONS)]}; "
            f"owned {owned}; broker: {broker}; recent warnings: {list(self.warnings.recent)}"
        )

    def owned(self) -> dict[str, frozenset[TopicPartition]]:
        return {pod: member.assignment for pod, member in self.live.items()}

    def settled(self) -> bool:
        owned = self.owned()
        parts = [tp for tps in owned.values() for tp in tps]
        return all(owned.values()) and len(parts) == len(set(parts)) == PARTITIONS

    def close_all(self) -> None:
        for pod in list(self.live):
            self.close(pod)
        logging.getLogger("static_consumer").removeHandler(self.warnings)

    def join(self, *pods: str) -> dict[str, frozenset[TopicPartition]]:
        """Start ``pods`` and consume every record until the partitions are spread: who owns what."""
        for pod in pods:
            self.start(pod)
        what = f"{RECORDS} records, {len(pods)} members"
        self.poll_until(lambda: len(self.seen) >= RECORDS and self.settled(), 90, what)
        return self.owned()

    def restart(self, pod: str) -> None:
        """A clean restart of ``pod`` (close without LeaveGroup, start with the same instance id): it gets
        its partitions back and no other member gives any up."""
        before, restarted_at = self.owned(), time.monotonic()
        self.close(pod)
        self.start(pod)
        self.poll_until(lambda: self.owned() == before, 60, f"{pod} back with {sorted(before[pod])}")
        assert [p for p in self.live if p != pod and self.revocations[p].since(restarted_at)] == []


@pytest.fixture
def members() -> Iterator[list[Members]]:
    made: list[Members] = []
    yield made
    for group in made:
        group.close_all()


@pytest.mark.parametrize(("listener", "mechanism"), CASES)
def test_one_settings_object_drives_every_client_through_the_listener(
    listener: str,
    mechanism: str | None,
    kafka_secure_cluster: JvmKafkaCluster,
    kafka_group_id_factory: Callable[..., str],
    members: list[Members],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.DEBUG)  # kafka-python logs its requests (SASL ones too) at DEBUG
    for name in ("kafka", "static_consumer"):  # a CLI run earlier in the session may have quietened them
        logging.getLogger(name).setLevel(logging.NOTSET)
    cluster = kafka_secure_cluster
    group = kafka_group_id_factory()
    assert cluster.tls is not None
    topic = create_topic(cluster.bootstrap_servers, f"t-{group}", PARTITIONS)  # the harness: PLAINTEXT
    settings = secure_settings(
        cluster,
        listener,
        mechanism,
        group_id=group,
        topics=(topic,),
        protocol="consumer",
        max_poll_interval_ms=30_000,
        librdkafka={"debug": LIBRDKAFKA_DEBUG},
    )
    bootstrap = cluster.bootstrap_for(listener)
    tokens = TokenCalls(settings)
    producer = cluster.tls.client_config(
        listener, bootstrap, mechanism=mechanism, token_provider=tokens.tokens
    )
    assert produce(bootstrap, topic, RECORDS, extra=producer) == RECORDS  # through the listener too
    tokens.asked("producer")
    caps = probe(settings)  # kafka-python: ApiVersions, broker and group configs
    tokens.asked("probe")
    assert caps.supports_consumer_protocol and caps.supports_leave_group_batch
    # The stock broker's group settings (Kafka's defaults), read through the secure listener.
    assert (caps.group_min_session_timeout_ms, caps.consumer_session_timeout_ms) == (6000, 45000)

    pods = Members(settings, tmp_path / "members.jsonl", cluster.bootstrap_servers)
    members.append(pods)
    a, b = f"{STATEFULSET}-0", f"{STATEFULSET}-1"
    before = pods.join(a, b)
    tokens.asked("consumers")

    described = describe_group(settings)  # DescribeGroups (kafka-python), then the AdminClient
    assert described.group_type == "consumer"
    assert sorted(m.instance_id or "" for m in described.members) == [a, b]
    tokens.asked("describe")

    pods.restart(a)  # close (no LeaveGroup), start with the same instance id: same partitions back

    # scale-down to one replica removes b (stopped first, like a pod the StatefulSet deleted) ...
    pods.close(b)
    scaled = scale_down(settings, replicas=1, statefulset=STATEFULSET)
    assert (scaled.removed, scaled.failed) == ((b,), ())
    pods.poll_until(lambda: pods.owned().get(a) == frozenset().union(*before.values()), 60, f"{a} owns all")
    # ... and remove-members removes a.
    pods.close(a)
    removed = remove_members(settings, [a])
    assert (removed.removed, removed.failed) == ((a,), ())
    assert describe_group(settings).members == ()

    ends = {p: n for p, n in enumerate(_counts(pods.seen))}
    assert committed_offsets(cluster.bootstrap_servers, group, topic, PARTITIONS) == ends

    # No secret of this listener in any log record, repr or dump: passwords, key password, tokens.
    assert cluster.tls is not None
    secrets = [*cluster.tls.users.users.values(), cluster.tls.pki.client_key_password]
    secrets += [t.value for t in tokens.tokens.issued] if tokens.tokens else []
    logged = caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    assert {r.name for r in caplog.records} >= {"kafka.net.connection", "static_consumer.librdkafka"}
    shown = [repr(settings), settings.model_dump_json(), logged, pods.event_log.read_text()]
    assert [s for s in secrets if any(s in text for text in shown)] == []


class TokenCalls:
    """With OAUTHBEARER: checks that each step asked the token provider (so that client used it)."""

    def __init__(self, settings: ConsumerSettings) -> None:
        provider = settings.sasl_oauth_token_provider
        self.tokens = provider if isinstance(provider, UnsecuredTokens) else None
        self.last = 0

    def asked(self, step: str) -> None:
        if self.tokens is not None:
            calls = self.tokens.calls
            print(f"{step}: token provider called {calls - self.last} time(s)")
            assert calls > self.last, f"{step} never asked the token provider"
            self.last = calls


class _RecentWarnings(logging.Handler):
    """The last few warnings the library logged (librdkafka's included)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.recent: deque[str] = deque(maxlen=5)

    def emit(self, record: logging.LogRecord) -> None:
        self.recent.append(f"{record.name}: {record.getMessage()}"[:300])


def _parts(partitions: Any) -> list[int]:
    return sorted(tp.partition for tp in partitions)


def _counts(seen: set[tuple[int, int]]) -> list[int]:
    """Records per partition (every partition was read from offset 0 on)."""
    counts = [0] * PARTITIONS
    for partition, _offset in seen:
        counts[partition] += 1
    return counts


def test_oauthbearer_tokens_are_refreshed_before_they_expire(
    kafka_secure_cluster: JvmKafkaCluster, kafka_group_id_factory: Callable[..., str]
) -> None:
    """Tokens that live 6 s, a consumer that runs for 18 s: the broker closes any connection whose token
    expired (KIP-368 re-authentication is on for the OAUTH listener), so the consumer only keeps
    receiving if librdkafka asked the provider again and logged in again before each expiry.

    The loop commits as docs/errors.md tells users to: a RetriableError (a connection to the coordinator
    dropped around a re-login on a busy machine, `_WAIT_COORD`) is committed again through the library's
    own bounded RetryPolicy; what must hold is that nothing is lost or repeated and the last commit lands."""
    cluster = kafka_secure_cluster
    assert cluster.tls is not None
    group = kafka_group_id_factory()
    topic = create_topic(cluster.bootstrap_servers, f"t-{group}", 1)
    tokens = UnsecuredTokens("alice", lifetime_s=6.0)
    security = cluster.tls.settings_fields(OAUTH, cluster.bootstrap_for(OAUTH), token_provider=tokens)
    settings = ConsumerSettings(
        group_id=group, topics=(topic,), instance_id="refresh-0", session_timeout_ms=10_000, **security
    )
    produced = 0
    received: list[Record] = []
    with StaticConsumer(settings, env={}) as consumer:
        began = time.monotonic()
        while time.monotonic() - began < 18:
            produced += produce(cluster.bootstrap_servers, topic, 10, start=produced)
            deadline = time.monotonic() + 10
            while len(received) < produced and time.monotonic() < deadline:
                received += consumer.consume(100, 0.2)
            assert len(received) == produced, f"stuck at {len(received)} of {produced} records"
            RetryPolicy(deadline_s=30).call(partial(consumer.commit, received[-1:]), what="commit")
    print(f"{produced} records in {time.monotonic() - began:.1f} s; provider called {tokens.calls} times")
    # A token at the start, then one per 80% of 6 s: at least 3 more in 18 s.
    assert tokens.calls >= 4
    assert [r.offset for r in received] == list(range(produced))
    assert committed_offsets(cluster.bootstrap_servers, group, topic, 1) == {0: produced}


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One local SparkSession for every listener below (its start-up is most of the cost)."""
    from static_consumer.spark import spark_session

    session = spark_session(driver_memory="1g", conf={"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


SPARK_RECORDS = 40


@pytest.mark.parametrize(("listener", "mechanism"), CASES)
def test_the_spark_bridge_through_the_listener(
    listener: str,
    mechanism: str | None,
    spark: Any,
    kafka_secure_cluster: JvmKafkaCluster,
    kafka_group_id_factory: Callable[..., str],
) -> None:
    """The bridge builds its StaticConsumer (probe included) from the settings it is given, so the same
    settings object must carry each listener's security through it: files, passwords, and for
    OAUTHBEARER a callable."""
    from static_consumer.spark import BatchInfo, MicroBatchRunner

    cluster = kafka_secure_cluster
    group = kafka_group_id_factory()
    topic = create_topic(cluster.bootstrap_servers, f"t-{group}", 2)
    produce(cluster.bootstrap_servers, topic, SPARK_RECORDS)
    settings = secure_settings(
        cluster, listener, mechanism, group_id=group, topics=(topic,), instance_id="spark-0"
    )
    counted: list[int] = []

    def count(df: Any, info: BatchInfo) -> None:
        counted.append(df.count())
        if sum(counted) >= SPARK_RECORDS:
            runner.stop()  # everything is there: the batch in flight is committed, then run() returns

    # The idle timeout only bounds a failing run: on a stock broker a first assignment can take a 5 s
    # KIP-848 heartbeat or the classic group's 3 s initial delay, and the idle time counts from run()'s start.
    runner = MicroBatchRunner(settings, count, spark=spark)
    summary = runner.run(idle_timeout_s=30.0)
    assert (summary.records, sum(counted)) == (SPARK_RECORDS, SPARK_RECORDS)
    committed = committed_offsets(cluster.bootstrap_servers, group, topic, 2)
    assert sum(committed.values()) == SPARK_RECORDS


def test_classic_static_members_restart_and_are_described_through_mutual_tls(
    kafka_secure_cluster: JvmKafkaCluster,
    kafka_group_id_factory: Callable[..., str],
    members: list[Members],
    tmp_path: Path,
) -> None:
    """The classic protocol through one TLS listener (the others run KIP-848 above): joining, a clean
    restart keeping the partitions, and a description through DescribeGroups with subscriptions."""
    cluster = kafka_secure_cluster
    group = kafka_group_id_factory()
    topic = create_topic(cluster.bootstrap_servers, f"t-{group}", PARTITIONS)
    produce(cluster.bootstrap_servers, topic, RECORDS)
    settings = secure_settings(
        cluster,
        MTLS,
        None,
        group_id=group,
        topics=(topic,),
        protocol="classic",
        session_timeout_ms=10_000,
        max_poll_interval_ms=30_000,
    )
    pods = Members(settings, tmp_path / "members.jsonl", cluster.bootstrap_servers)
    members.append(pods)
    a, b = f"{STATEFULSET}-0", f"{STATEFULSET}-1"
    before = pods.join(a, b)

    described = describe_group(settings)
    assert (described.group_type, described.state) == ("classic", "Stable")
    assert {m.instance_id: m.assignment for m in described.members} == {
        pod: tuple(sorted(parts)) for pod, parts in before.items()
    }
    assert {m.subscription for m in described.members} == {(topic,)}

    pods.restart(a)


def test_hostname_verification_can_be_switched_off_deliberately_for_all_three_clients(
    kafka_secure_cluster: JvmKafkaCluster, kafka_group_id_factory: Callable[..., str]
) -> None:
    """The OTHERHOST listener's certificate names kafka.invalid, not 127.0.0.1: every client refuses it
    unless ssl_endpoint_identification=False (the CA is still checked). How the refusal surfaces is in
    bench/measure_tls_failures.py; here only that switching it off reaches the probe, the AdminClient
    (describing a group that does not exist falls through to ConsumerGroupDescribe) and the consumer."""
    cluster = kafka_secure_cluster
    group = kafka_group_id_factory()
    topic = create_topic(cluster.bootstrap_servers, f"t-{group}", 1)
    produce(cluster.bootstrap_servers, topic, 10)
    settings = secure_settings(
        cluster,
        OTHER_HOST,
        None,
        group_id=group,
        topics=(topic,),
        instance_id="other-0",
        ssl_endpoint_identification=False,
    )
    assert probe(settings).supports_classic_static
    # The group coordinator may still be loading on a fresh broker (a retriable error).
    assert RetryPolicy(deadline_s=60).call(lambda: describe_group(settings)).members == ()
    got: list[Record] = []
    with StaticConsumer(settings, env={}) as consumer:
        deadline = time.monotonic() + 60
        while len(got) < 10 and time.monotonic() < deadline:
            got += consumer.consume(10, 0.2)
    assert len(got) == 10
    verified = settings.model_copy(update={"ssl_endpoint_identification": True, "connect_timeout_s": 2.0})
    with pytest.raises(StaticConsumerError):
        probe(verified)
