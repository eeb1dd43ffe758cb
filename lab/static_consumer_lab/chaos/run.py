"""One chaos run: members, a steady producer, the sampler and the seeded faults, on a 3-node cluster with
an authorizer; the evidence written to a run directory (``evidence.py``).

The phases: the topic (replication 3, min.insync.replicas 2) and the member principal's ACLs; the
members start and handle records; the faults phase (``began``), where each planned fault starts
``gap_s`` after the previous fault's window closed (``windows.py``; a broker fault's also waits for
every replica to be in sync again) and no fault starts once ``minutes`` are over (or, with ``faults``,
exactly that many are carried out, whatever the time: ``len(kinds)`` is one of each); then the producer
stops (every record acknowledged), the members handle everything, and the final SIGTERM goes to every
member (``stopped``). The committed offsets at the end are read after the members closed.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from static_consumer._kafka.acls import GROUP, NEEDS, TOPICS, Acl
from static_consumer_lab.brokers.authorizer import AclCluster
from static_consumer_lab.brokers.kafka_ops import (
    committed_offsets,
    create_topic,
    high_watermarks,
    set_group_config,
)
from static_consumer_lab.chaos.evidence import Evidence, append_json, load, read_handled, write_acked
from static_consumer_lab.chaos.faults import Faults
from static_consumer_lab.chaos.members import Members
from static_consumer_lab.chaos.schedule import KINDS, plan
from static_consumer_lab.chaos.windows import settle_s
from static_consumer_lab.children.processes import wait_until
from static_consumer_lab.producer import SteadyProducer

STOCK_SESSION_S = 45.0  # both protocols' default: the library's session_timeout_ms, the broker's KIP-848 one


@dataclass(frozen=True)
class ChaosConfig:
    """A run's knobs. ``members``: README pod mains; ``pools``: pool pods of ``processes`` workers each
    (every worker a static member); ``session_s``: the group's session (classic: the members' setting;
    KIP-848: a group config when not the broker's 45 s)."""

    seed: int
    protocol: str = "classic"
    members: int = 6
    pools: int = 0
    processes: int = 2
    minutes: float = 10.0
    faults: int | None = None
    rate: int = 300
    partitions: int = 12
    session_s: float = STOCK_SESSION_S
    grace_s: float = 15.0
    kinds: tuple[str, ...] = KINDS
    gap_s: tuple[float, float] = (5.0, 15.0)
    coordinator_share: float = 0.5
    sample_every_s: float = 1.0
    warmup_s: float = 10.0

    def names(self) -> tuple[list[str], list[str]]:
        plain = [f"app-{i}" for i in range(self.members)]
        pools = [f"pool-{i}" for i in range(self.pools)]
        return plain + pools, pools


def _grant(acl: AclCluster, protocol: str, group: str, topic: str) -> None:
    operation = (
        "consumer, protocol='classic'" if protocol == "classic" else "consumer, protocol='consumer' (KIP-848)"
    )
    names = {GROUP: group, TOPICS: topic}
    acl.grant(
        Acl(n.acl.operation, n.acl.resource, names.get(n.acl.name, n.acl.name))
        for n in NEEDS[operation]
        if not n.optional
    )


def _member_settings(acl: AclCluster, config: ChaosConfig, group: str, topic: str) -> dict[str, object]:
    fields: dict[str, object] = {**acl.settings_fields(), "group_id": group, "topics": [topic]}
    fields["protocol"] = config.protocol
    if config.protocol == "classic" and config.session_s != STOCK_SESSION_S:
        fields["session_timeout_ms"] = int(config.session_s * 1000)
    return fields


def _handled_pids(run_dir: Path) -> set[str]:
    return {h.member for path in run_dir.glob("*/records.txt") for h in read_handled(path)}


def run(
    acl: AclCluster, config: ChaosConfig, run_dir: Path, say: Callable[[str], object] = print
) -> Evidence:
    """Carry out ``config``'s run on ``acl``'s cluster; the evidence, also saved in ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    bootstrap = acl.cluster.bootstrap_servers
    tag = f"{config.protocol}-{config.seed}-{uuid.uuid4().hex[:6]}"
    topic = create_topic(
        bootstrap, f"chaos-{tag}", config.partitions, replication=3, config={"min.insync.replicas": "2"}
    )
    group = f"chaos-{tag}"
    _grant(acl, config.protocol, group, topic)
    if config.protocol == "consumer" and config.session_s != STOCK_SESSION_S:
        set_group_config(bootstrap, group, {"consumer.session.timeout.ms": str(int(config.session_s * 1000))})
    names, pools = config.names()
    schedule = plan(
        config.seed,
        members=names,
        session_s=config.session_s,
        count=200,
        kinds=config.kinds,
        nodes=len(acl.cluster.nodes),
        gap_s=config.gap_s,
        coordinator_share=config.coordinator_share,
    )
    (run_dir / "schedule.json").write_text(json.dumps([f.to_json() for f in schedule], indent=1))
    members = Members(
        names,
        settings=_member_settings(acl, config, group, topic),
        run_dir=run_dir,
        pools=pools,
        processes=config.processes,
    )
    faults = Faults(members, acl, group, topic, random.Random(config.seed))
    producer = SteadyProducer(
        bootstrap, topic, config.rate, max_s=config.minutes * 60 + 1800, keep_deliveries=True
    )
    sampler: subprocess.Popen[bytes] | None = None
    instances = [n for n in names if n not in pools] + [
        f"{p}-{k}" for p in pools for k in range(config.processes)
    ]
    try:
        producer.start()
        members.start()
        wait_until(
            lambda: _handled_pids(run_dir) >= set(instances),
            180,
            lambda: f"every member handling records (so far {sorted(_handled_pids(run_dir))})",
            poll_s=1.0,
        )
        time.sleep(config.warmup_s)
        began = time.time()
        sampler = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "static_consumer_lab.chaos.sampler",
                bootstrap,
                group,
                topic,
                str(config.partitions),
                str(run_dir / "samples.jsonl"),
                str(config.sample_every_s),
                str(config.minutes * 60 + 2400),
            ],
            stdout=subprocess.DEVNULL,
            stderr=(run_dir / "sampler.log").open("wb"),
        )
        say(f"chaos {config.protocol} seed {config.seed}: group {group}, faults from {time.strftime('%X')}")
        free_at = began
        for fault in schedule:
            start_at = free_at + fault.gap_s
            if config.faults is not None and fault.index >= config.faults:
                break
            if config.faults is None and start_at - began > config.minutes * 60:
                break
            time.sleep(max(0.0, start_at - time.time()))
            done = faults.carry_out(fault)
            append_json(run_dir / "faults.jsonl", done.to_json())
            say(
                f"  {done.start - began:6.1f} s  fault {done.index} {done.kind} {','.join(done.targets)} "
                f"for {done.end - done.start:.1f} s" + (" (coordinator)" if done.coordinator else "")
            )
            free_at = done.end + settle_s(done.kind, config.session_s, config.grace_s)
            if done.coordinator is not None:
                faults.wait_in_sync()
            time.sleep(max(0.0, free_at - time.time()))
        acked = producer.stop()
        write_acked(run_dir / "acked.txt", ((p, o) for p, o, _ts in producer.delivered))
        say(f"  {time.time() - began:6.1f} s  producer stopped: {acked} acknowledged")
        wanted = {(p, o) for p, o, _ts in producer.delivered}
        wait_until(
            lambda: (
                {
                    (h.partition, h.offset)
                    for path in run_dir.glob("*/records.txt")
                    for h in read_handled(path)
                }
                >= wanted
            ),
            180,
            "every acknowledged record handled",
            poll_s=2.0,
        )
        time.sleep(config.grace_s)
        stopped = members.stop()
    except BaseException:
        members.kill_all()
        producer.halt(flush_s=1.0)
        raise
    finally:
        if sampler is not None:
            sampler.terminate()
            sampler.wait(timeout=30)
    committed = committed_offsets(bootstrap, group, topic, config.partitions)
    log_end = high_watermarks(bootstrap, topic, config.partitions)
    rebalances = [(r.kind, r.value, r.ts) for r in acl.cluster.group_rebalances(group)]
    (run_dir / "end.json").write_text(
        json.dumps({"committed": committed, "log_end": log_end, "rebalances": rebalances})
    )
    (run_dir / "config.json").write_text(
        json.dumps(
            {**asdict(config), "group": group, "topic": topic, "began": began, "stopped": stopped}, indent=1
        )
    )
    return load(run_dir)


__all__ = ["STOCK_SESSION_S", "ChaosConfig", "run"]
