"""Both group protocols' scenarios at the same time, each on a thread of its own.

Most of a membership scenario is waiting (for a session to expire, a block to end, a rebalance to
settle), so the classic and the KIP-848 run of one test, side by side, take little more than the longer
of them. Each run has its own topic, group and files; what one run asserts is about its own group only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
PROTOCOLS = ("classic", "consumer")


def side_by_side(run: Callable[[str], T], protocols: tuple[str, ...] = PROTOCOLS) -> Mapping[str, T]:
    """``run(protocol)`` for every protocol at once; their results by protocol. A failure of either is
    raised once both ended (the other's failure printed), naming its protocol."""
    with ThreadPoolExecutor(len(protocols), thread_name_prefix="protocol") as pool:
        runs = {protocol: pool.submit(run, protocol) for protocol in protocols}
    # Leaving the block waited for every run.
    raise_first([(protocol, error) for protocol, future in runs.items() if (error := future.exception())])
    return {protocol: future.result() for protocol, future in runs.items()}


def raise_first(failed: Sequence[tuple[str, BaseException]]) -> None:
    """Raise the first of the runs' failures (protocol, error), naming its protocol; print the others."""
    for protocol, error in failed[1:]:
        print(f"{protocol} also failed: {error!r}")
    if failed:
        protocol, error = failed[0]
        error.add_note(f"in the {protocol} run")
        raise error
