"""What the demo compares: the group setups a team would actually choose between, and the run's knobs.

The dynamic controls are plain confluent-kafka consumers configured the way their documentation says
(no static_consumer code in them); the static ones are :class:`static_consumer.StaticConsumer` members.
Every strategy gets the same max.poll.interval.ms, batch size and workload, and the session and
heartbeat its protocol has on a stock (or hosted) broker: under KIP-848 the broker's 45 s session and
5 s heartbeat (group configs a hosted service does not let a user lower), under classic the clients'
defaults (librdkafka's and static_consumer's alike: 45 s session, 3 s heartbeat). ``--lab`` runs on a
broker with lowered minimums instead, every group with ``--session-timeout-s`` and 500 ms heartbeats.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from static_consumer_lab.brokers.jvm import STOCK_GROUP_CONFIG
from static_consumer_lab.children.specs import static_spec

# Stock: what a hosted service gives each protocol. KIP-848: Apache Kafka's group.consumer.session.timeout.ms
# and group.consumer.heartbeat.interval.ms (also their minimums); classic: librdkafka's session.timeout.ms
# and heartbeat.interval.ms defaults, which static_consumer's settings share (45000, min(3000, 45000 / 3)).
STOCK_CLASSIC_SESSION_MS, STOCK_CLASSIC_HEARTBEAT_MS = 45000, 3000
STOCK_CONSUMER_SESSION_MS = int(STOCK_GROUP_CONFIG["group.consumer.session.timeout.ms"])
STOCK_CONSUMER_HEARTBEAT_MS = int(STOCK_GROUP_CONFIG["group.consumer.heartbeat.interval.ms"])
LAB_SESSION_S, LAB_HEARTBEAT_MS = 20.0, 500
BATCH = 100
# max.poll.interval.ms, which is also the rebalance timeout: how long a KIP-848 member may take to give up
# partitions it was asked to revoke before the broker fences it. librdkafka 2.16 members were seen to
# stall there while many members joined at once (the broker log says "failed to transition from epoch N
# within 300000ms"); 60 s bounds that stall, and still covers the longest state rebuild of a run.
MAX_POLL_MS = 60000


@dataclass(frozen=True)
class Strategy:
    name: str
    protocol: Literal["classic", "consumer"]
    static: bool
    assignor: str
    description: str


STRATEGIES: tuple[Strategy, ...] = (
    Strategy("eager", "classic", False, "range", "dynamic members, classic protocol, eager range assignor"),
    Strategy(
        "cooperative",
        "classic",
        False,
        "cooperative-sticky",
        "dynamic members, classic protocol, cooperative-sticky assignor (KIP-429)",
    ),
    Strategy(
        "kip848",
        "consumer",
        False,
        "uniform",
        "dynamic members, consumer protocol (KIP-848), broker assignor",
    ),
    Strategy("static", "classic", True, "range", "static_consumer, classic protocol (KIP-345), range"),
    Strategy(
        "static-kip848",
        "consumer",
        True,
        "uniform",
        "static_consumer, consumer protocol (KIP-848), broker assignor, restart_state_dir",
    ),
)
BY_NAME = {s.name: s for s in STRATEGIES}
# What a team would choose between today; eager (which few still run) is in the full set, it costs the
# default run a fifth more processes on a 2-core machine.
DEFAULT_STRATEGIES = ("cooperative", "kip848", "static", "static-kip848")
ALL_STRATEGIES = tuple(s.name for s in STRATEGIES)


@dataclass(frozen=True)
class DemoConfig:
    """The knobs of one run (all shown in the report header). Raises ValueError saying what to change."""

    members: int = 6
    rounds: int = 1
    partitions: int = 12
    rate_per_s: int = 200
    restart_delay_s: float = 2.0
    processing_ms: float = 5.0
    state_warmup_s: float = 1.0
    session_timeout_s: float | None = None  # --lab only (default LAB_SESSION_S); stock: see sessions()
    lab: bool = False
    kill: bool = False
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    settle_s: float = 1.5  # a group counts as settled after this long without an ownership change
    lead_s: float = 4.0  # steady state recorded before the first restart
    tail_s: float = 5.0  # and after the last

    def __post_init__(self) -> None:
        unknown = [s for s in self.strategies if s not in BY_NAME]
        problems = [
            (
                not self.strategies or unknown,
                f"--strategies takes some of {', '.join(BY_NAME)} (got {unknown})",
            ),
            (self.members < 2, "--members must be at least 2"),
            (
                self.rounds < 0 or (self.rounds == 0 and not self.kill),
                "--rounds must be >= 1 (or 0 with --kill)",
            ),
            (self.partitions < self.members, "--partitions must be at least --members"),
            (self.rate_per_s <= 0, "--rate must be positive"),
            (min(self.restart_delay_s, self.processing_ms, self.state_warmup_s) < 0, "delays must be >= 0"),
            (
                self.session_timeout_s is not None and not self.lab,
                "--session-timeout-s needs --lab: a stock broker holds KIP-848 sessions to 45-60 s and the "
                "classic clients default to 45 s",
            ),
            # KIP-848 groups take it as consumer.session.timeout.ms, which the broker caps at 60 s.
            (
                self.session_timeout_s is not None and not 1 <= self.session_timeout_s <= 60,
                "--session-timeout-s must lie within 1..60",
            ),
            (
                self.processing_ms * self.rate_per_s > 500 * self.members,
                "--processing-ms x --rate needs more than half of the members' time: the group could not "
                "catch up after a pause; lower one of them or add --members",
            ),
        ]
        wrong = [message for bad, message in problems if bad]
        if wrong:
            raise ValueError("; ".join(wrong))

    def sessions(self) -> dict[str, tuple[int, int]]:
        """Per protocol, the (session timeout, heartbeat interval) in ms its groups run with."""
        if self.lab:
            chosen = LAB_SESSION_S if self.session_timeout_s is None else self.session_timeout_s
            session_ms = int(1000 * chosen)
            return {"classic": (session_ms, LAB_HEARTBEAT_MS), "consumer": (session_ms, LAB_HEARTBEAT_MS)}
        return {
            "classic": (STOCK_CLASSIC_SESSION_MS, STOCK_CLASSIC_HEARTBEAT_MS),
            "consumer": (STOCK_CONSUMER_SESSION_MS, STOCK_CONSUMER_HEARTBEAT_MS),
        }

    @property
    def longest_session_s(self) -> float:
        return max(session for session, _heartbeat in self.sessions().values()) / 1000

    @property
    def steps(self) -> int:
        return self.members * (self.rounds + int(self.kill))


def spec(
    strategy: Strategy,
    cfg: DemoConfig,
    bootstrap: str,
    group_id: str,
    topic: str,
    member: str,
    state_dir: Path,
) -> dict[str, Any]:
    """The child-process spec of one member of ``strategy``."""
    workload = {
        "member": member,
        "processing_ms": cfg.processing_ms,
        "state_dir": str(state_dir),
        "warmup_s": cfg.state_warmup_s,
        "alive_s": 1.0,
    }
    session_ms, heartbeat_ms = cfg.sessions()["classic"]
    # A commit refused because the partitions moved during the batch is ridden out by the library's loop
    # (static members) and by the plain consumer alike: the new owner processes those records again.
    common = {"batch": BATCH, "max_runtime_s": 7200, "workload": workload}
    if strategy.static:
        settings: dict[str, Any] = {"protocol": strategy.protocol, "max_poll_interval_ms": MAX_POLL_MS}
        if strategy.protocol == "classic":
            settings |= {"session_timeout_ms": session_ms, "heartbeat_interval_ms": heartbeat_ms}
        else:
            # As the Kubernetes kit sets it (an emptyDir per pod): a member killed and started again takes
            # its dead incarnation's partitions back at once instead of waiting out its session.
            settings |= {
                "remote_assignor": strategy.assignor,
                "restart_state_dir": str(state_dir / "restart"),
            }
        # static_spec leaves the classic-only session settings out under KIP-848 (set on the group instead)
        return {**static_spec(bootstrap, group_id, [topic], member, **settings), **common}
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "max.poll.interval.ms": MAX_POLL_MS,
    }
    if strategy.protocol == "classic":
        config |= {
            "partition.assignment.strategy": strategy.assignor,
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": heartbeat_ms,
        }
    else:
        config |= {"group.protocol": "consumer", "group.remote.assignor": strategy.assignor}
    return {"mode": "confluent", "topics": [topic], "config": config, **common}
