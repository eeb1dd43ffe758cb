"""Which instance is each worker of a pod's pool: ``{pod id}-{k}``, k = 0..N-1.

The pod's own ``group.instance.id`` is resolved by the same function a single-process pod's start
resolves it with (explicit id, ``STATIC_CONSUMER_INSTANCE_ID``, or the pod name through
``instance_id_template``); worker ``k`` appends ``-k``. Every id is validated by Kafka's
rules here, before any process is forked, so a bad id fails the pod at once (exit 78) instead of N times.

How the ids sort: librdkafka's ``range`` and ``roundrobin`` order members by instance id, bytewise
(``rd_kafka_group_member_cmp``). ``-`` (0x2D) sorts below every digit, so ``orders-1-0 < orders-1-1 <
orders-10-0 < orders-2-0``: one pod's workers are always adjacent, in worker order up to 10 workers, and
pods keep the string order single-process pods have today (``orders-10`` before ``orders-2``). The order
depends on the ids alone, so a restarted worker gets its partitions back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from static_consumer._base.errors import ConfigurationError
from static_consumer._core.identity import validate_instance_id
from static_consumer._core.join import check_locally
from static_consumer._core.modes import mode_for
from static_consumer._core.policy import MembershipPolicy
from static_consumer.settings import ConsumerSettings

MAX_PROCESSES = 1024  # far beyond any pod's cores: a bigger number is a typo


@dataclass(frozen=True)
class WorkerInfo:
    """One worker of a pool: handed to the pool's ``setup`` and ``listeners`` factories, in the worker."""

    index: int
    processes: int
    instance_id: str | None  # None for dynamic members (static_policy='dynamic')
    pod: str | None


def worker_id(pod_instance_id: str, index: int) -> str:
    """Worker ``index``'s instance id: the pod's id and ``-index``, checked by Kafka's rules."""
    return validate_instance_id(f"{pod_instance_id}-{index}")


def plan_workers(
    settings: ConsumerSettings, env: Mapping[str, str], processes: int
) -> tuple[WorkerInfo, ...]:
    """The workers of this pod, or ConfigurationError (exit 78) before anything is started: what every
    worker's ``start()`` would check before connecting (topics, identity, TLS files) is checked once here."""
    if isinstance(processes, bool) or not isinstance(processes, int) or not 1 <= processes <= MAX_PROCESSES:
        raise ConfigurationError(f"processes must be an integer from 1 to {MAX_PROCESSES}, not {processes!r}")
    if mode_for(settings).one_process_per_pod and processes > 1:
        # Ordinal slices are per pod: (ordinal, replicas) with a hand-over order that keeps partitions in
        # place when replicas change. Workers would need slot ordinal * N + k of replicas * N, which moves
        # every pod's slice whenever N changes, and a dead worker's slice would wait for it as a dead pod's
        # does. More single-process pods give the same parallelism without a second plan.
        raise ConfigurationError(
            "assignment_mode='ordinal' runs one process per pod: its partitions are planned per StatefulSet "
            f"ordinal, not per worker. Use processes=1 (and {processes}x the replicas), or "
            "assignment_mode='group' for a pool"
        )
    static = MembershipPolicy.of(settings).static
    identity = check_locally(settings, env, identity_optional=not static)  # as each worker's start() would
    if identity is None or not static:
        return tuple(WorkerInfo(k, processes, None, None) for k in range(processes))
    return tuple(
        WorkerInfo(k, processes, worker_id(identity.instance_id, k), identity.pod) for k in range(processes)
    )


__all__ = ["MAX_PROCESSES", "WorkerInfo", "plan_workers", "worker_id"]
