"""What the demo prints and draws around its table: the header names every knob of the run (the hard-kill
round also when it is off), the command line builds the configuration a user asked for and refuses an
unknown strategy, and the picture is drawn from a run's events."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
from demo_events import ev, make_run, records

from static_consumer_lab.demo import plot
from static_consumer_lab.demo.main import _KNOBS, config, parser
from static_consumer_lab.demo.main import main as demo_main
from static_consumer_lab.demo.report import header
from static_consumer_lab.demo.strategies import ALL_STRATEGIES, DEFAULT_STRATEGIES, DemoConfig
from static_consumer_lab.demo.tally import tally

UNUSUAL = DemoConfig(
    members=7,
    rounds=3,
    partitions=19,
    rate_per_s=123,
    restart_delay_s=4.5,
    processing_ms=2.5,
    state_warmup_s=0.75,
    session_timeout_s=33.0,
    lab=True,
    kill=True,
)
# DemoConfig field -> what the header says for UNUSUAL's value.
SHOWN = {
    "members": "7 members",
    "rounds": "3 graceful round(s)",
    "partitions": "19 partitions",
    "rate_per_s": "123 records/s",
    "restart_delay_s": "restart delay 4.5 s",
    "processing_ms": "processing 2.5 ms/record",
    "state_warmup_s": "state warm-up 0.75 s",
    "session_timeout_s": "classic session 33 s / heartbeat 0.5 s, KIP-848 session 33 s / heartbeat 0.5 s",
    "lab": "LAB BROKER",
    "kill": "hard-kill round: yes",
}


def _header(cfg: DemoConfig) -> str:
    meta = {
        "config": asdict(cfg),
        "broker_profile": "lab" if cfg.lab else "stock",
        "sessions_ms": cfg.sessions(),
        "max_poll_ms": 60000,
        "wall_s": 12.5,
    }
    return header(make_run({}, partitions=cfg.partitions, meta=meta))


def test_every_command_line_knob_is_checked_in_the_header() -> None:
    knobs = {field for _flag, field, _kind, _text in _KNOBS} | {"partitions", "kill", "lab"}
    assert knobs <= set(SHOWN), f"a knob the header test does not check: {sorted(knobs - set(SHOWN))}"


@pytest.mark.parametrize("field", sorted(SHOWN))
def test_the_header_shows_each_knob(field: str) -> None:
    assert SHOWN[field] in _header(UNUSUAL)


def test_the_header_says_when_there_is_no_hard_kill_round() -> None:
    text = _header(DemoConfig(kill=False))
    assert "hard-kill round: no" in text and "hard-kill round: yes" not in text
    assert "max.poll.interval.ms 60000" in text and "run wall time 12.5 s" in text


def test_the_default_runs_on_a_stock_broker_with_each_protocols_hosted_session_and_heartbeat() -> None:
    text = _header(DemoConfig())
    assert "stock broker" in text and "LAB" not in text
    assert "classic session 45 s / heartbeat 3 s, KIP-848 session 45 s / heartbeat 5 s" in text
    lab = config(parser().parse_args(["--lab"]))
    assert lab.lab and lab.sessions() == {"classic": (20000, 500), "consumer": (20000, 500)}
    assert "LAB BROKER" in _header(lab)


def test_a_session_timeout_without_lab_is_refused() -> None:
    with pytest.raises(ValueError, match="--session-timeout-s needs --lab"):
        DemoConfig(session_timeout_s=10.0)


def test_the_help_gives_each_knobs_default_once_and_never_none() -> None:
    text = " ".join(parser().format_help().split())
    assert "(default None)" not in text
    assert text.count("KIP-848 (default 20)") == 1 and "(default 20) (default" not in text
    assert "(default 2.0)" in text  # --restart-delay-s: a knob whose default is a value


def test_the_default_command_line_runs_the_default_strategies_with_two_partitions_per_member() -> None:
    cfg = config(parser().parse_args(["--members", "5"]))
    assert cfg.strategies == DEFAULT_STRATEGIES and "eager" not in cfg.strategies
    assert (cfg.members, cfg.partitions, cfg.kill) == (5, 10, False)
    assert config(parser().parse_args([])) == DemoConfig()


def test_all_strategies_and_a_chosen_list() -> None:
    assert config(parser().parse_args(["--strategies", "all", "--kill"])).strategies == ALL_STRATEGIES
    picked = config(parser().parse_args(["--strategies", "static, eager"]))
    assert picked.strategies == ("static", "eager")


def test_an_unknown_strategy_exits_2_naming_it_before_any_broker_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert demo_main(["--strategies", "cooperative,sticky", "--out", "/nonexistent/never"]) == 2
    err = capsys.readouterr().err
    assert "--strategies" in err and "'sticky'" in err and "static-kip848" in err


def test_members_sort_by_number_in_the_legend() -> None:
    names = ["demo-10", "demo-2", "demo-0", "demo-1", "demo-11"]
    assert sorted(names, key=plot.member_order) == ["demo-0", "demo-1", "demo-2", "demo-10", "demo-11"]


def test_the_picture_is_drawn_from_a_made_up_run(tmp_path: Path) -> None:
    # 12 members, one partition each; demo-3 restarts at 10 s and its partition waits for it; demo-5
    # takes over partition 7 from demo-7 and rebuilds its state first.
    streams = {}
    produced = []
    for m in range(12):
        rows = [(m, o, 4000 + 1000 * o, 4150 + 1000 * o) for o in range(20)]
        produced += [(p, o, c) for p, o, c, _d in rows]
        if m == 3:
            streams["demo-3#1"] = [
                ev("start", 0),
                ev("assigned", 1, 3),
                records(9, *rows[:6]),
                ev("signal", 10, signal="TERM"),
                ev("revoked", 10.1, 3),
                ev("exit", 10.3, code=0),
            ]
            late = [(p, o, c, c + 4000) for p, o, c, _d in rows[6:]]
            streams["demo-3#2"] = [ev("start", 13), ev("assigned", 13.5, 3), records(24, *late)]
        else:
            streams[f"demo-{m}#1"] = [ev("start", 0), ev("assigned", 1, m), records(24, *rows)]
    streams["demo-5#1"] += [ev("assigned", 12, 7), ev("rebuild", 12.1, 7, started=12.1, seconds=1.0)]
    meta = {"config": {"lead_s": 4.0, "tail_s": 5.0}, "schedule": [{"ts": 10.0}]}
    run = make_run(streams, produced=produced, window=(9.0, 16.0), partitions=12, meta=meta)
    out = tmp_path / "bounce.png"

    plot.write(run, tally(run), out)

    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
