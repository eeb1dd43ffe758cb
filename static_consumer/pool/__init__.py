"""Several static members per pod: a process pool with deterministic instance ids (docs/pool.md).

A Python handler runs on one core. :func:`run_pool` (and ``static-consumer run --processes N
module:handler``) starts N worker processes in a pod, worker ``k`` a static member with instance id
``{pod id}-{k}``, each running the pod main's own loop (:func:`~static_consumer.run_until_sigterm`).
SIGTERM reaches every worker (finish the batch, commit, close without LeaveGroup) within
``shutdown_timeout_s``; a crashed worker is restarted in place with the same id; a fenced worker (82),
bad settings (78) or a broker that cannot do it (69) stop the pool with that code.

- :mod:`~static_consumer.pool._ids`: the workers' ids, checked before forking
- :mod:`~static_consumer.pool._exits`: what an exit means, the restart back-off, the pool's code (pure)
- :mod:`~static_consumer.pool._status`: health per worker, readiness, the probe files
- :mod:`~static_consumer.pool._worker`: a worker process
- :mod:`~static_consumer.pool._supervisor`: :class:`ProcessPool` and :func:`run_pool`
"""

from static_consumer.pool._exits import RestartPolicy
from static_consumer.pool._ids import WorkerInfo, plan_workers, worker_id
from static_consumer.pool._status import PoolStatus, StatusFiles, WorkerStatus
from static_consumer.pool._supervisor import ProcessPool, run_pool

__all__ = [
    "PoolStatus",
    "ProcessPool",
    "RestartPolicy",
    "StatusFiles",
    "WorkerInfo",
    "WorkerStatus",
    "plan_workers",
    "run_pool",
    "worker_id",
]
