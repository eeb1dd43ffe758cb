"""Parsing the broker's rebalance lines (classic generations, KIP-848 group epochs) from its log."""

from __future__ import annotations

from pathlib import Path

import pytest

from static_consumer_lab.brokers.rebalances import Rebalance, group_rebalances, parse, read

COORD = "(org.apache.kafka.coordinator.group.GroupMetadataManager)"
# Lines as Apache Kafka 4.3 logs them (the 4.0 epoch line has no "with metadata hash").
LOG = (
    f"[2026-11-24 10:00:00,100] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=2] "
    f"Stabilized group g.1 generation 1 with 3 members. {COORD}\n"
    f"[2026-11-24 10:00:01,000] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=4] "
    f"[GroupId k-848] Bumped group epoch to 3 with metadata hash 7220369052447064218. {COORD}\n"
    f"[2026-11-24 10:00:01,500] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=4] "
    f"[GroupId k-848] Computed a new target assignment for epoch 3 with 'uniform' assignor in 0ms. {COORD}\n"
    f"[2026-11-24 10:00:02,000] INFO [GroupCoordinator id=1] [GroupId k-848] Bumped group epoch to 4. "
    f"{COORD}\n"
    f"[2026-11-24 10:00:03,000] INFO [GroupCoordinator id=1] Stabilized group g.1 generation 2 with 2 "
    f"members. {COORD}\n"
    # Other groups, including ones whose names contain the wanted one, never count.
    f"[2026-11-24 10:00:04,000] INFO [GroupCoordinator id=1] Stabilized group gx1 generation 9 with 1 "
    f"members. {COORD}\n"
    f"[2026-11-24 10:00:05,000] INFO [GroupCoordinator id=1] [GroupId k-848-b] Bumped group epoch to 9. "
    f"{COORD}\n"
    # A streams group's bump is another line and another kind of group.
    f"[2026-11-24 10:00:06,000] INFO [GroupCoordinator id=1] [GroupId k-848][MemberId m] Bumped streams "
    f"group epoch to 12 with metadata hash 1 and validated topic epoch 1. {COORD}\n"
)


def test_generations_and_epochs_of_the_wanted_groups_in_time_order() -> None:
    found = parse(LOG, ["g.1", "k-848"])
    assert [(r.kind, r.group, r.value) for r in found] == [
        ("generation", "g.1", 1),
        ("epoch", "k-848", 3),
        ("epoch", "k-848", 4),
        ("generation", "g.1", 2),
    ]
    assert found[1].ts - found[0].ts == pytest.approx(0.9)


def test_a_group_id_is_matched_whole_not_as_a_regex_or_a_prefix() -> None:
    assert parse(LOG, ["g.1"]) == [r for r in parse(LOG, ["g.1", "k-848"]) if r.group == "g.1"]
    assert [r.value for r in parse(LOG, ["gx1"])] == [9]  # "g.1" as a regex would have matched it
    assert parse(LOG, ["k-848-b"])[0].value == 9
    assert parse(LOG, ["g"]) == []


def test_every_nodes_log_is_read_and_each_rebalance_counted_once(tmp_path: Path) -> None:
    # The coordinator moves: node 2 logs the later epochs; a line in two logs (a copy) counts once.
    later = (
        "[2026-11-24 10:01:00,000] INFO [GroupCoordinator id=2] [GroupId k-848] Bumped group epoch to 5.\n"
    )
    (tmp_path / "node-1.log").write_text(LOG)
    (tmp_path / "node-2.log").write_text(LOG.splitlines(keepends=True)[1] + later)
    paths = [tmp_path / "node-1.log", tmp_path / "node-2.log", tmp_path / "node-3.log"]  # node 3: no log
    found = group_rebalances(paths, "k-848")
    assert [(r.kind, r.value) for r in found] == [("epoch", 3), ("epoch", 4), ("epoch", 5)]
    assert read(paths, ["k-848", "g.1"])[-1] == found[-1]


def test_equal_lists_mean_no_rebalance_in_between(tmp_path: Path) -> None:
    log = tmp_path / "broker.log"
    log.write_text(LOG)
    before = group_rebalances([log], "k-848")
    assert group_rebalances([log], "k-848") == before
    with log.open("a") as f:
        f.write(
            "[2026-11-24 10:02:00,000] INFO [GroupId k-848] Bumped group epoch to 6 with metadata hash 0.\n"
        )
    after = group_rebalances([log], "k-848")
    assert after != before and after[-1] == Rebalance("epoch", "k-848", 6, after[-1].ts)
