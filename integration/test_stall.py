"""A member paused (SIGSTOP) past its session timeout hands out no record it no longer owns.

Two static members share a 4-partition topic while records are produced at 200/s. The victim is frozen
twice: first for less than its session (the broker keeps it; the stall guard checks with one commit and
hands the batch out), then for longer (the other member takes its partitions; on wake-up the guard drops
what librdkafka fetched before the freeze). Checked against the other member's own events: no record the
guard checked after the wake-up (``StaticConsumer.checked_at``, after the client returned it) is handed
out, and no offset committed after it, for a partition the other member owned at that instant; a batch
checked before the freeze may be handed out after it (the freeze fell inside ``consume()``) and its
commit must be refused. Also: no silent stall and no exit (the victim rejoins and consumes
again, the other member carried the victim's partitions on), nothing is lost, the group's committed
offsets never go backwards, and the final ones are the high watermarks.

One scenario per protocol, side by side on the shared broker, with a 5 s session (the harness allows 1 s):
the classic one set on the members, the KIP-848 one on the group.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from _faults import SteadyProducer, assert_all_consumed_and_committed
from _side_by_side import side_by_side

from static_consumer_lab.children.group import Group
from static_consumer_lab.children.pauses import (
    checked_before,
    pause,
    pause_until,
    refused_batches,
    sampling_commits,
    stale_commits,
    stale_records,
    taken_over,
    timeline,
)
from static_consumer_lab.children.processes import ConsumerProcess, Event

pytestmark = pytest.mark.lab_broker(
    "5 s sessions with 500 ms heartbeats: a freeze past the session is the point, not its length"
)

PARTITIONS = 4
BATCH = 100
SESSION_MS = 5000  # heartbeats every 0.5 s; the guard's threshold is half the session: 2.5 s
THRESHOLD_S = SESSION_MS / 2000
SHORT_PAUSE_S = 3.3  # over the threshold, under (session - heartbeat interval) = 4.5 s with 1.2 s to spare
LONG_PAUSE_S = SESSION_MS / 1000 + 3.5  # the broker expires the victim after about 5 s of it


def stall_after(victim: ConsumerProcess, at: float) -> Event:
    return victim.wait_for(lambda e: e["kind"] == "stalled" and e["ts"] > at, 60, "a checked stall")


def test_a_member_paused_past_its_session_hands_out_no_record_it_no_longer_owns(
    kafka_bootstrap_servers: str,
    kafka_group_factory: Callable[..., Group],
) -> None:
    """The classic and the KIP-848 group side by side, each on a topic of its own."""
    side_by_side(lambda protocol: _paused_twice(protocol, kafka_bootstrap_servers, kafka_group_factory))


def _paused_twice(protocol: str, bootstrap: str, kafka_group_factory: Callable[..., Group]) -> None:
    extra: dict[str, Any] = {"batch": BATCH}
    group = kafka_group_factory(
        PARTITIONS,
        protocol=protocol,
        session_ms=SESSION_MS,
        spec_extra=lambda _name: extra,
    )
    sampler = sampling_commits(bootstrap, group.group_id, group.topic, PARTITIONS)
    with SteadyProducer(bootstrap, group.topic) as producer, sampler as samples:
        group.form(["app-0", "app-1"])
        other, victim = group.members["app-0"], group.members["app-1"]
        victim.wait_for_kind("committed", timeout_s=30, after=time.time())

        # 1. Under the session: the broker keeps the member; the guard checks with one commit.
        _, thawed = pause(victim, SHORT_PAUSE_S)
        short = stall_after(victim, thawed)
        print(f"{protocol}: {SHORT_PAUSE_S} s pause: {short}")
        assert short["threshold_s"] == pytest.approx(THRESHOLD_S)
        assert short["gap_s"] >= SHORT_PAUSE_S
        losses = [e for e in victim.events("lost") if e["ts"] > thawed - SHORT_PAUSE_S]
        if short["verdict"] == "ok":
            assert short["dropped"] == 0 and losses == []
        else:  # the session expired anyway (a heartbeat late on the loaded host): then it must be a loss
            assert short["verdict"] in ("lost", "gone") and losses, short

        # 2. Past the session: the other member takes the victim's partitions meanwhile. Frozen after a
        # commit, so most likely while waiting for records (the usual place; a freeze while processing a
        # batch is the residual window, see the end).
        # Caught up first: the short pause left a backlog, and while the victim works through full
        # batches a freeze mostly lands mid-batch. A batch under BATCH records means it waits for more.
        caught_up = victim.wait_for(
            lambda e: e["kind"] == "records" and e["ts"] > short["ts"] and len(e["records"]) < BATCH,
            30,
            "a batch that is not full",
        )
        victim.wait_for_kind("committed", timeout_s=30, after=caught_up["ts"])
        before = victim.assignment()
        freezing = time.time()
        # At least LONG_PAUSE_S, and on until the other member took over (a loaded CI host has expired
        # the victim seconds late), plus a second.
        frozen, thawed = pause_until(victim, LONG_PAUSE_S, lambda: taken_over(other, before, freezing))
        took_over = [e["ts"] - frozen for e in other.events("assigned") if frozen < e["ts"] < thawed]
        assert took_over, "the other member did not take the victim's partitions during the pause"
        long = stall_after(victim, thawed)
        lost = victim.wait_for(lambda e: e["kind"] == "lost" and e["ts"] > thawed, 30, "the loss")
        print(
            f"{protocol}: {thawed - frozen:.1f} s pause of a member owning {sorted(before)}: taken over "
            f"{min(took_over):.1f} s into it; on wake-up: loss reported after "
            f"{(lost['ts'] - thawed) * 1000:.0f} ms, stall verdict {long['verdict']}, "
            f"{long['dropped']} records dropped, check took {long['waited_s'] * 1000:.1f} ms"
        )
        assert long["verdict"] in ("lost", "gone"), long
        group.wait_stable(timeout_s=90, settle_s=1.0)
        # No silent stall and no exit: the victim rejoins under the same instance id and consumes again;
        # the member that took its partitions committed them meanwhile and goes on committing.
        back = victim.wait_for(
            lambda e: e["kind"] == "assigned" and e["ts"] > thawed and bool(e["partitions"]), 60, "a rejoin"
        )
        victim.wait_for(lambda e: e["kind"] == "records" and e["ts"] > back["ts"], 30, "records after it")
        other.wait_for(lambda e: e["kind"] == "committed" and e["ts"] > back["ts"], 30, "a commit after it")
        carried = {(t, p) for e in other.events("committed") if e["ts"] > frozen for t, p, _o in e["offsets"]}
        assert carried & before, f"the other member committed none of {sorted(before)} after the freeze"
        print(
            f"{protocol}: the victim rejoined {back['ts'] - thawed:.1f} s after the wake-up with "
            f"{sorted(p for _t, p in back['partitions'])}; exit code {victim.returncode}"
        )
        assert victim.returncode is None and other.returncode is None, victim.stderr_tail()
        acked = producer.stop()

    seen = timeline([victim, other], frozen - 1.0, thawed + 5.0)
    late = stale_records(victim, [other], thawed)
    assert late == [], f"handed out after the wake-up while another member owned them: {late}\n{seen}"
    late_commits = stale_commits(victim, [other], thawed)
    assert late_commits == [], f"committed after the wake-up, not its own: {late_commits}\n{seen}"
    assert_all_consumed_and_committed(group, acked, samples)
    # The window no client can close: a batch checked by the guard before the freeze is processed after
    # it (the freeze came after the check: while processing, or inside consume() before the hand-over),
    # and its commit is refused. Any refused commit must be of such a batch.
    refused = refused_batches(victim)
    inside = [(round(c - frozen, 3), round(h - frozen, 3), n) for c, h, n in checked_before(victim, frozen)]
    print(
        f"{protocol}: {len(samples)} commit samples; refused batches (checked at, size): {refused}; "
        f"batches checked before the freeze and handed out after it (s from the freeze, size): {inside}"
    )
    assert all(at < frozen for at, _ in refused) and refused_batches(other) == []
