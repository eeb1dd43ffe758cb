"""The demo's table on hand-made event streams: the run's tally and the recount from files both match
hand-computed numbers, agree with each other on generated streams, and survive the edge cases (a
partition never owned, an incarnation that died without a word)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from demo_events import Event, ev, make_run, records
from hypothesis import given, settings
from hypothesis import strategies as st

from static_consumer_lab.demo import broker_log
from static_consumer_lab.demo.main import main as demo_main
from static_consumer_lab.demo.metrics import Metrics, differences
from static_consumer_lab.demo.recount import recount, recount_dir
from static_consumer_lab.demo.rundata import RunData, load, write_run
from static_consumer_lab.demo.tally import tally


def both(run: RunData) -> Metrics:
    """The tally's numbers, after checking that the recount finds the same."""
    tallied, recounted = tally(run)["s"], recount(run)["s"]
    assert differences(tallied, recounted) == []
    return tallied


def eager_bounce() -> dict[str, list[Event]]:
    """a holds 0,1 and b holds 2,3; b restarts (dynamic, eager): a is revoked and takes 0..3, then the
    new b joins and the partitions are split the other way round (a: 2,3; b: 0,1)."""
    return {
        "a#1": [
            ev("start", 0),
            ev("assigned", 1, 0, 1),
            ev("revoked", 10.1, 0, 1),
            ev("assigned", 10.5, 0, 1, 2, 3),
            ev("revoked", 12.0, 0, 1, 2, 3),
            ev("assigned", 12.4, 2, 3),
            ev("reaped", 25, code=0),
        ],
        "b#1": [
            ev("start", 0),
            ev("assigned", 1, 2, 3),
            ev("signal", 10.0, signal="TERM"),
            ev("revoked", 10.05, 2, 3),
            ev("exit", 10.2, code=0),
        ],
        "b#2": [ev("start", 11.9), ev("assigned", 12.4, 0, 1), ev("reaped", 25, code=0)],
    }


def test_an_eager_restart_revokes_live_members_moves_partitions_and_leaves_short_gaps() -> None:
    m = both(make_run(eager_bounce()))
    assert (m.restarts, m.kills) == (1, 0)
    assert m.live_revocations == 2  # a's two; b's own shutdown revoke is not a live member's
    assert m.partition_moves == 4  # 2,3 went b -> a at 10.5; 0,1 went a -> b at 12.4
    # p0, p1: unowned 10.1-10.5 and 12.0-12.4; p2, p3: 10.05-10.5 and 12.0-12.4
    assert m.unowned_s == pytest.approx(2 * 0.8 + 2 * 0.85)
    assert m.longest_unowned_s == pytest.approx(0.45)


def test_a_static_restart_moves_nothing_and_its_partitions_wait_for_it() -> None:
    m = both(
        make_run(
            {
                "a#1": [ev("start", 0), ev("assigned", 1, 0, 1), ev("reaped", 30, code=0)],
                "b#1": [
                    ev("assigned", 1, 2, 3),
                    ev("signal", 10.0, signal="TERM"),
                    ev("revoked", 10.05, 2, 3),
                    ev("exit", 10.2, code=0),
                ],
                "b#2": [ev("start", 13.0), ev("assigned", 13.5, 2, 3), ev("reaped", 30, code=0)],
            }
        )
    )
    assert (m.live_revocations, m.partition_moves, m.restarts) == (0, 0, 1)
    assert m.unowned_s == pytest.approx(2 * (13.5 - 10.05))
    assert m.longest_unowned_s == pytest.approx(3.45)


def test_a_partition_never_owned_is_unowned_for_the_whole_window() -> None:
    m = both(make_run({"a#1": [ev("assigned", 1, 0, 1, 2), ev("reaped", 30, code=0)]}, window=(5, 20)))
    assert m.unowned_s == pytest.approx(15.0) and m.longest_unowned_s == pytest.approx(15.0)


def test_an_incarnation_that_died_without_a_word_owned_until_its_last_sign_of_life() -> None:
    # No signal, exit or reaped event: its holdings end at its last event (an alive tick at 12).
    silent = [ev("assigned", 1, 0), ev("alive", 11), ev("alive", 12)]
    m = both(make_run({"a#1": silent, "b#1": [ev("assigned", 1, 1, 2, 3), ev("reaped", 30, code=0)]}))
    assert m.unowned_s == pytest.approx(20 - 12)


def test_a_hard_kill_ends_ownership_at_the_signal_and_counts_as_a_kill() -> None:
    m = both(
        make_run(
            {
                "a#1": [ev("assigned", 1, 0, 1, 2, 3), ev("signal", 10, signal="KILL"), ev("reaped", 10.5)],
                "a#2": [ev("start", 12), ev("assigned", 14, 0, 1, 2, 3), ev("reaped", 30, code=0)],
            }
        )
    )
    assert (m.kills, m.restarts, m.partition_moves) == (1, 1, 0)
    assert m.unowned_s == pytest.approx(4 * 4.0)


def test_membership_events_after_an_incarnation_ended_are_ignored() -> None:
    late = [ev("assigned", 1, 0, 1, 2, 3), ev("exit", 8, code=0), ev("assigned", 9, 0), ev("revoked", 9.5, 0)]
    m = both(make_run({"a#1": late}))
    assert m.unowned_s == pytest.approx(4 * (20 - 8))
    assert m.live_revocations == 1  # it was never told to stop, so its revocation counts


def test_rebuilds_count_partitions_and_seconds_of_rebuilds_started_in_the_window() -> None:
    run = make_run(
        {
            "a#1": [
                ev("assigned", 1, 0, 1, 2, 3),
                ev("rebuild", 4, 0, 1, 2, 3, started=2.0, seconds=2.0),  # at formation: outside
                ev("rebuild", 12, 0, 1, started=11.0, seconds=1.0),
                ev("reaped", 30, code=0),
            ]
        }
    )
    m = both(run)
    assert (m.rebuilds, m.rebuild_s) == (2, 1.0)


def test_latency_duplicates_losses_and_lag_from_records() -> None:
    produced = [(0, 0, 10_000), (0, 1, 10_500), (1, 0, 11_000), (1, 1, 30_000), (0, 2, 4_000)]
    run = make_run(
        {
            "a#1": [
                ev("assigned", 1, 0, 1, 2, 3),
                records(4.2, (0, 2, 4_000, 4_100)),
                records(10.2, (0, 0, 10_000, 10_100)),
                records(12.6, (0, 1, 10_500, 12_500)),
                ev("reaped", 30, code=0),
            ],
            "b#1": [records(12.7, (0, 1, 10_500, 12_600), (1, 0, 11_000, 11_500))],
        },
        produced=produced,
    )
    m = both(run)
    assert (m.produced, m.duplicated, m.lost) == (5, 1, 1)
    # produced within the window: latencies 100, 2000 (first processing, not the duplicate) and 500
    assert (m.latency_p50_ms, m.latency_p99_ms, m.latency_max_ms) == (500, 2000, 2000)
    assert m.max_lag == 2  # at 11.000: 4 produced, 2 processed


def test_no_records_in_the_window_leave_latency_unknown() -> None:
    m = both(make_run({"a#1": [ev("assigned", 1, 0, 1, 2, 3)]}, produced=[(0, 0, 1_000)]))
    assert m.latency_p50_ms is None and m.latency_max_ms is None and m.lost == 1


def test_rebalances_are_broker_events_within_the_window_or_unknown() -> None:
    broker = [{"kind": "generation", "group": "g", "value": v, "ts": t} for v, t in ((1, 2), (2, 6), (3, 19))]
    assert both(make_run({}, broker=broker)).rebalances == 2
    assert both(make_run({})).rebalances is None


def test_broker_log_lines_become_generation_and_epoch_events() -> None:
    text = (
        "[2026-11-23 20:52:36,845] INFO [GroupCoordinator id=1] Stabilized group g1 generation 2 with 2 "
        "members. (org.apache.kafka.coordinator.group.GroupMetadataManager)\n"
        "[2026-11-23 20:52:37,000] INFO [GroupCoordinator id=1] [GroupId g2] Bumped group epoch to 5 with "
        "metadata hash 1. (org.apache.kafka.coordinator.group.GroupMetadataManager)\n"
        "[2026-11-23 20:52:38,000] INFO Stabilized group other generation 9 with 1 members.\n"
    )
    events = broker_log.parse(text, ["g1", "g2"])
    kinds = [(e["kind"], e["group"], e["value"]) for e in events]
    assert kinds == [("generation", "g1", 2), ("epoch", "g2", 5)]
    assert events[1]["ts"] - events[0]["ts"] == pytest.approx(0.155)


# ------------------------------------------------------------------------------ generated streams
KINDS = ["assigned", "revoked", "lost", "signal", "exit", "alive", "start", "records"]
_grid = st.integers(min_value=0, max_value=60).map(lambda n: n / 2)  # ties on purpose


@st.composite
def _incarnation(draw: st.DrawFn, partitions: int) -> list[Event]:
    events: list[Event] = []
    for ts in sorted(draw(st.lists(_grid, min_size=1, max_size=12))):
        kind = draw(st.sampled_from(KINDS))
        if kind in ("assigned", "revoked", "lost"):
            parts = draw(st.sets(st.integers(0, partitions - 1), max_size=partitions))
            events.append(ev(kind, ts, *sorted(parts)))
        elif kind == "signal":
            events.append(ev("signal", ts, signal=draw(st.sampled_from(["TERM", "KILL"]))))
        elif kind == "records":
            rows = draw(st.lists(st.tuples(st.integers(0, partitions - 1), st.integers(0, 5)), max_size=4))
            done = int(ts * 1000)
            events.append(records(ts, *((p, o, 1000 * o + 100 * p, done) for p, o in rows)))
        else:
            events.append(ev(kind, ts))
    return events


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.lists(_incarnation(n), min_size=0, max_size=4).map(lambda incs: (n, incs))
    ),
    st.tuples(_grid, _grid),
    st.booleans(),
)
def test_tally_and_recount_agree_on_generated_streams(
    shape: tuple[int, list[list[Event]]], bounds: tuple[float, float], shuffle_names: bool
) -> None:
    partitions, incs = shape
    w0, w1 = sorted(bounds)
    names = [f"{'m' if shuffle_names else 'm' + str(i % 2)}{i}#{i}" for i in range(len(incs))]
    produced = [(p, o, 1000 * o + 100 * p) for p in range(partitions) for o in range(6)]
    streams = dict(zip(names, incs, strict=True))
    run = make_run(streams, produced=produced, window=(w0, w1), partitions=partitions)
    assert differences(tally(run)["s"], recount(run)["s"]) == []


# ------------------------------------------------------------------------------------- files
def test_the_recount_reads_back_what_a_run_wrote(tmp_path: Path) -> None:
    broker: list[Event] = [{"kind": "epoch", "group": "g", "value": 3, "ts": 11}]
    run = make_run(eager_bounce(), produced=[(0, 0, 10_000)], broker=broker)
    write_run(tmp_path, run)
    loaded, recounted = recount_dir(tmp_path)
    assert differences(recounted["s"], tally(run)["s"]) == []
    assert load(tmp_path).window == run.window and loaded.partitions == 4


def test_recount_command_prints_the_table_and_checks_the_saved_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(eager_bounce())
    write_run(tmp_path / "events", run)
    assert demo_main(["--recount", str(tmp_path)]) == 0
    assert "partition moves" in capsys.readouterr().out
    saved = tally(run)["s"].to_json()
    (tmp_path / "bounce.json").write_text(json.dumps({"strategies": {"s": saved}}))
    assert demo_main(["--recount", str(tmp_path)]) == 0
    saved["partition_moves"] += 1
    (tmp_path / "bounce.json").write_text(json.dumps({"strategies": {"s": saved}}))
    assert demo_main(["--recount", str(tmp_path)]) == 1
    assert "DISAGREES" in capsys.readouterr().out
    assert demo_main(["--recount", str(tmp_path / "nothing")]) == 2
