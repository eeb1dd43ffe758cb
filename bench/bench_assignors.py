"""Benchmark the pure planners and measure partition movement on scale-up.

    python bench/bench_assignors.py [--partitions 100000] [--members 1000] [--topics 100]

Prints the best of three wall-clock timings per planner (each under 1 s at 100,000
partitions x 1,000 members is the bar), then how many partitions change owner when one pod or member
with the next ordinal / instance id joins, and how evenly each scheme spreads every topic.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping

from assignors import (
    Member,
    Partition,
    Strategy,
    check_plan,
    compare,
    ordinal_plan,
    ordinal_plan_all,
    plan_by_instance_id,
    range_plan,
    roundrobin_plan,
)


def members_for(count: int, topics: list[str], subscribe_half: bool = False) -> list[Member]:
    """Static members named like StatefulSet pods; member ids as the broker forms them."""
    rnd = random.Random(7)
    result = []
    for k in range(count):
        instance_id = f"consumer-{k}"
        suffix = hashlib.sha256(instance_id.encode()).hexdigest()[:12]
        subscription = rnd.sample(topics, len(topics) // 2) if subscribe_half else topics
        result.append(Member(instance_id, f"{instance_id}-{suffix}", frozenset(subscription)))
    return result


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def owners(plan: Mapping[str, tuple[Partition, ...]]) -> dict[Partition, str]:
    return {tp: key for key, parts in plan.items() for tp in parts}


def keyed_plan(strategy: Strategy, replicas: int, counts: dict[str, int]) -> dict[str, tuple[Partition, ...]]:
    """Plan keyed by pod name / instance id, comparable across group sizes."""
    if strategy is Strategy.ORDINAL:
        return {f"consumer-{k}": parts for k, parts in ordinal_plan_all(replicas, counts).items()}
    members = members_for(replicas, sorted(counts))
    planner = range_plan if strategy is Strategy.RANGE else roundrobin_plan
    return plan_by_instance_id(planner(members, counts), members)


def spreads(plan: Mapping[str, tuple[Partition, ...]], counts: Mapping[str, int]) -> str:
    """'per-topic/overall': largest difference between the pods holding most and fewest."""
    per = Counter((key, tp.topic) for key, parts in plan.items() for tp in parts)
    topic = max(max(per[k, t] for k in plan) - min(per[k, t] for k in plan) for t in counts)
    sizes = [len(parts) for parts in plan.values()]
    return f"{topic}/{max(sizes) - min(sizes)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--members", type=int, default=1_000)
    parser.add_argument("--topics", type=int, default=100)
    args = parser.parse_args()
    topics = [f"topic-{i:03d}" for i in range(args.topics)]
    per_topic, rest = divmod(args.partitions, args.topics)
    counts = {t: per_topic + (1 if i < rest else 0) for i, t in enumerate(topics)}
    n = args.members
    members = members_for(n, topics)
    halves = members_for(n, topics, subscribe_half=True)
    plan = range_plan(members, counts)

    print(f"{sum(counts.values()):,} partitions in {len(topics)} topics, {n:,} members (best of 3)")
    timings: list[tuple[str, Callable[[], object]]] = [
        ("range_plan", lambda: range_plan(members, counts)),
        ("range_plan (each member: half the topics)", lambda: range_plan(halves, counts)),
        ("roundrobin_plan", lambda: roundrobin_plan(members, counts)),
        ("roundrobin_plan (each member: half the topics)", lambda: roundrobin_plan(halves, counts)),
        ("ordinal_plan_all", lambda: ordinal_plan_all(n, counts)),
        (f"ordinal_plan (ordinal {n - 1}, the slowest)", lambda: ordinal_plan(n - 1, n, counts)),
        ("ordinal_plan (ordinal 0)", lambda: ordinal_plan(0, n, counts)),
        ("check_plan (range)", lambda: check_plan(Strategy.RANGE, members, counts, plan)),
        ("compare (identical)", lambda: compare(plan, plan, counts, members=members)),
    ]
    for name, fn in timings:
        print(f"  {name:<48} {best_of(3, fn) * 1000:8.1f} ms")

    print("\nPartitions moved when member N joins (N -> N+1); spread at N+1 as per-topic/overall")
    header = f"{'ordinal':>8} {'range':>8} {'roundrobin':>10}"
    print(f"  {'N':>6} {'P//(N+1)':>9}  moved: {header}  spread: {header}")
    total = sum(counts.values())
    for replicas in sorted({10, 100, n}):
        moved, spread = [], []
        for strategy in (Strategy.ORDINAL, Strategy.RANGE, Strategy.ROUNDROBIN):
            before = owners(keyed_plan(strategy, replicas, counts))
            after_plan = keyed_plan(strategy, replicas + 1, counts)
            after = owners(after_plan)
            moved.append(sum(1 for tp, owner in before.items() if after[tp] != owner))
            spread.append(spreads(after_plan, counts))
        cells = f"{moved[0]:>8} {moved[1]:>8} {moved[2]:>10}"
        spread_cells = f"{spread[0]:>8} {spread[1]:>8} {spread[2]:>10}"
        print(f"  {replicas:>6} {total // (replicas + 1):>9}         {cells}          {spread_cells}")


if __name__ == "__main__":
    main()
