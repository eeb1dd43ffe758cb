"""Carrying out one planned fault on the running members, the brokers or the ACLs; what it did.

A member fault hits the process that handles records: the pod main of a README pod, a worker of a
pool pod (SIGKILL and SIGSTOP; the pool restarts a killed worker itself). SIGTERM goes to the pod
main, as the kubelet sends it. A broker fault's ``coordinator`` target is the node that coordinates
the group when the fault starts; every broker fault records whether its node did.
"""

from __future__ import annotations

import os
import random
import signal
import time
from dataclasses import dataclass

from static_consumer._kafka.acls import Acl
from static_consumer_lab.brokers.authorizer import AclCluster
from static_consumer_lab.brokers.kafka_ops import describe_consumer_group, wait_in_sync
from static_consumer_lab.chaos.evidence import Done
from static_consumer_lab.chaos.members import Members
from static_consumer_lab.chaos.schedule import BROKER_KINDS, Fault
from static_consumer_lab.children.processes import wait_until


@dataclass
class Faults:
    """What a fault acts on: the members, the cluster (with its authorizer), the group and topic."""

    members: Members
    acl: AclCluster
    group: str
    topic: str
    rng: random.Random  # which worker of a pool pod: drawn here, from the run's seed

    @property
    def bootstrap(self) -> str:
        return self.acl.cluster.bootstrap_servers

    def carry_out(self, fault: Fault) -> Done:
        if fault.kind in ("kill", "term", "term2"):
            return self._signal(fault)
        if fault.kind in ("pause", "long_pause"):
            return self._pause(fault)
        if fault.kind in BROKER_KINDS:
            return self._broker(fault)
        return self._revoke(fault)

    # ------------------------------------------------------------------------------------- members
    def _handler_pid(self, name: str) -> int:
        pids: list[int] = []

        def running() -> bool:
            pids[:] = self.members.handler_pids(name)
            return bool(pids)

        wait_until(running, 60, f"{name}'s handling processes")
        return self.rng.choice(sorted(pids))

    def _signal(self, fault: Fault) -> Done:
        names = fault.targets
        pooled_kill = fault.kind == "kill" and not self.members.pods[names[0]].plain
        if fault.kind == "kill":
            pids = [self._handler_pid(names[0])]
        else:
            pids = [self.members.pid(name) for name in names]
        sig = signal.SIGKILL if fault.kind == "kill" else signal.SIGTERM
        start = time.time()
        for pid in pids:
            os.kill(pid, sig)
        if pooled_kill:
            end = self.members.wait_worker_replaced(names[0], pids[0])
        else:
            end = max(self.members.wait_started_after(name, start) for name in names)
        return Done(fault.index, fault.kind, names, start, end, tuple(pids))

    def _pause(self, fault: Fault) -> Done:
        pid = self._handler_pid(fault.targets[0])
        start = time.time()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(fault.duration_s)
        finally:
            os.kill(pid, signal.SIGCONT)
        return Done(fault.index, fault.kind, fault.targets, start, time.time(), (pid,))

    # ------------------------------------------------------------------------------------- brokers
    def coordinator(self) -> int:
        return int(describe_consumer_group(self.bootstrap, self.group, timeout_s=10.0).coordinator.id)

    def _broker(self, fault: Fault) -> Done:
        cluster = self.acl.cluster
        coordinator = self.coordinator()
        node = coordinator if fault.targets[0] == "coordinator" else int(fault.targets[0])
        start = time.time()
        cluster.stop_node(node, hard=fault.kind == "broker_kill")
        time.sleep(fault.duration_s)
        cluster.start_node(node, wait=True)
        end = time.time()
        return Done(
            fault.index,
            fault.kind,
            (str(node),),
            start,
            end,
            coordinator=node == coordinator,
            detail={"coordinator_before": coordinator},
        )

    def wait_in_sync(self, timeout_s: float = 120.0) -> None:
        """Every partition (``__consumer_offsets`` too) led, with all its replicas in sync."""
        wait_in_sync(self.bootstrap, timeout_s)

    # ----------------------------------------------------------------------------------------- ACLs
    def _revoke(self, fault: Fault) -> Done:
        which = fault.targets[0]
        taken = Acl("READ", "Group", self.group) if which == "group" else Acl("READ", "Topic", self.topic)
        start = time.time()
        with self.acl.revoked([taken]):
            time.sleep(fault.duration_s)
        return Done(fault.index, fault.kind, fault.targets, start, time.time(), detail={"acl": str(taken)})


__all__ = ["Faults"]
