"""The pool's pure decisions: the workers' instance ids (and how they sort for librdkafka's assignors),
what a worker's exit means, the restart back-off, and the pool's exit code."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignors import Member, range_plan
from static_consumer._base.errors import ConfigurationError, InvalidInstanceIdError
from static_consumer.pool import RestartPolicy, plan_workers
from static_consumer.pool._exits import (
    Ended,
    Restart,
    StopPool,
    after_exit,
    describe_exit,
    exit_status,
    pool_exit_code,
)
from static_consumer.settings import ConsumerSettings


def settings(**overrides: Any) -> ConsumerSettings:
    return ConsumerSettings(
        **{"bootstrap_servers": "kafka-0:9092", "group_id": "orders", "topics": ("orders",), **overrides}
    )


# ---------------------------------------------------------------------------------------- the ids
def test_worker_ids_are_the_pod_id_and_the_worker() -> None:
    workers = plan_workers(settings(), {"POD_NAME": "orders-2"}, 3)
    assert [w.instance_id for w in workers] == ["orders-2-0", "orders-2-1", "orders-2-2"]
    assert [(w.index, w.processes, w.pod) for w in workers] == [(k, 3, "orders-2") for k in range(3)]


def test_worker_ids_follow_every_source_of_the_pod_id() -> None:
    env = {"POD_NAME": "orders-2", "STATIC_CONSUMER_INSTANCE_ID": "from-env"}
    assert plan_workers(settings(instance_id="explicit"), env, 1)[0].instance_id == "explicit-0"
    assert plan_workers(settings(), env, 1)[0].instance_id == "from-env-0"
    template = settings(instance_id_template="{group}-{ordinal}")
    assert plan_workers(template, {"POD_NAME": "orders-2"}, 2)[1].instance_id == "orders-2-1"


def test_bad_identities_fail_before_anything_starts() -> None:
    with pytest.raises(InvalidInstanceIdError, match="Deployment"):
        plan_workers(settings(), {"POD_NAME": "orders-7d9f8c6b5-x2x4q"}, 2)
    with pytest.raises(InvalidInstanceIdError, match="no group.instance.id"):
        plan_workers(settings(), {}, 2)
    with pytest.raises(InvalidInstanceIdError, match="250 characters"):
        plan_workers(settings(instance_id="x" * 248), {}, 2)  # the pod id fits, "-0" does not
    with pytest.raises(ConfigurationError, match="topics is empty"):
        plan_workers(settings(topics=()), {"POD_NAME": "orders-2"}, 2)


@pytest.mark.parametrize("processes", [0, -1, 1025, True, 2.0])
def test_the_number_of_processes_is_checked(processes: Any) -> None:
    with pytest.raises(ConfigurationError, match="processes must be an integer from 1 to 1024"):
        plan_workers(settings(), {"POD_NAME": "orders-2"}, processes)


def test_ordinal_mode_is_refused_for_more_than_one_process() -> None:
    ordinal = settings(assignment_mode="ordinal", replicas=3)
    with pytest.raises(ConfigurationError, match="one process per pod"):
        plan_workers(ordinal, {"POD_NAME": "orders-2"}, 2)
    assert len(plan_workers(ordinal, {"POD_NAME": "orders-2"}, 1)) == 1


def test_dynamic_members_need_no_ids() -> None:
    workers = plan_workers(settings(static_policy="dynamic"), {}, 2)
    assert [w.instance_id for w in workers] == [None, None]


@given(
    pods=st.sets(st.integers(0, 120), min_size=2, max_size=12),
    processes=st.integers(1, 10),
    partitions=st.integers(1, 300),
)
def test_one_pods_workers_sort_together_so_range_gives_the_pod_one_block(
    pods: set[int], processes: int, partitions: int
) -> None:
    """librdkafka sorts members by instance id, bytewise: '-' sorts below the digits, so a pod's workers
    are adjacent (orders-1-0, orders-1-1, orders-10-0, ...) and in worker order, and range hands each pod
    one contiguous block of partitions."""
    ids = {(pod, k): f"orders-{pod}-{k}" for pod in pods for k in range(processes)}
    order = sorted(ids, key=ids.__getitem__)
    assert order == sorted(order, key=lambda pk: (f"orders-{pk[0]}", pk[1]))  # pod-major, then worker
    members = [Member(iid, f"m-{iid}", frozenset({"t"})) for iid in ids.values()]
    plan = range_plan(members, {"t": partitions})
    for pod in pods:
        mine = sorted(p.partition for k in range(processes) for p in plan[f"m-orders-{pod}-{k}"])
        if mine:
            assert mine == list(range(mine[0], mine[0] + len(mine)))


# ---------------------------------------------------------------------------------------- exits
POLICY = RestartPolicy(first_delay_s=0.0, base_delay_s=0.5, max_delay_s=4.0, max_restarts=5, window_s=60)


def test_a_crash_is_restarted_at_once_then_with_a_doubling_bounded_back_off() -> None:
    delays, restarts = [], []
    for now in range(5):
        verdict = after_exit(137, stopping=False, restarts=restarts, now=float(now), policy=POLICY)
        assert isinstance(verdict, Restart)
        delays.append(verdict.after_s)
        restarts.append(float(now))
    assert delays == [0.0, 0.5, 1.0, 2.0, 4.0]
    assert POLICY.delay(10) == 4.0


def test_a_worker_that_keeps_failing_stops_the_pool_with_its_code() -> None:
    verdict = after_exit(75, stopping=False, restarts=[1, 2, 3, 4, 5], now=6.0, policy=POLICY)
    assert verdict == StopPool(75, "exit 75 after 5 restarts within 60 s: giving up")
    killed = after_exit(137, stopping=False, restarts=[1, 2, 3, 4, 5], now=6.0, policy=POLICY)
    assert isinstance(killed, StopPool) and killed.exit_code == 70
    # restarts older than the window are forgotten
    assert after_exit(75, stopping=False, restarts=[1, 2, 3, 4, 5], now=100.0, policy=POLICY) == Restart(0.0)


@pytest.mark.parametrize("code", [82, 78, 69])
def test_fenced_bad_settings_and_missing_capabilities_stop_the_pool_at_once(code: int) -> None:
    verdict = after_exit(code, stopping=False, restarts=[], now=0.0, policy=POLICY)
    assert isinstance(verdict, StopPool) and verdict.exit_code == code


@pytest.mark.parametrize("code", [0, 70, 75, 1, 137, 143])
def test_other_exits_restart_and_nothing_restarts_while_stopping(code: int) -> None:
    assert after_exit(code, stopping=False, restarts=[], now=0.0, policy=POLICY) == Restart(0.0)
    assert after_exit(code, stopping=True, restarts=[], now=0.0, policy=POLICY) == Ended()


def test_the_pools_exit_code() -> None:
    assert pool_exit_code(None, [0, 0]) == 0
    assert pool_exit_code(None, [0, 0], interrupted=True) == 130
    assert pool_exit_code(82, [82, 0]) == 82
    assert pool_exit_code(None, [0, 137]) == 70  # killed at the shutdown bound
    assert pool_exit_code(None, [75, 78, 70]) == 78
    assert pool_exit_code(None, [75, 0]) == 75


def test_exit_statuses_read_like_a_shells() -> None:
    assert [exit_status(c) for c in (0, 82, -9, -15)] == [0, 82, 137, 143]
    assert [describe_exit(s) for s in (82, 137)] == ["exit 82", "killed by SIGKILL"]


def test_a_restart_policy_must_make_sense() -> None:
    with pytest.raises(ConfigurationError):
        RestartPolicy(base_delay_s=5, max_delay_s=1)
    with pytest.raises(ConfigurationError):
        RestartPolicy(window_s=0)
